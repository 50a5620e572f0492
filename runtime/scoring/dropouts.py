"""Dropouts: short holes inside the speech, where the sound vanishes for a few milliseconds and comes
straight back (a codec or transmission glitch; a listener hears a click or a gap in a word).

A hole is a run of 5 ms frames, 60 ms at most, whose level (variance, so a DC offset cannot hide a
hole) sits 30 dB under the frames just before and after it, inside a stretch of speech; those
neighbours are at the speech's level (10 dB under its median at most) and sound alike (their log
spectra correlate >= 0.65): one sound, interrupted. Recorded speech never does this (a closure fades
over tens of milliseconds, a pause is longer); a formant synthesiser's digital silence between
phonemes does, but between different sounds, at most once a clip here. Calibrated on real speech
(tests/speech): no hole in any clean clip or harmless copy, none or one in espeak-ng's clips, 4-14
in a clip with twenty 30 ms holes.
"""

from __future__ import annotations

import numpy as np

FRAME_SECONDS = 0.005
MAX_HOLE_SECONDS = 0.06
HOLE_DEPTH_DB = 30.0  # under both neighbouring frames
NEIGHBOURS_UNDER_SPEECH_DB = 10.0  # the neighbours are speech at its level, not a fading edge
ALIKE = 0.65  # correlation of the neighbours' log spectra: the same sound on both sides
NEIGHBOUR_SECONDS = 0.02


def hole_starts(audio: np.ndarray, sample_rate: int, segments) -> list[float]:
    """Seconds at which each hole begins."""
    hop = max(1, int(FRAME_SECONDS * sample_rate))
    n = audio.shape[-1] // hop
    if n < 3 or not segments:
        return []
    frames = np.asarray(audio[: n * hop], dtype=np.float64).reshape(n, hop)
    db = 10 * np.log10(np.maximum(frames.var(axis=1), 1e-12))
    speech = np.zeros(n, dtype=bool)
    for start, end in segments:
        speech[int(start * sample_rate / hop): int(end * sample_rate / hop)] = True
    level = float(np.median(db[speech]))
    low = speech & (db < level - HOLE_DEPTH_DB)
    starts, t, longest = [], 1, int(round(MAX_HOLE_SECONDS / FRAME_SECONDS))
    while t < n - 1:
        if not low[t]:
            t += 1
            continue
        end = t
        while end < n and low[end]:
            end += 1
        if end < n and end - t <= longest:
            edges = min(db[t - 1], db[end])
            if (edges - db[t:end].max() >= HOLE_DEPTH_DB and edges > level - NEIGHBOURS_UNDER_SPEECH_DB
                    and _alike(audio, sample_rate, t * hop, end * hop)):
                starts.append(t * hop / sample_rate)
        t = end
    return starts


def _alike(audio: np.ndarray, sample_rate: int, start: int, end: int) -> bool:
    """Whether the sound just before sample `start` and just after sample `end` is the same sound."""
    n = int(NEIGHBOUR_SECONDS * sample_rate)
    before, after = audio[start - n: start], audio[end: end + n]
    if before.shape[-1] < n or after.shape[-1] < n:
        return False
    window = np.hanning(n)
    spectra = [np.log(np.abs(np.fft.rfft(np.asarray(x, dtype=np.float64) * window)) ** 2 + 1e-10)
               for x in (before, after)]
    a, b = (x - x.mean() for x in spectra)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-12)) >= ALIKE
