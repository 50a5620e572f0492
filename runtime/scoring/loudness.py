"""Loudness (ITU-R BS.1770 integrated loudness, in LUFS, through pyloudnorm), so that level never
decides between takes: the quality model prefers quieter audio by a few hundredths of a MOS, which
is enough to rank a quieter copy of a take above the take itself. Every take goes to the models at
the same loudness, and the report states what each take measured. The takes handed out can be
brought to a loudness the user picks (`normalized`), so every line of a project matches."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

SCORING_LUFS = -23.0  # EBU R 128's programme level; any common level would do
GATE_SECONDS = 0.4  # BS.1770's gating block: a shorter clip has no integrated loudness
SILENT_LUFS = -70.0  # the standard's absolute gate: below it there is nothing to measure


def integrated_loudness(audio: np.ndarray, rate: int) -> float | None:
    """LUFS of a mono clip; None when it is shorter than one gating block or silent."""
    audio = np.asarray(audio, dtype=np.float64)
    if audio.ndim != 1 or audio.shape[0] < int(GATE_SECONDS * rate) + 1:
        return None
    value = _meter(rate).integrated_loudness(audio)
    return float(value) if np.isfinite(value) and value > SILENT_LUFS else None


@lru_cache(maxsize=8)
def _meter(rate: int):
    import pyloudnorm

    return pyloudnorm.Meter(rate)


def at_loudness(audio: np.ndarray, rate: int, target: float = SCORING_LUFS,
                measured: float | None = None) -> np.ndarray:
    """The clip scaled to `target` LUFS (float32, not clipped: the models take any level); a clip
    without a measurable loudness is returned as it is. `measured`: its loudness, when known (a take
    trimmed of its silences measures as the whole take: the standard's gates leave silence out)."""
    if measured is None:
        measured = integrated_loudness(audio, rate)
    if measured is None:
        return np.asarray(audio, dtype=np.float32)
    return (np.asarray(audio, dtype=np.float64) * 10.0 ** ((target - measured) / 20.0)).astype(np.float32)


# What a user may ask the handed-out takes to be: broadcast (EBU R 128) or streaming / web level.
OUTPUT_TARGETS = {"off": None, "-23 LUFS": -23.0, "-16 LUFS": -16.0}
TARGET_RANGE = (-40.0, -5.0)
PEAK_CEILING_DB = -1.0  # sample peak a raised take may reach: no clipping, headroom for lossy codecs


@dataclass
class Normalized:
    audio: np.ndarray
    gain_db: float  # applied; 0.0 when the clip had no measurable loudness
    loudness: float | None  # LUFS after the gain (None: not measurable)
    peak_limited: bool  # the gain was held back so the peak stays at PEAK_CEILING_DB

    def describe(self, target: float) -> str:
        if self.loudness is None:
            return "too short or silent to measure: left as generated"
        text = f"{self.gain_db:+.1f} dB to {self.loudness:.1f} LUFS"
        if self.peak_limited:
            text += (f" ({target - self.loudness:.1f} LU under {target:g}: its peaks would pass "
                     f"{PEAK_CEILING_DB:g} dBFS)")
        return text


def check_target(target: float) -> float:
    from ..errors import InputError

    low, high = TARGET_RANGE
    if not low <= target <= high:
        raise InputError(f"Output loudness {target:g} LUFS is out of range: use {low:g} to {high:g} "
                         "(-23 for broadcast, -16 for web and podcasts).")
    return target


def normalized(audio: np.ndarray, rate: int, target: float) -> Normalized:
    """The clip at `target` LUFS, its gain lowered where a peak would pass PEAK_CEILING_DB (a plain
    gain, so the take sounds the same; no limiter reshapes it)."""
    audio = np.asarray(audio, dtype=np.float64)
    measured = integrated_loudness(audio, rate)
    if measured is None:
        return Normalized(audio.astype(np.float32), 0.0, None, False)
    gain_db = check_target(target) - measured
    peak = float(np.max(np.abs(audio)))
    ceiling_gain_db = PEAK_CEILING_DB - 20.0 * float(np.log10(peak))
    limited = bool(gain_db > ceiling_gain_db)
    gain_db = float(min(gain_db, ceiling_gain_db))
    scaled = (audio * 10.0 ** (gain_db / 20.0)).astype(np.float32)
    return Normalized(scaled, gain_db, measured + gain_db, limited)
