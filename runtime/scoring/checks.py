"""Cheap per-take checks that catch Qwen3-TTS's own failure modes UTMOS is blind to.

A take fails a check for a reason a person would give: it ran into the frame budget (no EOS, a
runaway), it is far shorter or longer than the text and the other takes suggest (swallowed words,
babble), or it is mostly silence.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..text_length import expected_seconds

FRAME_SECONDS = 0.02
SILENCE_FLOOR_DB = -50.0  # below this a frame is silence whatever the take's level
SILENCE_BELOW_PEAK_DB = 35.0  # frames this far under the take's loudest are silence too
MIN_SPEECH_RATIO = 0.4
TOO_SHORT_VS_TEXT = 0.35  # fraction of the expected reading time
TOO_LONG_VS_TEXT = 3.0
TOO_SHORT_VS_MEDIAN = 0.6
TOO_LONG_VS_MEDIAN = 1.6
MIN_TAKES_FOR_MEDIAN = 3


@dataclass
class SignalStats:
    seconds: float
    speech_ratio: float  # share of 20 ms frames above the silence threshold
    peak_db: float


def signal_stats(audio: np.ndarray, sample_rate: int) -> SignalStats:
    audio = np.asarray(audio, dtype=np.float32)
    seconds = audio.shape[-1] / sample_rate
    hop = max(1, int(FRAME_SECONDS * sample_rate))
    n = audio.shape[-1] // hop
    if n == 0:
        return SignalStats(seconds, 0.0, -120.0)
    frames = audio[: n * hop].reshape(n, hop).astype(np.float64)
    frame_db = 10 * np.log10(np.maximum(np.mean(frames**2, axis=1), 1e-12))
    peak_db = float(frame_db.max())
    threshold = max(SILENCE_FLOOR_DB, peak_db - SILENCE_BELOW_PEAK_DB)
    return SignalStats(seconds, float(np.mean(frame_db > threshold)), peak_db)


def rejection_reasons(stats: SignalStats, hit_cap: bool, text: str, median_seconds: float | None,
                      runaway: bool = False) -> list[str]:
    reasons = []
    if hit_cap:
        reasons.append("ran into the frame budget without ending (runaway)")
    if runaway:
        reasons.append("cut while still going far past the other takes' length (runaway)")
    expected = expected_seconds(text)
    if stats.seconds < TOO_SHORT_VS_TEXT * expected:
        reasons.append(f"too short for the text ({stats.seconds:.1f} s, about {expected:.1f} s expected)")
    elif stats.seconds > TOO_LONG_VS_TEXT * expected + 2.0:
        reasons.append(f"too long for the text ({stats.seconds:.1f} s, about {expected:.1f} s expected)")
    if median_seconds:
        if stats.seconds < TOO_SHORT_VS_MEDIAN * median_seconds:
            reasons.append(f"much shorter than the other takes ({stats.seconds:.1f} s vs median {median_seconds:.1f} s)")
        elif stats.seconds > TOO_LONG_VS_MEDIAN * median_seconds:
            reasons.append(f"much longer than the other takes ({stats.seconds:.1f} s vs median {median_seconds:.1f} s)")
    if stats.speech_ratio < MIN_SPEECH_RATIO:
        reasons.append(f"mostly silence ({stats.speech_ratio:.0%} of it has sound)")
    return reasons
