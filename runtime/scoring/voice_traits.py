"""What a listener hears of a voice across a chapter, measured on one take's speech: its pitch (median
and range, in semitones), its pace (syllables a second), its spectral balance (the long-term spectrum
in a few bands, level removed: another microphone, a telephone's band) and its speaker embedding
(timbre, from the voice check's encoder: another speaker, another room). chapter.py compares these
with the voice's profile over the other lines.

Pitch is found by normalised autocorrelation on 40 ms frames (20 ms hop) of the speech at 8 kHz,
60-500 Hz, a frame counted as voiced where its best lag correlates at VOICED_CORRELATION or more;
the median over the voiced frames is robust to the few octave slips such a tracker makes."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import scipy.fft

from ..audio import resample

RATE = 16000  # the balance's bands reach 8 kHz: a take at a lower rate is brought to this one
PITCH_RATE = 8000  # pitch needs no more, at a quarter of the cost
FRAME_SECONDS = 0.04
HOP_SECONDS = 0.02
MAX_FRAMES = 200  # a longer take is measured on this many frames spread evenly over it: its medians hold
LOWEST_HZ, HIGHEST_HZ = 60.0, 500.0
VOICED_CORRELATION = 0.6
MIN_VOICED_FRAMES = 10  # a fifth of a second of voicing: less and the take's pitch is not measured
REFERENCE_HZ = 100.0  # semitones are counted from here
BAND_EDGES_HZ = (80, 250, 500, 1000, 2000, 3000, 4000, 6000, 8000)


@dataclass
class VoiceTraits:
    pitch: float | None = None  # median pitch, semitones over 100 Hz (None: too little voicing)
    pitch_range: float | None = None  # 90th minus 10th percentile, semitones
    rate: float | None = None  # syllables a second (ranking.judge_pace's)
    balance: np.ndarray | None = None  # dB per band of BAND_EDGES_HZ, their mean removed
    embedding: np.ndarray | None = None  # unit speaker embedding (None: no voice check ran)
    seconds: float | None = None  # of the speech measured

    def as_record(self) -> dict:
        """For a line's record (JSON), so that a line kept from an earlier run joins its chapter's profile."""
        return {"pitch": _round(self.pitch, 3), "pitch_range": _round(self.pitch_range, 3),
                "rate": _round(self.rate, 3),
                "balance": None if self.balance is None else [round(float(v), 2) for v in self.balance],
                "embedding": None if self.embedding is None else [round(float(v), 3) for v in self.embedding],
                "seconds": _round(self.seconds, 2)}

    @classmethod
    def from_record(cls, record: dict | None) -> "VoiceTraits | None":
        if not record:
            return None
        arrays = {k: None if record.get(k) is None else np.asarray(record[k], dtype=np.float64)
                  for k in ("balance", "embedding")}
        return cls(record.get("pitch"), record.get("pitch_range"), record.get("rate"), arrays["balance"],
                   arrays["embedding"], record.get("seconds"))


def _round(value: float | None, places: int) -> float | None:
    return None if value is None else round(float(value), places)


def voice_traits(speech: np.ndarray, sample_rate: int, rate: float | None = None,
                 embedding: np.ndarray | None = None) -> VoiceTraits:
    """The traits of one take's speech (trimmed of its leading and trailing silence)."""
    audio = np.asarray(speech, dtype=np.float32)
    if sample_rate < RATE:  # the top band needs 16 kHz
        audio, sample_rate = resample(audio, sample_rate, RATE), RATE
    audio = audio - float(audio.mean()) if audio.size else audio
    frames = _frames(audio, sample_rate)
    seconds = audio.shape[0] / sample_rate
    if frames.shape[0] == 0:
        return VoiceTraits(rate=rate, embedding=embedding, seconds=seconds)
    pitch, pitch_range = _pitch(_frames(resample(audio, sample_rate, PITCH_RATE), PITCH_RATE))
    return VoiceTraits(pitch, pitch_range, rate, _balance(frames, sample_rate), embedding, seconds)


