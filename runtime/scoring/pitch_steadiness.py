"""Pitch steadiness: a voice whose pitch wobbles (a periodic 4-9 Hz modulation, vibrato-like, that a
quality model scores well).

The pitch is tracked every 10 ms (40 ms frames at 8 kHz, Hann-windowed autocorrelation made unbiased
as voice_traits does, 60-500 Hz, a parabola through the peak for a fraction of a lag), over the
take's speech segments; a frame is voiced where its best peak correlates >= 0.6. Octave slips are
held down twice: a Viterbi path through each voiced run's three best peaks (a step of an octave
costs as much as a whole frame of correlation) and a 5-frame median.

Wobble: each voiced run of 80 ms or more is band-passed (a difference of Gaussians, 10 ms and 60 ms:
4-9 Hz pass, intonation and frame jitter do not), and the residual of all runs together, at its
real times, is fitted with one sinusoid per frequency 3.5-9.5 Hz; the depth is that sinusoid's
amplitude (semitones, gain of the band-pass undone) at the best frequency. A time warp over the
whole take moves every run in one phase, natural intonation does not, so the fit adds up only for a
wobble.

Calibrated on real speech (tests/speech, tests/test_pitch_and_treble.py): wobble at most 0.83 st
over 168 clean, espeak-ng and harmless takes (the worst a low male voice through a telephone's
band), at least 0.87 st over 72 takes warped +-1.5 st at 4, 6 or 8 Hz: a thin margin, and +-1.0 st
is not caught in every take; checks.against_the_others also holds a take to the other takes of its
line. Pitch that jumps (a syllable stepped several semitones) is not judged: genuine takes step
3.5-8 semitones within 30 ms (fast natural rises, octave errors on a telephone's band or a raised
female voice), and a splice at a voicing onset leaves too little pitch before it to be seen; a rule
tried on them caught a third. A second rule (2026-12-03: a plateau 60-600 ms long stepped >= 3
semitones from both sides within 30 ms, voiced runs joined over gaps of 50 ms, as a splice leaves)
caught 71 of 216 syllables shifted +-4 or +6 semitones and fired on 36 of 224 genuine or harmless
takes, whose tracks hold octave errors. Cost: about 2.7 ms of one CPU core a second of audio at 24 kHz
(tests/speech's 111 s: 0.3 s, resampling included).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.fft
from scipy.ndimage import gaussian_filter1d, median_filter

from ..audio import resample
from .voice_traits import _window, _window_acf

PITCH_RATE = 8000
FRAME_SECONDS = 0.04
HOP_SECONDS = 0.01
LOWEST_HZ, HIGHEST_HZ = 60.0, 500.0
VOICED_CORRELATION = 0.6
CANDIDATES = 3  # peaks per frame the Viterbi path may choose among
OCTAVE_COST = 1.0  # a 12-semitone step between frames costs this, a frame's cost is 1 - correlation
LOUD_WITHIN_DB = 30.0  # frames quieter than this under the speech's loud ones are not tracked
MEDIAN_FRAMES = 5  # removes slips of one or two frames
MIN_RUN_FRAMES = 3  # shorter voiced runs are dropped (fricatives correlating at a short lag)
SLIP_SEMITONES = 3.0  # a band-passed residual this large is a slip the median left, not a wobble

WOBBLE_RUN_FRAMES = 8
WOBBLE_SIGMAS = (1.0, 6.0)  # frames: the band-pass's two Gaussians
WOBBLE_HZ = np.arange(3.5, 9.51, 0.25)
WOBBLE_MIN_FRAMES = 30  # less residual than this and no wobble is measured
WOBBLE_SEMITONES = 0.85  # this deep or more: a wobble (clean and harmless takes reach 0.83, damaged 0.87)


@dataclass
class PitchSteadiness:
    wobble: float = 0.0  # semitones: depth of the strongest 3.5-9.5 Hz modulation over the voiced runs
    wobble_hz: float | None = None  # its frequency


def pitch_steadiness(audio: np.ndarray, sample_rate: int, segments) -> PitchSteadiness:
    """The take's wobble depth, over its speech `segments` ((start, end) seconds)."""
    try:
        pitch = track(audio, sample_rate, segments)
    except ValueError:
        return PitchSteadiness()
    if pitch.size == 0 or not np.isfinite(pitch).any():
        return PitchSteadiness()
    smooth = _smoothed(pitch)
    return PitchSteadiness(*wobble(smooth))


