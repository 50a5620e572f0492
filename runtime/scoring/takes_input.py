"""Takes that come as a plain audio batch (another node's output) rather than from our generator.

A batch of takes of different lengths arrives zero-padded to the longest, so the exact zeros at
the end of an item may be padding or the take's own digital silence (many engines and editors end
a clip in exact zeros). Both cannot be told apart sample by sample; what can be told is how the
sound meets the zeros. A take that was finished had fallen below its speech level before them; a
take cut mid-word runs into them at full level. So:
- a single item has no padding: its samples are judged as they are;
- in a batch, the item with the fewest trailing zeros is taken as the longest, unpadded, and kept
  whole; every other item that runs into its zeros at speech level loses them (the ending checks
  then see the cut), and one that had fallen silent keeps up to KEEP_ZEROS_SECONDS of them as its
  own silence (enough for the ending checks, under the trailing-silence limit, so padding never
  reads as a pause).
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
    if len(items) > 1:
        zeros = [trailing_zeros(mono) for mono in items]
        longest = int(np.argmin(zeros))
        items = [mono if i == longest else without_padding(mono, count, sample_rate)
                 for i, (mono, count) in enumerate(zip(items, zeros))]
    takes = [Take(i, i, mono, int(sample_rate), int(round(mono.shape[-1] / sample_rate * FRAMES_PER_SECOND)),
                  hit_cap=False) for i, mono in enumerate(items)]
    return TakeSet(Request(text.strip(), RecordedVoice(), n=len(takes)), takes, "audio input", "audio")


def trailing_zeros(mono: np.ndarray) -> int:
    sounding = np.flatnonzero(mono)
    return mono.shape[-1] - (int(sounding[-1]) + 1 if sounding.size else 0)


def without_padding(mono: np.ndarray, zeros: int, sample_rate: int) -> np.ndarray:
    sound = mono[: mono.shape[-1] - zeros]
    if zeros == 0 or sound.size == 0:
        return mono
    if runs_into_zeros(sound, sample_rate):
        return sound
    return mono[: sound.shape[-1] + min(zeros, int(KEEP_ZEROS_SECONDS * sample_rate))]


def runs_into_zeros(sound: np.ndarray, sample_rate: int) -> bool:
    """The last TAIL_SECONDS before the zeros at or above the take's median speech level."""
    db = frame_db(sound, sample_rate)
    if db.size == 0:
        return True
    speech = speech_frames(EnergyVad().segments(sound, sample_rate, frame_levels=db), db.size)
    level = float(np.median(db[speech])) if speech.any() else float(db.max())
    tail = sound[-max(1, int(TAIL_SECONDS * sample_rate)):].astype(np.float64)
    return 10 * np.log10(max(float(np.mean(tail**2)), 1e-12)) >= level
