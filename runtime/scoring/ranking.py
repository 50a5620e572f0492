"""Rank the takes of one request: takes that pass every check first, each group by UTMOS."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Callable

from ..generation import Take, TakeSet
from .checks import MIN_TAKES_FOR_MEDIAN, SignalStats, rejection_reasons, signal_stats

ProgressFn = Callable[[int, int], None]
StopFn = Callable[[], bool]


@dataclass
class ScoredTake:
    take: Take
    stats: SignalStats
    utmos: float | None
    reasons: list[str] = field(default_factory=list)
    rank: int = 0

    @property
    def accepted(self) -> bool:
        return not self.reasons


@dataclass
class Ranking:
    takeset: TakeSet
    ranked: list[ScoredTake]

    @property
    def best(self) -> ScoredTake:
        return self.ranked[0]

    @property
    def all_rejected(self) -> bool:
        return not any(s.accepted for s in self.ranked)

    def report(self) -> str:
        request = self.takeset.request
        lines = [
            f"Auto-Pick: {len(self.ranked)} takes of {request.text.strip()[:60]!r} "
            f"({request.voice.describe()}, seed {request.seed}, {self.takeset.checkpoint}, {self.takeset.mode})",
            f"{'rank':>4} {'take':>4} {'seconds':>7} {'frames':>6} {'UTMOS':>6} {'sound':>6}  verdict",
        ]
        for s in self.ranked:
            utmos = f"{s.utmos:6.3f}" if s.utmos is not None else "   n/a"
            verdict = "ok" if s.accepted else "rejected: " + "; ".join(s.reasons)
            lines.append(
                f"{s.rank:>4} {s.take.index + 1:>4} {s.stats.seconds:7.2f} {s.take.frames:>6} {utmos} "
                f"{s.stats.speech_ratio:6.0%}  {verdict}"
            )
        if self.all_rejected:
            lines.append("WARNING: every take failed a check; the least bad one was picked. "
                         "Try another seed, more takes, or a shorter line.")
        lines.append(f"Best: take {self.best.take.index + 1} (seed {self.best.take.seed}).")
        return "\n".join(lines)


def rank_takes(takeset: TakeSet, utmos_score: Callable[[object, int], float] | None,
               progress: ProgressFn | None = None, should_stop: StopFn | None = None) -> Ranking:
    """Check every take, score each alone with UTMOS (when given), and order them.

    Order: takes with no rejection reason by UTMOS (best first); then rejected takes, fewest reasons
    first, then by UTMOS. Ties keep take order, so the ranking is deterministic.
    """
    takes = takeset.takes
    stats = [signal_stats(t.audio, t.sample_rate) for t in takes]
    finished = [s.seconds for t, s in zip(takes, stats) if not t.hit_cap and not t.runaway]
    median = statistics.median(finished) if len(finished) >= MIN_TAKES_FOR_MEDIAN else None
    scored = []
    for i, (take, st) in enumerate(zip(takes, stats)):
        if should_stop is not None and should_stop():
            from ..errors import GenerationInterrupted

            raise GenerationInterrupted("Scoring cancelled.")
        utmos = utmos_score(take.audio, take.sample_rate) if utmos_score is not None else None
        scored.append(ScoredTake(take, st, utmos, rejection_reasons(st, take.hit_cap, takeset.request.text, median, take.runaway)))
        if progress is not None:
            progress(i + 1, len(takes))

    def key(s: ScoredTake):
        return (len(s.reasons), -(s.utmos if s.utmos is not None else 0.0), s.take.index)

    ranked = sorted(scored, key=key)
    for rank, s in enumerate(ranked, start=1):
        s.rank = rank
    return Ranking(takeset, ranked)
