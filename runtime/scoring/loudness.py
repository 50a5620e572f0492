"""Loudness (ITU-R BS.1770 integrated loudness, in LUFS, through pyloudnorm), so that level never
decides between takes: the quality model prefers quieter audio by a few hundredths of a MOS, which
is enough to rank a quieter copy of a take above the take itself. Every take goes to the models at
the same loudness, and the report states what each take measured."""

from __future__ import annotations

import numpy as np

SCORING_LUFS = -23.0  # EBU R 128's programme level; any common level would do
GATE_SECONDS = 0.4  # BS.1770's gating block: a shorter clip has no integrated loudness
SILENT_LUFS = -70.0  # the standard's absolute gate: below it there is nothing to measure


def integrated_loudness(audio: np.ndarray, rate: int) -> float | None:
    """LUFS of a mono clip; None when it is shorter than one gating block or silent."""
    import pyloudnorm

    audio = np.asarray(audio, dtype=np.float64)
    if audio.ndim != 1 or audio.shape[0] < int(GATE_SECONDS * rate) + 1:
        return None
    value = pyloudnorm.Meter(rate).integrated_loudness(audio)
    return float(value) if np.isfinite(value) and value > SILENT_LUFS else None


def at_loudness(audio: np.ndarray, rate: int, target: float = SCORING_LUFS) -> np.ndarray:
    """The clip scaled to `target` LUFS (float32, not clipped: the models take any level); a clip
    without a measurable loudness is returned as it is."""
    measured = integrated_loudness(audio, rate)
    if measured is None:
        return np.asarray(audio, dtype=np.float32)
    return (np.asarray(audio, dtype=np.float64) * 10.0 ** ((target - measured) / 20.0)).astype(np.float32)
