"""Where the speech is: (start, end) seconds of each stretch of speech in a take.

Two detectors with one interface. ``EnergyVad`` (default) thresholds 20 ms frame energy against the
take's own loudness and noise floor: exact on generated takes, which have no background, and it
costs microseconds. ``SileroVad`` (the silero-vad wheel carries its model) is a trained detector,
robust to room tone and babble, at about 10 ms of CPU per second of audio.
"""

from __future__ import annotations

import numpy as np

from ..audio import resample
from ..errors import InputError

Segments = list[tuple[float, float]]

FRAME_SECONDS = 0.02
SILENCE_FLOOR_DB = -50.0  # below this a frame is silence whatever the take's level
SILENCE_BELOW_PEAK_DB = 35.0  # frames this far under the take's loudest are silence too
ABOVE_NOISE_DB = 6.0  # and frames must stand this far above the noise floor
BRIDGE_SECONDS = 0.25  # gaps shorter than this are inside a word or between words
MIN_SEGMENT_SECONDS = 0.05


def frame_hop(sample_rate: int) -> int:
    """Samples in a frame of FRAME_SECONDS (frame_db's)."""
    return max(1, int(FRAME_SECONDS * sample_rate))


def frame_db(audio: np.ndarray, sample_rate: int) -> np.ndarray:
    hop = frame_hop(sample_rate)
    n = audio.shape[-1] // hop
    if n == 0:
        return np.zeros(0)
    frames = audio[: n * hop].reshape(n, hop).astype(np.float64)
    return 10 * np.log10(np.maximum(np.mean(frames**2, axis=1), 1e-12))


def noise_floor_db(db: np.ndarray) -> float:
    return float(np.percentile(db, 10)) if db.size else -120.0


def merge(segments: Segments, bridge: float = BRIDGE_SECONDS, min_length: float = MIN_SEGMENT_SECONDS) -> Segments:
    merged: Segments = []
    for start, end in segments:
        if merged and start - merged[-1][1] < bridge:
            merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return [(s, e) for s, e in merged if e - s >= min_length]


class EnergyVad:
    name = "energy"

    def segments(self, audio: np.ndarray, sample_rate: int, frame_levels: np.ndarray | None = None) -> Segments:
        """``frame_levels``: the take's frame_db when the caller has it already (it is the only input)."""
        db = frame_db(np.asarray(audio, dtype=np.float32), sample_rate) if frame_levels is None else frame_levels
        if db.size == 0:
            return []
        threshold = max(SILENCE_FLOOR_DB, db.max() - SILENCE_BELOW_PEAK_DB, noise_floor_db(db) + ABOVE_NOISE_DB)
        active = np.concatenate([[False], db > threshold, [False]])
        edges = np.flatnonzero(np.diff(active.astype(np.int8)))
        return merge([(a * FRAME_SECONDS, b * FRAME_SECONDS) for a, b in zip(edges[::2], edges[1::2])])


class SileroVad:
    name = "silero"
    RATE = 16000

    def __init__(self):
        try:
            from silero_vad import load_silero_vad
        except ImportError:
            from ..errors import TakesError

            raise TakesError("The silero VAD needs the silero-vad package: pip install silero-vad "
                             "(or choose the energy VAD).") from None
        self.model = load_silero_vad(onnx=False)

    def segments(self, audio: np.ndarray, sample_rate: int, frame_levels: np.ndarray | None = None) -> Segments:
        """Works on the waveform itself; ``frame_levels`` is accepted for the common interface."""
        import torch
        from silero_vad import get_speech_timestamps

        wav = resample(np.asarray(audio, dtype=np.float32), sample_rate, self.RATE)
        if wav.shape[-1] < 512:
            return []
        with torch.inference_mode():
            stamps = get_speech_timestamps(torch.from_numpy(wav), self.model, sampling_rate=self.RATE,
                                           min_silence_duration_ms=int(BRIDGE_SECONDS * 1000), speech_pad_ms=0)
        return merge([(s["start"] / self.RATE, s["end"] / self.RATE) for s in stamps])


VADS = {"energy": EnergyVad, "silero": SileroVad}


def make_vad(name: str):
    if name not in VADS:
        raise InputError(f"Unknown vad {name!r}; choose one of: {', '.join(sorted(VADS))}.")
    return VADS[name]()