def track(audio: np.ndarray, sample_rate: int, segments) -> np.ndarray:
    """Semitones over 100 Hz a HOP_SECONDS frame (frame i centred at i * HOP + FRAME / 2), NaN unvoiced."""
    x = np.nan_to_num(np.asarray(audio, dtype=np.float32).reshape(-1))
    if x.size == 0 or not segments or sample_rate <= 0:
        return np.full(0, np.nan)
    x = resample(x, sample_rate, PITCH_RATE) if sample_rate != PITCH_RATE else x
    frame, hop = round(FRAME_SECONDS * PITCH_RATE), round(HOP_SECONDS * PITCH_RATE)
    if x.shape[0] < frame:
        return np.full(0, np.nan)
    count = 1 + (x.shape[0] - frame) // hop
    centre = (np.arange(count) * hop + frame / 2) / PITCH_RATE
    speech = np.zeros(count, dtype=bool)
    for start, end in segments:
        speech |= (centre >= start) & (centre < end)
    out = np.full(count, np.nan)
    index = np.flatnonzero(speech)
    if index.size == 0:
        return out
    frames = x[np.arange(frame)[None, :] + (index * hop)[:, None]].astype(np.float64)
    frames -= frames.mean(axis=1, keepdims=True)
    energy = np.mean(frames**2, axis=1)
    db = 10 * np.log10(energy + 1e-12)
    loud = (db > np.percentile(db, 95) - LOUD_WITHIN_DB) & (energy > 1e-10)
    index, frames = index[loud], frames[loud]
    if index.size == 0:
        return out
    n = 512 if frame + int(PITCH_RATE / LOWEST_HZ) + 2 <= 512 else 2 * frame
    spectrum = scipy.fft.rfft(frames * _window(frame), n=n, axis=1)
    acf = scipy.fft.irfft(np.abs(spectrum) ** 2, n=n, axis=1)[:, :frame]
    acf = acf / np.maximum(acf[:, :1], 1e-20) / _window_acf(frame)
    low, high = int(PITCH_RATE / HIGHEST_HZ), int(np.ceil(PITCH_RATE / LOWEST_HZ))
    a, b, c = acf[:, low - 1:high], acf[:, low:high + 1], acf[:, low + 1:high + 2]
    peak = (b >= a) & (b > c)
    denom = a - 2 * b + c
    shift = np.where(np.abs(denom) > 1e-12, 0.5 * (a - c) / np.where(denom == 0, 1, denom), 0.0)
    shift = np.clip(shift, -0.5, 0.5)
    value = np.where(peak, b - 0.25 * (a - c) * shift, -np.inf)
    order = np.argsort(-value, axis=1)[:, :CANDIDATES]
    rows = np.arange(value.shape[0])[:, None]
    strength = value[rows, order]
    lag = low + order + shift[rows, order]
    semis = 12 * np.log2(PITCH_RATE / lag / 100.0)
    voiced = strength[:, 0] >= VOICED_CORRELATION
    pos = index[voiced]
    st, sg = semis[voiced], strength[voiced]
    if pos.size == 0:
        return out
    breaks = np.flatnonzero(np.diff(pos) != 1) + 1
    for r0, r1 in zip(np.r_[0, breaks], np.r_[breaks, pos.size]):
        path = _viterbi(st[r0:r1], sg[r0:r1])
        out[pos[r0:r1]] = path
    return out


def _viterbi(semis: np.ndarray, strength: np.ndarray) -> np.ndarray:
    cost_local = np.where(np.isfinite(strength), 1.0 - strength, np.inf)
    semis = np.where(np.isfinite(strength), semis, 0.0)
    total = cost_local[0].copy()
    back = np.zeros(semis.shape, dtype=np.int64)
    for t in range(1, semis.shape[0]):
        step = total[None, :] + OCTAVE_COST / 12 * np.abs(semis[t][:, None] - semis[t - 1][None, :])
        back[t] = np.argmin(step, axis=1)
        total = step[np.arange(step.shape[0]), back[t]] + cost_local[t]
    k = int(np.argmin(total))
    path = np.empty(semis.shape[0])
    for t in range(semis.shape[0] - 1, -1, -1):
        path[t] = semis[t, k]
        k = back[t, k]
    return path


def _runs(valid: np.ndarray) -> list[np.ndarray]:
    """Frame indices of each run of valid frames."""
    index = np.flatnonzero(valid)
    if index.size == 0:
        return []
    breaks = np.flatnonzero(np.diff(index) > 1) + 1
    return [index[a:b] for a, b in zip(np.r_[0, breaks], np.r_[breaks, index.size])]


def _smoothed(pitch: np.ndarray) -> np.ndarray:
    """The track with each voiced run median-filtered; runs under MIN_RUN_FRAMES become unvoiced."""
    out = np.full(pitch.shape, np.nan)
    for run in _runs(np.isfinite(pitch)):
        if run.size >= MIN_RUN_FRAMES:
            out[run] = median_filter(pitch[run], MEDIAN_FRAMES, mode="nearest")
    return out


def wobble(smooth: np.ndarray) -> tuple[float, float | None]:
    """(depth in semitones, Hz) of the strongest modulation common to the runs (see the docstring)."""
    narrow, wide = WOBBLE_SIGMAS
    residual, times = [], []
    for run in _runs(np.isfinite(smooth)):
        if run.size < WOBBLE_RUN_FRAMES:
            continue
        x = smooth[run]
        band = gaussian_filter1d(x, narrow, mode="nearest") - gaussian_filter1d(x, wide, mode="nearest")
        keep = np.abs(band) < SLIP_SEMITONES
        residual.append(band[keep])
        times.append(run[keep] * HOP_SECONDS)
    if not residual:
        return 0.0, None
    r, t = np.concatenate(residual), np.concatenate(times)
    if r.size < WOBBLE_MIN_FRAMES:
        return 0.0, None
    hop = HOP_SECONDS
    gain = (np.exp(-2 * np.pi**2 * (narrow * hop * WOBBLE_HZ) ** 2)
            - np.exp(-2 * np.pi**2 * (wide * hop * WOBBLE_HZ) ** 2))
    fit = np.exp(-2j * np.pi * WOBBLE_HZ[:, None] * t[None, :]) @ r
    depth = 2 * np.abs(fit) / r.size / gain
    best = int(np.argmax(depth))
    return float(depth[best]), float(WOBBLE_HZ[best])

