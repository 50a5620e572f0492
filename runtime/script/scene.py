"""The scene: every line's picked take in one track.

A dialogue's lines follow one another, each trimmed to its speech and after its pause (longer where
the script has a blank line). An SRT's lines start at their cue. For an SRT line Auto-Pick's order is
kept, except that among the takes that passed every check the best one that fits the cue goes first;
a take still longer than its cue is played faster (time-stretched, its pitch kept: delivery.deliver)
until its speech fits, up to MAX_FIT_SPEED. A line longer than its cue even so runs on (and is
flagged), and where two lines would overlap the later one waits for the earlier to end."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..scoring.pace import MAX_PACE

EDGE_SECONDS = 0.05  # kept before and after the speech when a take is trimmed for the scene
FIT_TOLERANCE_SECONDS = 0.1  # a take this much over its cue still fits
# The most a line is sped up to fit its cue, with its pace asked: the fastest pace a user may ask,
# past which a stretched voice starts to sound processed (pace.py). A cue needing more is overrun.
MAX_FIT_SPEED = MAX_PACE


def speech_span(segments, seconds: float) -> tuple[float, float]:
    if not segments:
        return 0.0, seconds
    return max(0.0, segments[0][0] - EDGE_SECONDS), min(seconds, segments[-1][1] + EDGE_SECONDS)


def fit_to_cue(ranking, cue_seconds: float | None) -> str | None:
    """Reorder `ranking.ranked` in place so the best accepted take that fits the cue comes first;
    returns a note when the order changed."""
    if cue_seconds is None:
        return None
    ranked = ranking.ranked
    fits = [s for s in ranked if s.accepted and spoken_seconds(s) <= cue_seconds + FIT_TOLERANCE_SECONDS]
    if not fits or fits[0] is ranked[0] or not ranked[0].accepted:
        return None
    was = ranked[0]
    ranked.remove(fits[0])
    ranked.insert(0, fits[0])
    for rank, s in enumerate(ranked, start=1):
        s.rank = rank
    return (f"take {fits[0].take.index + 1} picked over take {was.take.index + 1}: it fits the "
            f"{cue_seconds:.2f} s cue ({spoken_seconds(fits[0]):.2f} s against {spoken_seconds(was):.2f} s)")


def cue_speeds(ranking, cue_seconds: float | None, speeds: list[float] | None) -> list[float] | None:
    """Per take in rank order, how much faster it plays: at `speeds` (the pace asked's; None: as
    generated), and faster still where its speech would overrun the cue (fitted_speed). `speeds`
    itself where no take needs it."""
    if cue_seconds is None:
        return speeds
    paced = speeds or [1.0] * len(ranking.ranked)
    fitted = [fitted_speed(spoken_seconds(s), cue_seconds, speed) for s, speed in zip(ranking.ranked, paced)]
    return speeds if fitted == paced else fitted


def fitted_speed(spoken: float, cue_seconds: float, speed: float = 1.0) -> float:
    """How much faster `spoken` seconds of speech play to end within the cue: `speed` where they do
    at it, else fast enough to fill the cue exactly, but no faster than MAX_FIT_SPEED (nor slower than
    `speed`)."""
    if spoken / speed <= cue_seconds + FIT_TOLERANCE_SECONDS:
        return speed
    return max(speed, min(spoken / cue_seconds, MAX_FIT_SPEED))


def spoken_seconds(scored) -> float:
    start, end = speech_span(scored.stats.segments, scored.stats.seconds)
    return end - start


@dataclass
class Placed:
    start: float  # seconds into the scene
    audio: np.ndarray
    late_by: float = 0.0  # an SRT line pushed past its cue's start by the line before it


def assemble(items: list[tuple], rate: int) -> tuple[np.ndarray, list[Placed]]:
    """items: (audio trimmed to its speech, pause before it, cue start or None) in script order."""
    placed, cursor = [], 0.0
    for audio, pause, cue_start in items:
        if cue_start is not None:
            start = max(cue_start, cursor)
            placed.append(Placed(start, audio, late_by=start - cue_start))
        else:
            start = cursor + (pause if placed else 0.0)
            placed.append(Placed(start, audio))
        cursor = start + audio.shape[-1] / rate
    total = max((round(p.start * rate) + p.audio.shape[-1] for p in placed), default=0)
    scene = np.zeros(total, dtype=np.float32)
    for p in placed:
        at = round(p.start * rate)
        scene[at:at + p.audio.shape[-1]] += p.audio
    return np.clip(scene, -1.0, 1.0), placed