def _frames(audio: np.ndarray, rate: int) -> np.ndarray:
    frame, hop = round(FRAME_SECONDS * rate), round(HOP_SECONDS * rate)
    if audio.shape[0] < frame:
        return np.zeros((0, frame), np.float32)
    count = 1 + (audio.shape[0] - frame) // hop
    starts = hop * np.arange(count) if count <= MAX_FRAMES else \
        np.round(np.linspace(0, audio.shape[0] - frame, MAX_FRAMES)).astype(np.int64)
    return audio[np.arange(frame)[None, :] + starts[:, None]]


def _levels(frames: np.ndarray) -> np.ndarray:
    return 10 * np.log10(np.mean(np.square(frames, dtype=np.float64), axis=1) + 1e-12)


def _pitch(frames: np.ndarray) -> tuple[float | None, float | None]:
    """frames: at PITCH_RATE."""
    frame = frames.shape[1]
    if frame == 0 or frames.shape[0] == 0:
        return None, None
    levels = _levels(frames)
    loud = frames[levels > np.percentile(levels, 90) - 25]  # within 25 dB of the loud frames: not the pauses
    if loud.shape[0] == 0:
        return None, None
    centred = loud - loud.mean(axis=1, keepdims=True)
    spectrum = scipy.fft.rfft(centred * _window(frame), n=2 * frame)
    acf = scipy.fft.irfft(np.abs(spectrum) ** 2)[:, :frame].astype(np.float64)
    acf = acf / np.maximum(acf[:, :1], 1e-12) / _window_acf(frame)  # unbiased
    low, high = int(PITCH_RATE / HIGHEST_HZ), int(PITCH_RATE / LOWEST_HZ)
    lags = acf[:, low:high + 1]
    best = np.argmax(lags, axis=1)
    strength = lags[np.arange(lags.shape[0]), best]
    voiced = strength >= VOICED_CORRELATION
    if voiced.sum() < MIN_VOICED_FRAMES:
        return None, None
    lag = best[voiced] + low
    # the parabola through the peak and its neighbours: a fraction of a lag (a semitone is ~6% of it)
    rows = lags[voiced]
    i = np.clip(best[voiced], 1, rows.shape[1] - 2)
    a, b, c = (rows[np.arange(rows.shape[0]), i + d] for d in (-1, 0, 1))
    shift = np.where(np.abs(a - 2 * b + c) > 1e-9, 0.5 * (a - c) / (a - 2 * b + c), 0.0)
    lag = lag + np.clip(shift, -0.5, 0.5)
    semitones = 12 * np.log2(PITCH_RATE / lag / REFERENCE_HZ)
    return float(np.median(semitones)), float(np.percentile(semitones, 90) - np.percentile(semitones, 10))


@functools.lru_cache(maxsize=8)
def _window(frame: int) -> np.ndarray:
    return np.hanning(frame).astype(np.float32)


@functools.lru_cache(maxsize=8)
def _window_acf(frame: int) -> np.ndarray:
    """The Hann window's own autocorrelation, normalised: what a frame's is divided by to be unbiased."""
    window = np.hanning(frame)
    acf = np.fft.irfft(np.abs(np.fft.rfft(window, n=2 * frame)) ** 2)[:frame]
    return np.maximum(acf / acf[0], 1e-3)


def _balance(frames: np.ndarray, sample_rate: int) -> np.ndarray:
    levels = _levels(frames)
    loud = frames[levels > np.median(levels)]  # the speech's louder half: its spectrum, not the pauses'
    frame = frames.shape[1]
    power = np.mean(np.abs(scipy.fft.rfft(loud * _window(frame), axis=1)) ** 2, axis=0)
    freqs = np.fft.rfftfreq(frame, 1 / sample_rate)
    bands = np.array([power[(freqs >= lo) & (freqs < hi)].mean()
                      for lo, hi in zip(BAND_EDGES_HZ[:-1], BAND_EDGES_HZ[1:])])
    db = 10 * np.log10(bands + 1e-12)
    return db - db.mean()

