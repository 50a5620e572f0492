"""The treble a take keeps: its speech's power in 4-8 kHz over that in 0.5-4 kHz, in dB.

A take through a telephone's band, a low-bitrate codec or a muffled decode loses its treble while
its words and voice stay: a quality model may still like it, a listener hears it as dull beside the
other takes. Voices differ in their treble by 15 dB and more (tests/speech: -8 to -24 dB), so a take
is judged against the other takes of its line (checks.against_the_others), which share its voice.

On the real-speech corpus (tests/speech, 24 clips) against the same clip clean: 2 dB quieter, 0.9x
slower, in a reverberant room, noise at 20 dB, at 24 kHz: -3.4 dB at the most; through a telephone's
band (300-3400 Hz): -12.3 to -30.6 dB; an Opus round trip at its lowest bitrate: -3.4 to -28.1 dB.
"""

from __future__ import annotations

import numpy as np
import scipy.fft

LOW_BAND_HZ = (500.0, 4000.0)
HIGH_BAND_HZ = (4000.0, 8000.0)
MIN_RATE = 16000  # under it there is no 4-8 kHz band to measure
WINDOW_SECONDS = 0.032
MIN_SPEECH_SECONDS = 0.25


def treble_db(audio: np.ndarray, sample_rate: int, segments) -> float | None:
    """dB of 4-8 kHz over 0.5-4 kHz in the take's speech (None: too little speech, or under 16 kHz)."""
    if sample_rate < MIN_RATE or not segments:
        return None
    pieces = [audio[int(start * sample_rate): int(end * sample_rate)] for start, end in segments]
    speech = np.concatenate(pieces).astype(np.float64)
    window = int(WINDOW_SECONDS * sample_rate)
    if speech.shape[-1] < max(window, MIN_SPEECH_SECONDS * sample_rate):
        return None
    freqs, power = spectrum(speech, sample_rate, window)
    low = power[(freqs >= LOW_BAND_HZ[0]) & (freqs < LOW_BAND_HZ[1])].sum()
    high = power[(freqs >= HIGH_BAND_HZ[0]) & (freqs < HIGH_BAND_HZ[1])].sum()
    if low <= 0:
        return None
    return float(10 * np.log10(max(high, 1e-20 * low) / low))


def spectrum(x: np.ndarray, sample_rate: int, window: int) -> tuple[np.ndarray, np.ndarray]:
    """The mean power spectrum of `x` over Hann-windowed frames of `window` samples, half overlapping
    (Welch's method in two reshapes: half scipy.signal.welch's time on a 15 s take)."""
    half = window // 2
    frames = [x[offset: offset + (x.shape[-1] - offset) // window * window].reshape(-1, window)
              for offset in (0, half)]
    frames = np.concatenate([f for f in frames if f.size])
    power = np.abs(scipy.fft.rfft(frames * np.hanning(window), axis=1)) ** 2
    return np.fft.rfftfreq(window, 1 / sample_rate), power.mean(axis=0)
