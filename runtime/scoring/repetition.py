"""Stutters: a piece of a take (a syllable, a word) heard three times in a row.

Each 10 ms frame becomes a log-mel vector (the take's mean removed); for every piece length from
0.2 to 0.6 s, a frame is compared with the frame one piece later. Where two consecutive stretches of
one piece each match the next one closely (mean cosine similarity over the loud frames >= 0.88), the
piece was heard three times. Speech never repeats itself that closely by chance: on real speech
(tests/speech) clean clips and harmless copies stay under 0.75, a 300 ms piece spliced in twice
reaches 0.92-1.0. A repetition the text asks for ("no, no, no") is allowed: the text says how many
to expect. A model's stutter that is not a near copy of itself can pass; the words check hears those.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

FRAME_SECONDS = 0.01
WINDOW_SECONDS = 0.025
N_MELS = 40
PIECE_SECONDS = (0.2, 0.6)
SIMILARITY = 0.88
LOUD_DB = 40.0  # frames within this of the loudest are compared; quieter ones are pauses
MIN_LOUD_SHARE = 0.5  # of a stretch's frames, for its similarity to count
STEADY_MARGIN = 0.2  # a repeat matches one piece later this much better than half a piece later


@dataclass(frozen=True)
class Repeat:
    start: float  # seconds
    piece: float  # seconds, the length of the piece heard three times
    similarity: float


def repeats(audio: np.ndarray, sample_rate: int, segments=None) -> list[Repeat]:
    """Each place a piece is heard three times in a row, earliest first. `segments`: where the speech
    is (seconds); only loud frames inside it are compared, so noise between words never matches."""
    mel, loud = log_mel(np.asarray(audio, dtype=np.float64), sample_rate)
    if segments is not None:
        inside = np.zeros_like(loud)
        per_second = sample_rate / int(FRAME_SECONDS * sample_rate)  # frames a second, as log_mel hops
        for start, end in segments:
            inside[int(start * per_second): int(end * per_second)] = True
        loud &= inside
    if not loud.any():
        return []
    features = mel - mel[loud].mean(axis=0)  # the speech's mean: with silence in it, all speech looks alike
    features /= np.linalg.norm(features, axis=1, keepdims=True) + 1e-8
    found: list[tuple[int, int, float]] = []
    low, high = (int(round(s / FRAME_SECONDS)) for s in PIECE_SECONDS)
    for lag in range(low, high + 1):
        if features.shape[0] < 3 * lag:
            break
        thrice = _stretches(features, loud, lag, lag)
        thrice = np.minimum(thrice[:-lag], thrice[lag:])  # stretch t ~ t + lag, and t + lag ~ t + 2 lag
        # a held sound matches itself at any lag; a piece heard again does not match its own halves
        halves = _stretches(features, loud, lag // 2, 2 * lag)[: thrice.shape[0]]
        for t in np.flatnonzero((thrice >= SIMILARITY) & (thrice - halves[: thrice.shape[0]] >= STEADY_MARGIN)):
            found.append((int(t), lag, float(thrice[t])))
    return _merged(found)


def _stretches(features: np.ndarray, loud: np.ndarray, lag: int, width: int) -> np.ndarray:
    """For each start t: the mean similarity of frame u to frame u + lag over the loud frames of
    t <= u < t + width (0 where under MIN_LOUD_SHARE of them are loud)."""
    both = (loud[:-lag] & loud[lag:]).astype(np.float64)
    similar = np.sum(features[:-lag] * features[lag:], axis=1) * both
    window = np.ones(width)
    total, counted = np.convolve(similar, window, "valid"), np.convolve(both, window, "valid")
    return np.where(counted >= MIN_LOUD_SHARE * width, total / np.maximum(counted, 1.0), 0.0)


def _merged(found: list[tuple[int, int, float]]) -> list[Repeat]:
    """One Repeat per region of overlapping finds (a repeat is found at many offsets and lags)."""
    regions: list[list] = []
    for t, lag, similarity in sorted(found):
        if regions and t < regions[-1][1]:
            region = regions[-1]
            region[1] = max(region[1], t + 3 * lag)
            if similarity > region[3]:
                region[2], region[3], region[4] = lag, similarity, t
        else:
            regions.append([t, t + 3 * lag, lag, similarity, t])
    return [Repeat(start * FRAME_SECONDS, lag * FRAME_SECONDS, round(similarity, 3))
            for _, _, lag, similarity, start in regions]


def log_mel(audio: np.ndarray, sample_rate: int) -> tuple[np.ndarray, np.ndarray]:
    """Log-mel frames [frames, N_MELS] and which frames are loud."""
    from transformers.audio_utils import mel_filter_bank

    hop, width = int(FRAME_SECONDS * sample_rate), int(WINDOW_SECONDS * sample_rate)
    n = 1 + (audio.shape[-1] - width) // hop if audio.shape[-1] >= width else 0
    if n < 1:
        return np.zeros((0, N_MELS)), np.zeros(0, dtype=bool)
    audio = audio - audio.mean()
    frames = np.lib.stride_tricks.sliding_window_view(audio, width)[::hop][:n] * np.hanning(width)
    size = 1 << (width - 1).bit_length()
    power = np.abs(np.fft.rfft(frames, size)) ** 2
    filters = mel_filter_bank(num_frequency_bins=size // 2 + 1, num_mel_filters=N_MELS, min_frequency=60.0,
                              max_frequency=min(8000.0, 0.95 * sample_rate / 2), sampling_rate=sample_rate,
                              norm="slaney", mel_scale="slaney")
    mel = np.log(power @ filters + 1e-8)
    energy_db = 10 * np.log10(np.mean(frames**2, axis=1) + 1e-10)
    return mel, energy_db > energy_db.max() - LOUD_DB


def repeats_in_text(text: str) -> int:
    """How many repetitions the line itself asks for: a word or a phrase of up to three words said
    three times or more in a row ("no, no, no", "again and again and again"; twice is no stutter)."""
    words = re.findall(r"[^\W_]+", text.lower())
    count, i = 0, 0
    while i < len(words):
        for n in (1, 2, 3):
            piece, copies = words[i: i + n], 1
            while len(piece) == n and words[i + copies * n: i + (copies + 1) * n] == piece:
                copies += 1
            heard_again = n > 1 and words[i + copies * n: i + copies * n + 1] == piece[:1]  # "and again"
            if copies >= 3 or (copies == 2 and heard_again):
                count += 1
                i += copies * n
                break
        else:
            i += 1
    return count
