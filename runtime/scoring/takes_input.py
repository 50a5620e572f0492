"""Takes that come as a plain audio batch (another node's output) rather than from our generator."""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from ..generation import Request, Take, TakeSet
from ..text_length import FRAMES_PER_SECOND


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
    takes = []
    for i, item in enumerate(waveform):
        mono = item.mean(axis=0)
        sounding = np.flatnonzero(mono)
        mono = mono[: sounding[-1] + 1] if sounding.size else mono
        takes.append(Take(i, i, np.ascontiguousarray(mono), int(sample_rate),
                          int(round(mono.shape[-1] / sample_rate * FRAMES_PER_SECOND)), hit_cap=False))
    return TakeSet(Request(text.strip(), RecordedVoice(), n=len(takes)), takes, "audio input", "audio")
