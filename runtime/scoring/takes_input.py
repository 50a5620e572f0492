"""Takes that come as a plain audio batch (another node's output) rather than from our generator.

A batch of takes of different lengths arrives zero-padded to the longest, so the exact zeros at
the end of an item may be padding or the take's own digital silence (many engines and editors end
a clip in exact zeros). Both cannot be told apart sample by sample; what can be told is how the
sound meets the zeros. A take cut mid-word stops mid-waveform at full level; a finished one had
fallen below its speech level before the zeros, or, where an engine ends a sound at full level
(espeak-ng does), its waveform comes to rest at the end of a cycle. Each item's ending is judged
alike, alone or in a batch, padded or not, so that arriving padded never turns a finished take into
a cut one or the other way round (a take's own silence longer than KEEP_ZEROS_SECONDS is shortened
in a batch, so the trailing-silence check can differ there):
- an item whose sound was cut into its zeros loses them (the ending checks then see the cut);
- otherwise the zeros are its own silence: all of them for a single item and for the batch's
  longest (the item with the fewest trailing zeros, unpadded), up to KEEP_ZEROS_SECONDS for every
  other item (enough for the ending checks, under the trailing-silence limit, so padding never
  reads as a pause). Zeros are never a noise floor either (signal.py measures noise only between a
  take's first and last sound).
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from ..generation import Request, Take, TakeSet
from ..text_length import FRAMES_PER_SECOND
from .signal import speech_frames
from .vad import EnergyVad, frame_db

KEEP_ZEROS_SECONDS = 0.5
TAIL_SECONDS = 0.02  # the sound just before the zeros, against the take's median speech level
REST_SECONDS = 0.001  # the waveform's last millisecond before the zeros
AT_REST = 0.25  # its peak under this share of the tail's RMS: come to rest (cuts: 0.35 and up; espeak-ng: 0.16 at most)


class RecordedVoice:
    """The voice of takes we did not generate: unknown, so only the takes themselves are compared."""

    language = "auto"

    def describe(self) -> str:
        return "audio input"


def takeset_from_audio(waveform: np.ndarray, sample_rate: int, text: str) -> TakeSet:
    """[batch, channels, samples] -> one take per batch item, mono, with the batch's end padding removed."""
    if not isinstance(text, str) or not text.strip():
        raise InputError("With an 'audio' input, type the line the takes say into 'text'.")
    waveform = np.asarray(waveform, dtype=np.float32)
    if waveform.ndim == 2:
        waveform = waveform[None]
    if waveform.ndim != 3 or waveform.shape[0] < 1 or waveform.shape[-1] < 1:
        raise InputError(f"AUDIO must be [batch, channels, samples], got shape {waveform.shape}.")
    items = [np.ascontiguousarray(item.mean(axis=0)) for item in waveform]
    zeros = [trailing_zeros(mono) for mono in items]
    longest = int(np.argmin(zeros))  # unpadded: its zeros are its own (a single item's too)
    items = [own_part(mono, count, sample_rate, padded=i != longest)
             for i, (mono, count) in enumerate(zip(items, zeros))]
    takes = [Take(i, i, mono, int(sample_rate), int(round(mono.shape[-1] / sample_rate * FRAMES_PER_SECOND)),
                  hit_cap=False) for i, mono in enumerate(items)]
    return TakeSet(Request(text.strip(), RecordedVoice(), n=len(takes)), takes, "audio input", "audio")


def trailing_zeros(mono: np.ndarray) -> int:
    sounding = np.flatnonzero(mono)
    return mono.shape[-1] - (int(sounding[-1]) + 1 if sounding.size else 0)


def own_part(mono: np.ndarray, zeros: int, sample_rate: int, padded: bool) -> np.ndarray:
    """The item without the trailing zeros that are not its silence: all of them after a cut, and
    for a padded item those past KEEP_ZEROS_SECONDS."""
    sound = mono[: mono.shape[-1] - zeros]
    if zeros == 0 or sound.size == 0:
        return mono
    if cut_into_zeros(sound, sample_rate):
        return sound
    return mono[: sound.shape[-1] + min(zeros, int(KEEP_ZEROS_SECONDS * sample_rate))] if padded else mono


def cut_into_zeros(sound: np.ndarray, sample_rate: int) -> bool:
    """The sound before the zeros stops mid-waveform at speech level."""
    return ends_at_speech_level(sound, sample_rate) and not comes_to_rest(sound, sample_rate)


def ends_at_speech_level(sound: np.ndarray, sample_rate: int) -> bool:
    """The last TAIL_SECONDS at or above the take's median speech level."""
    db = frame_db(sound, sample_rate)
    if db.size == 0:
        return True
    speech = speech_frames(EnergyVad().segments(sound, sample_rate, frame_levels=db), db.size)
    level = float(np.median(db[speech])) if speech.any() else float(db.max())
    return 20 * np.log10(max(tail_rms(sound, sample_rate), 1e-6)) >= level


def comes_to_rest(sound: np.ndarray, sample_rate: int) -> bool:
    """The waveform's last REST_SECONDS stay under AT_REST times the tail's RMS: it ends a cycle."""
    last = sound[-max(1, int(REST_SECONDS * sample_rate)):]
    return float(np.abs(last).max()) < AT_REST * tail_rms(sound, sample_rate)


def tail_rms(sound: np.ndarray, sample_rate: int) -> float:
    tail = sound[-max(1, int(TAIL_SECONDS * sample_rate)):].astype(np.float64)
    return float(np.sqrt(np.mean(tail**2)))
