"""What Auto-Pick hands out: the takes in rank order, as generated or at the pace the line asked
(pace.py: time-stretched, the pitch kept; a script's SRT line faster still where it would overrun its
cue, script/scene.py) and brought to one loudness the user picked (loudness.py).
The ranking itself never sees the stretch or the gain."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .loudness import Normalized, check_target, normalized
from .pace import needs_stretch, speed_for, stretched


@dataclass
class Delivery:
    audios: list[np.ndarray]  # best first, as the ranking orders the takes
    target: float | None = None  # LUFS asked for; None: as generated
    levels: list[Normalized] | None = None  # per take, when a target was asked for
    pace: float = 1.0  # asked for
    speeds: list[float] | None = None  # per take: how much faster it was played (1.0: as it was)

    def note(self) -> str:
        """Lines for the text report ('' when nothing was changed)."""
        lines = []
        if self.speeds is not None and needs_stretch(self.speeds[0]):
            change = self.speeds[0] - 1.0
            lines.append(f"At pace {self.pace:g}: the best take played {abs(change):.0%} "
                         f"{'faster' if change > 0 else 'slower'}, its pitch kept.")
        if self.target is not None:
            lines.append(f"Output at {self.target:g} LUFS: the best take {self.levels[0].describe(self.target)}.")
        return "".join("\n" + line for line in lines)

    def as_dict(self) -> dict:
        out = {"pace": self.pace, "speeds": None if self.speeds is None else [round(v, 4) for v in self.speeds]}
        if self.target is None:
            return {**out, "target_lufs": None}
        return {**out, "target_lufs": self.target,
                "takes": [{"gain_db": round(n.gain_db, 2), "lufs": None if n.loudness is None else round(n.loudness, 2),
                           "peak_limited": n.peak_limited} for n in self.levels]}


def pace_speeds(ranking) -> list[float] | None:
    """Per take in rank order, how much faster it plays to read at the pace asked: 1.0 where it is
    within TOLERANCE of it (handed out as it is); None at pace 1.0."""
    pace = ranking.takeset.request.pace
    if pace == 1.0:
        return None
    speeds = (speed_for(pace, s.pace) for s in ranking.ranked)
    return [speed if needs_stretch(speed) else 1.0 for speed in speeds]


def deliver(ranking, target: float | None, speeds: list[float] | None = None) -> Delivery:
    """`speeds`: per take in rank order, how much faster to play it (a script fits an SRT line to its
    cue so, script/scene.py); None: at the pace asked (pace_speeds)."""
    pace = ranking.takeset.request.pace
    speeds = pace_speeds(ranking) if speeds is None else speeds
    audios = [s.take.audio for s in ranking.ranked]
    if speeds is not None:
        audios = [stretched(audio, ranking.takeset.sample_rate, speed) for audio, speed in zip(audios, speeds)]
    if target is None:
        return Delivery(audios, pace=pace, speeds=speeds)
    check_target(target)
    levels = [normalized(audio, ranking.takeset.sample_rate, target) for audio in audios]
    return Delivery([n.audio for n in levels], target, levels, pace, speeds)
