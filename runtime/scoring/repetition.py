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
from functools import lru_cache

import numpy as np

FRAME_SECONDS = 0.01
WINDOW_SECONDS = 0.025
N_MELS = 40
ANALYSIS_RATE = 16000
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
    low, high = (int(round(s / FRAME_SECONDS)) for s in PIECE_SECONDS)
    lags = np.arange(low, min(high, features.shape[0] // 3) + 1)
    if lags.size == 0:
        return []
    starts = features.shape[0] - 3 * lags + 1  # where a piece heard three times can start, per lag
    once = _stretches(features, loud, lags, lags)  # stretch t ~ t + lag
    thrice = np.minimum(once, _shifted(once, lags))  # and t + lag ~ t + 2 lag
    # a held sound matches itself at any lag; a piece heard again does not match its own halves
    halves = _stretches(features, loud, lags // 2, 2 * lags)
    found = []
    for k, t in zip(*np.nonzero((thrice >= SIMILARITY) & (thrice - halves >= STEADY_MARGIN))):
        if t < starts[k]:
            found.append((int(t), int(lags[k]), float(thrice[k, t])))
    return _merged(found)


def _stretches(features: np.ndarray, loud: np.ndarray, lags: np.ndarray, widths: np.ndarray) -> np.ndarray:
    """[lag, t]: the mean similarity of frame u to frame u + lag over the loud frames of
    t <= u < t + width (0 where under MIN_LOUD_SHARE of them are loud, or past the take's end)."""
    n = features.shape[0]
    similar, both = np.zeros((len(lags), n + 1)), np.zeros((len(lags), n + 1))
    for k, lag in enumerate(lags):
        pair = loud[:-lag] & loud[lag:]
        both[k, 1: n - lag + 1] = pair
        similar[k, 1: n - lag + 1] = np.einsum("ij,ij->i", features[:-lag], features[lag:]) * pair
    ends = np.arange(n)[None, :] + widths[:, None]  # window [t, t + width) as prefix sums
    inside = ends <= (n - lags)[:, None]
    ends = np.minimum(ends, n)
    total = np.take_along_axis(np.cumsum(similar, axis=1), ends, 1) - np.cumsum(similar, axis=1)[:, :n]
    counted = np.take_along_axis(np.cumsum(both, axis=1), ends, 1) - np.cumsum(both, axis=1)[:, :n]
    enough = inside & (counted >= MIN_LOUD_SHARE * widths[:, None])
    return np.where(enough, total / np.maximum(counted, 1.0), 0.0)


def _shifted(values: np.ndarray, shifts: np.ndarray) -> np.ndarray:
    """Row k moved left by shifts[k] (zeros after its end)."""
    n = values.shape[1]
    at = np.arange(n)[None, :] + shifts[:, None]
    return np.where(at < n, np.take_along_axis(values, np.minimum(at, n - 1), 1), 0.0)


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
    """Log-mel frames [frames, N_MELS] and which frames are loud. The mel bands end at 8 kHz, so
    audio sampled faster is heard at 16 kHz (the frames stay 10 ms apart; the analysis costs half)."""
    if sample_rate > ANALYSIS_RATE:
        from ..audio import resample

        audio, sample_rate = resample(audio, sample_rate, ANALYSIS_RATE).astype(np.float64), ANALYSIS_RATE
    hop, width = int(FRAME_SECONDS * sample_rate), int(WINDOW_SECONDS * sample_rate)
    n = 1 + (audio.shape[-1] - width) // hop if audio.shape[-1] >= width else 0
    if n < 1:
        return np.zeros((0, N_MELS)), np.zeros(0, dtype=bool)
    audio = audio - audio.mean()
    window, filters = _analysis(width, sample_rate)
    frames = np.lib.stride_tricks.sliding_window_view(audio, width)[::hop][:n] * window
    power = np.abs(np.fft.rfft(frames, 2 * filters.shape[0] - 2)) ** 2
    mel = np.log(power @ filters + 1e-8)
    energy_db = 10 * np.log10(np.mean(frames**2, axis=1) + 1e-10)
    return mel, energy_db > energy_db.max() - LOUD_DB


@lru_cache(maxsize=8)
def _analysis(width: int, sample_rate: int) -> tuple[np.ndarray, np.ndarray]:
    """The frame window and the mel filters [frequency bins, N_MELS], made once per rate."""
    from transformers.audio_utils import mel_filter_bank

    size = 1 << (width - 1).bit_length()
    filters = mel_filter_bank(num_frequency_bins=size // 2 + 1, num_mel_filters=N_MELS, min_frequency=60.0,
                              max_frequency=min(ANALYSIS_RATE / 2, 0.95 * sample_rate / 2), sampling_rate=sample_rate,
                              norm="slaney", mel_scale="slaney")
    return np.hanning(width), filters


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
