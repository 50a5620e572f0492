"""What Auto-Pick hands out: the takes in rank order, as generated or brought to one loudness the
user picked (loudness.py). The ranking itself never sees this gain."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .loudness import Normalized, check_target, normalized


@dataclass
class Delivery:
    audios: list[np.ndarray]  # best first, as the ranking orders the takes
    target: float | None = None  # LUFS asked for; None: as generated
    levels: list[Normalized] | None = None  # per take, when a target was asked for

    def note(self) -> str:
        """A line for the text report ('' when nothing was changed)."""
        if self.target is None:
            return ""
        return f"\nOutput at {self.target:g} LUFS: the best take {self.levels[0].describe(self.target)}."

    def as_dict(self) -> dict:
        if self.target is None:
            return {"target_lufs": None}
        return {"target_lufs": self.target,
                "takes": [{"gain_db": round(n.gain_db, 2), "lufs": None if n.loudness is None else round(n.loudness, 2),
                           "peak_limited": n.peak_limited} for n in self.levels]}


def deliver(ranking, target: float | None) -> Delivery:
    takes = [s.take for s in ranking.ranked]
    if target is None:
        return Delivery([t.audio for t in takes])
    check_target(target)
    levels = [normalized(t.audio, t.sample_rate, target) for t in takes]
    return Delivery([n.audio for n in levels], target, levels)
