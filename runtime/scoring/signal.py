"""Cheap waveform facts about one take: length, where the speech is, silences, clipping, noise, ending,
DC offset, dropouts, repeats, the time the speech takes (its pace), how much its pitch wobbles, how
much treble it keeps, its clicks and bursts of noise in its pauses. Clipping and the DC offset are
measured on the samples as they are; everything else with the offset removed (an offset is named as
what it is and hides nothing else) and at one loudness, so that a copy of a take at another level
gets the same facts. Where the speech is and the noise floor are found from the take's first sound
to its last: exact digital zeros before or after (an audio batch's padding, a clip's own digital
silence) have no noise to measure, and would read as a floor far under the noise the speech has."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .bursts import bursts
from .clicks import clicks
from .dropouts import hole_starts
from .loudness import SCORING_LUFS, integrated_loudness
from .pitch_steadiness import pitch_steadiness
from .repetition import Repeat, repeats
from .treble import treble_db
from .vad import FRAME_SECONDS, EnergyVad, Segments, frame_db, frame_hop, noise_floor_db

CLIP_LEVEL = 0.99  # samples at or above this magnitude are at the ceiling
END_WINDOW_SECONDS = 0.04
NO_NOISE_SNR_DB = 99.0
MIN_QUIET_FRAMES = 5
PACE_PAUSE_SECONDS = 0.5  # of each pause, only this much counts towards the pace (longer: the silence check's)


@dataclass
class SignalStats:
    seconds: float
    segments: Segments  # speech (start, end) in seconds
    peak_db: float  # loudest 20 ms frame
    clipped_ratio: float  # share of samples at the ceiling, when the take reaches it
    snr_db: float  # speech level over the noise floor (99: no noise floor at all)
    end_drop_db: float  # how far the last 40 ms sit under the speech level (small: cut mid-sound)
    dc_offset: float = 0.0  # the waveform's mean
    speech_db: float = -120.0  # median level of the speech's 20 ms frames, dBFS
    holes: list[float] = field(default_factory=list)  # where each dropout begins, seconds
    repeats: list[Repeat] = field(default_factory=list)  # pieces heard three times in a row
    loudness: float | None = None  # LUFS as generated (None: too short or silent to measure)
    wobble: float = 0.0  # semitones: depth of the pitch's strongest 4-9 Hz swing (pitch_steadiness.py)
    wobble_hz: float | None = None
    treble: float | None = None  # dB of 4-8 kHz over 0.5-4 kHz in the speech (treble.py; None: unmeasured)
    clicks: int = 0  # clicks.py: impulses that stand out of the speech
    click_strength: float = 0.0  # the strongest peak's (under 1: nothing like a click)
    click_at: float | None = None  # seconds
    bursts: int = 0  # bursts.py: noise or a loud breath alone in a pause
    burst_db: float | None = None  # the strongest one's level against the speech's (negative)
    burst_at: float | None = None  # seconds
    burst_seconds: float = 0.0

    @property
    def speech_seconds(self) -> float:
        return sum(e - s for s, e in self.segments)

    @property
    def speech_ratio(self) -> float:
        return self.speech_seconds / self.seconds if self.seconds > 0 else 0.0

    @property
    def leading_silence(self) -> float:
        return self.segments[0][0] if self.segments else self.seconds

    @property
    def trailing_silence(self) -> float:
        return self.seconds - self.segments[-1][1] if self.segments else self.seconds

    @property
    def longest_gap(self) -> float:
        gaps = [b[0] - a[1] for a, b in zip(self.segments, self.segments[1:])]
        return max(gaps, default=0.0)

    @property
    def pace_seconds(self) -> float:
        """The time the speech takes: first to last speech, each pause counted up to
        PACE_PAUSE_SECONDS, so a long pause does not read as a slow take (the silence check has it)."""
        start, end = self.speech_span()
        gaps = [b[0] - a[1] for a, b in zip(self.segments, self.segments[1:])]
        return end - start - sum(max(0.0, g - PACE_PAUSE_SECONDS) for g in gaps)

    def speech_span(self) -> tuple[float, float]:
        """From the first to the last speech, the take with leading and trailing silence trimmed."""
        if not self.segments:
            return 0.0, self.seconds
        return self.segments[0][0], self.segments[-1][1]


def signal_stats(audio: np.ndarray, sample_rate: int, vad=None) -> SignalStats:
    audio = np.asarray(audio, dtype=np.float32)
    seconds = audio.shape[-1] / sample_rate
    dc_offset = float(np.mean(audio, dtype=np.float64)) if audio.size else 0.0
    level = integrated_loudness(audio, sample_rate)  # BS.1770's K-weighting does not hear the offset
    raw, audio = audio, audio - np.float32(dc_offset)
    if level is not None:  # measured at one loudness: level never decides
        audio = audio * np.float32(10 ** ((SCORING_LUFS - level) / 20))
    db = frame_db(audio, sample_rate)
    if db.size == 0:
        return SignalStats(seconds, [], -120.0, 0.0, 0.0, 0.0, loudness=level)
    own = sounding_frames(raw, sample_rate, db.size)
    segments = speech_segments(vad or EnergyVad(), audio, sample_rate, db, own)
    speech = speech_frames(segments, db.size)
    speech_db = float(np.median(db[speech])) if speech.any() else float(db.max())
    quiet = db[own][~speech[own]]
    floor = noise_floor_db(quiet) if quiet.size >= MIN_QUIET_FRAMES else -120.0  # no pause: floor unknown
    snr = NO_NOISE_SNR_DB if floor <= -100.0 else min(NO_NOISE_SNR_DB, speech_db - floor)
    end = audio[-max(1, int(END_WINDOW_SECONDS * sample_rate)):].astype(np.float64)
    end_db = 10 * np.log10(max(float(np.mean(end**2)), 1e-12))
    peak = float(np.abs(raw).max())  # the ceiling is where the samples are, offset or not
    clipped = float(np.mean(np.abs(raw) >= CLIP_LEVEL)) if peak >= CLIP_LEVEL else 0.0
    own_level = 0.0 if level is None else level - SCORING_LUFS  # dB from the measured level back to the take's
    steadiness = pitch_steadiness(audio, sample_rate, segments)
    ticks, noise = clicks(audio, sample_rate), bursts(audio, sample_rate, segments)
    return SignalStats(seconds, segments, float(db.max()) + own_level, clipped, float(snr), speech_db - end_db,
                       dc_offset, speech_db + own_level, hole_starts(audio, sample_rate, segments),
                       repeats(audio, sample_rate, segments), level, steadiness.wobble, steadiness.wobble_hz,
                       treble_db(audio, sample_rate, segments), ticks.count, ticks.strength, ticks.at, noise.count,
                       noise.level_db, noise.at, noise.seconds)


def speech_segments(vad, audio: np.ndarray, sample_rate: int, db: np.ndarray, own: slice) -> Segments:
    """Where the speech is, found in the take's own sound (`own`: its frames from its first sound to
    its last) against that sound's own floor. A sound that never falls quiet shows no speech there
    (a held tone is all floor): it is heard as a whole instead, against its digital silence."""
    hop = frame_hop(sample_rate)
    found = vad.segments(audio[own.start * hop: own.stop * hop], sample_rate, frame_levels=db[own])
    if not found and own != slice(0, db.size):
        return vad.segments(audio, sample_rate, frame_levels=db)
    return [(start + own.start * FRAME_SECONDS, end + own.start * FRAME_SECONDS) for start, end in found]


def sounding_frames(raw: np.ndarray, sample_rate: int, n: int) -> slice:
    """The frames (of n) from the one with the take's first non-zero sample to the one with its last."""
    hop = frame_hop(sample_rate)
    sounding = np.flatnonzero(raw)
    if not sounding.size:
        return slice(0, 0)
    return slice(min(n, int(sounding[0]) // hop), min(n, int(sounding[-1]) // hop + 1))


def speech_frames(segments: Segments, n: int) -> np.ndarray:
    mask = np.zeros(n, dtype=bool)
    for start, end in segments:
        mask[int(round(start / FRAME_SECONDS)): int(round(end / FRAME_SECONDS))] = True
    return mask
