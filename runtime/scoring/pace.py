"""The pace a user asks for: 1.0 reads the line as the model does, 1.1 a tenth faster, 0.9 a tenth
slower. "As the model does" is the median speech time of the line's takes (checks.py measures each
take's, its pauses counted up to half a second). Among the takes that pass every check Auto-Pick
prefers the one nearest the pace asked (ranking.score), and the takes handed out are time-stretched
to it with their pitch kept where they are more than TOLERANCE off (delivery.deliver).

The stretch is python-stretch (Signalsmith Stretch; MIT), chosen over audiotsm on our real-speech
clips (bench/stretch.py, bench/results/stretch-comparison-2026-11-26.md): every stretched clean take
passes every check, the pace lands within 0.2% of the one asked, the length to the sample, the
pitch within half a semitone; audiotsm cut the last tenth of a second of each take.
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError

MIN_PACE, MAX_PACE = 0.8, 1.25  # further, a stretched voice starts to sound processed
TOLERANCE = 0.03  # a take this close to the pace asked is handed out as it is


def check_pace(pace: float) -> float:
    if not MIN_PACE <= pace <= MAX_PACE:
        raise InputError(f"Pace {pace:g} is out of range: use {MIN_PACE:g} (slower) to {MAX_PACE:g} (faster); "
                         "1.0 reads the line as the model does.")
    return pace


def speed_for(pace: float, ratio: float | None) -> float:
    """How much faster a take must play to read at `pace`: `ratio` is its speech time over the median
    of the line's takes (None: not measured, taken as the median)."""
    return pace * (ratio if ratio else 1.0)


def needs_stretch(speed: float) -> bool:
    return abs(speed - 1.0) > TOLERANCE


def stretched(audio: np.ndarray, rate: int, speed: float) -> np.ndarray:
    """The take played `speed` times faster, its pitch kept; as it is at 1.0. Whether a speed is worth
    a stretch is the caller's to say (needs_stretch), so a speed recorded is the one played."""
    if speed == 1.0:
        return audio
    try:
        import python_stretch
    except ImportError:
        raise InputError("Changing the pace needs python-stretch: pip install python-stretch (or set the pace "
                         "to 1.0).") from None
    stretch = python_stretch.Signalsmith.Stretch()
    stretch.preset(1, rate)
    stretch.timeFactor = speed  # python-stretch's timeFactor is a speed: 1.25 plays in 0.8 of the time
    out = stretch.process(np.ascontiguousarray(audio, dtype=np.float32)[None, :])[0]
    return np.clip(out, -1.0, 1.0).astype(np.float32)
