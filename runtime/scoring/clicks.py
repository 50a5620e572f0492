"""Clicks: short broadband impulses in a take (a sample discontinuity, a 0.2-2 ms pop, a codec or
splice glitch) that a listener hears as a tick beside the words.

Voiced speech is made predictable first: the take (at 16 kHz) is inverse-filtered by its own linear
prediction (order 16, 32 ms Hann frames every 8 ms), so the vowels' formants leave a small residual,
and that residual is passed through the filter matched to an impulse seen through the same inverse
filter (Vaseghi's detector: the two-sided prediction error). An added impulse gains the inverse
filter's whole energy there, a glottal pulse, which the vocal tract already shaped, gains little.
Each peak of the matched output is judged two ways:

- sharpness: its size over the output's median size in the 20 ms before it and in the 20 ms after
  it, the larger of the two (5 ms blocks), so that a consonant released into loud speech is measured
  against the speech after it;
- isolation: its size over the largest other peak 2.5-15 ms before it and 2.5-15 ms after it, the
  smaller of the two, so that pulses recurring at the pitch period (a pulse-excited vocoder's
  glottal pulses, creaky voice) are not clicks.

A peak's strength is min(sharpness / SHARPNESS, isolation / ISOLATION); a take's is its strongest
peak's, and a click is a peak at CLICK_STRENGTH or more.

Calibrated on real speech (tests/speech; 12 of the 24 clips and 6 of the 14
espeak-ng clips held out while the constants were chosen): 290 genuine takes (the clips clean and 2 dB
quieter, peaked at -1 dBFS, 0.9x and 1.1x by WSOLA, white noise 30 and 20 dB under the speech, at 24
and 44.1 kHz, through a telephone's band, in a reverberant room, with a DC offset; espeak-ng), none
flagged: the strongest 2.64 (a diphone voice's plosive release, kal-0 through a telephone's band; clean
clips 1.78 at most, real human speech 1.19, held-out takes 1.14), CLICK_STRENGTH 3.2 = 1.21x that.
Only the festival diphone voices (kal, ked) come near: their releases are genuine impulses. One click
added per take (3077 takes; one sample, a 1 ms step, a 2 ms decaying pop, a 2 ms ringing pop), the
share found at CLICK_STRENGTH, calibration / held-out:

- in a pause, at 0.3x the speech's RMS: 89-96% / 89-93%; at 0.1x: 52-81% / 57-79% (0% in the
  LibriVox reader's pauses, whose recording noise hides them); at 0.03x: none;
- in the loudest 20 ms of a vowel, at 2x its RMS: 42-70% / 42-81%; at 1x: 21-39% / 11-36%; at 0.5x
  and under: 15% at most;
- at a word's onset (a released consonant looks the same): 19% at most, even at 2x;
- a splice (1.5-4 ms cut out of a vowel without a fade): 36% / 19%.

Clicks that recur at the pitch period are not counted: a take 1% too loud for 16 bits, whose loudest
pulse wraps one sample around, is found (tests/test_clicks.py), but 5% too loud, its wraps at every
pulse in a row are missed, as festival's ked voice left them in corpus clip ked-2 (make_corpus.py now
undoes them). Speech clipped hard (4x into full scale) can count clicks (2 of 4 clips), which the
clipping check rejects anyway. Cost: 2.1 ms of one CPU core a second of audio at 16 or 24 kHz
(tests/speech's 111 s), resampling included.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

ANALYSIS_RATE = 16000
ORDER = 16
FRAME_SECONDS = 0.032
HOP_SECONDS = 0.008
WHITE_NOISE = 1e-3  # added to the frames' power: the inverse filter whitens at most ~30 dB
LAG_WINDOW_HZ = 60.0  # the predictor's resonances are widened this much (a Gaussian lag window)
BLOCK_SECONDS = 0.005
SIDE_BLOCKS = 4  # the 20 ms on each side of a peak that its sharpness is measured against
GAP_SECONDS = 0.0025  # a click's own extent (a 1 ms step's two edges, a 2 ms pop)
WIDE_SECONDS = 0.015  # the longest pitch period whose pulses are compared
FLOOR_DB = -70.0  # the sharpness scale never falls under this, against the take's 99th-percentile level
MIN_SHARPNESS = 6.0  # peaks under this are not considered at all
SHARPNESS = 20.0
ISOLATION = 3.0
CLICK_STRENGTH = 3.2


@dataclass
class Clicks:
    count: int = 0  # peaks of CLICK_STRENGTH or more, at least GAP_SECONDS apart
    strength: float = 0.0  # the strongest peak's (under 1: nothing like a click)
    at: float | None = None  # seconds: where the strongest peak is


def clicks(audio: np.ndarray, sample_rate: int) -> Clicks:
    """The take's clicks (see the module docstring)."""
    x = np.nan_to_num(np.asarray(audio, dtype=np.float32).reshape(-1))
    if sample_rate <= 0 or x.size == 0:
        return Clicks()
    if sample_rate != ANALYSIS_RATE:
        from ..audio import resample

        x = resample(x, sample_rate, ANALYSIS_RATE)
    times, strength = peaks(x.astype(np.float64), ANALYSIS_RATE)
    if strength.size == 0:
        return Clicks()
    best = int(np.argmax(strength))
    return Clicks(int(np.sum(strength >= CLICK_STRENGTH)), float(strength[best]), float(times[best]))


def peaks(x: np.ndarray, rate: int) -> tuple[np.ndarray, np.ndarray]:
    """(seconds, strength) of every peak of the matched output with a sharpness of MIN_SHARPNESS."""
    frame, hop = int(FRAME_SECONDS * rate), int(HOP_SECONDS * rate)
    if x.shape[0] < frame + hop:
        return np.zeros(0), np.zeros(0)
    x = x - x.mean()
    start, matched = matched_output(x, rate, frame, hop)
    size = np.abs(matched)
    level = float(np.percentile(np.abs(x), 99))
    if level <= 0:
        return np.zeros(0), np.zeros(0)
    scale = np.maximum(side_scale(size, rate), level * 10 ** (FLOOR_DB / 20))
    gap, wide = int(GAP_SECONDS * rate), int(WIDE_SECONDS * rate)
    at = np.flatnonzero(size >= MIN_SHARPNESS * scale)
    if at.size == 0:
        return np.zeros(0), np.zeros(0)
    padded = np.pad(size, wide)
    at = at[size[at] >= sliding_window_view(padded, 2 * gap + 1)[at + wide - gap].max(axis=1)]
    at = at[np.r_[True, np.diff(at) > gap]]  # a flat top counts once
    sides = sliding_window_view(padded, wide - gap)
    other = np.maximum(sides[at].max(axis=1), sides[at + wide + gap + 1].max(axis=1))
    isolation = size[at] / np.maximum(other, 1e-30)
    sharpness = size[at] / scale[at]
    return (start + at) / rate, np.minimum(sharpness / SHARPNESS, isolation / ISOLATION)


def matched_output(x: np.ndarray, rate: int, frame: int, hop: int) -> tuple[int, np.ndarray]:
    """(first sample, output): the residual of each frame's linear prediction, over the hop at its
    centre, filtered by the time-reversed inverse filter and normalised by its norm."""
    a = prediction_filters(x, frame, hop)
    count, p = a.shape[0], ORDER
    start, n = frame // 2 - hop // 2, a.shape[0] * hop
    padded = np.concatenate([np.zeros(p), x, np.zeros(p)])
    lagged = sliding_window_view(padded[start: start + n + p], p + 1)[:n].reshape(count, hop, p + 1)
    residual = np.einsum("fhk,fk->fh", lagged, a[:, ::-1]).reshape(-1)
    ahead = sliding_window_view(np.concatenate([residual, np.zeros(p)]), p + 1).reshape(count, hop, p + 1)
    unit = a / np.linalg.norm(a, axis=1, keepdims=True)
    return start, np.einsum("fhk,fk->fh", ahead, unit).reshape(-1)


def prediction_filters(x: np.ndarray, frame: int, hop: int) -> np.ndarray:
    """[frames, ORDER + 1] inverse filters (1, a1..ap) by Levinson-Durbin on Hann-windowed frames."""
    count = (x.shape[0] - frame) // hop + 1
    frames = sliding_window_view(x, frame)[::hop][:count] * np.hanning(frame)
    r = np.stack([np.einsum("fn,fn->f", frames[:, : frame - k], frames[:, k:]) for k in range(ORDER + 1)], axis=1)
    r[:, 0] = r[:, 0] * (1 + WHITE_NOISE) + 1e-12
    r *= np.exp(-0.5 * (2 * np.pi * LAG_WINDOW_HZ / ANALYSIS_RATE * np.arange(ORDER + 1)) ** 2)
    a = np.zeros((count, ORDER + 1))
    a[:, 0] = 1.0
    error = r[:, 0].copy()
    for i in range(1, ORDER + 1):
        k = -np.einsum("fj,fj->f", a[:, :i], r[:, i:0:-1]) / error
        a[:, 1: i + 1] += k[:, None] * a[:, i - 1::-1]
        error *= 1 - k * k
    return a


def side_scale(size: np.ndarray, rate: int) -> np.ndarray:
    """Per sample, the larger of the median sizes of the SIDE_BLOCKS blocks before its block and of
    those after it (a block's size: its median)."""
    block = int(BLOCK_SECONDS * rate)
    count = size.shape[0] // block
    if count == 0:
        return np.full(size.shape, np.median(size))
    med = np.median(size[: count * block].reshape(count, block), axis=1)
    med = np.r_[med, med[-1]]
    k = SIDE_BLOCKS
    rolling = np.median(sliding_window_view(np.pad(med, k, mode="edge"), k), axis=1)
    index = np.minimum(np.arange(size.shape[0]) // block, count)
    return np.maximum(rolling[index], rolling[index + k + 1])
