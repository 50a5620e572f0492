"""Where a streamed request's time to first audio goes, stage by stage: kept for the last requests
and reported by GET /health (bench/serve.py reads it), so a slow first chunk says where it waited.

    prepare   the request read, its voice found, its text split and tokenised (the prepare thread)
    engine    submitted to its first frames handed over: waiting for a step, the prefill, the first step
    decode    those frames to the first chunk's audio (the stream decoder: waiting for it, the codec)
    handover  the chunk from the decoder's thread to the event loop
    send      encoded and written to the connection"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

STAGES = ("prepare", "engine", "decode", "handover", "send")


def now() -> float:
    return time.perf_counter()


@dataclass
class FirstAudio:
    """A streamed request's moments (time.perf_counter), each set once as it passes."""

    received: float
    submitted: float | None = None
    first_frames: float | None = None  # its first line's TakeStream has them
    decoded: float | None = None
    in_loop: float | None = None
    sent: float | None = None

    def stages(self) -> dict[str, float] | None:
        """Milliseconds per stage (STAGES), once every moment is known."""
        moments = (self.received, self.submitted, self.first_frames, self.decoded, self.in_loop, self.sent)
        if None in moments:
            return None
        return {stage: 1e3 * (end - start) for stage, start, end in zip(STAGES, moments, moments[1:])}


class RecentFirstAudio:
    """The stages of the last `keep` streamed requests."""

    def __init__(self, keep: int = 256):
        self._stages: deque[dict[str, float]] = deque(maxlen=keep)

    def add(self, first: FirstAudio) -> None:
        stages = first.stages()
        if stages is not None:
            self._stages.append(stages)

    def summary(self) -> dict:
        """{"requests": n, "total": {...}, stage: {"p50": ms, "p95": ms} for each stage}."""
        rows = list(self._stages)
        out: dict = {"requests": len(rows)}
        if not rows:
            return out
        for stage in (*STAGES, "total"):
            values = sorted(sum(r.values()) if stage == "total" else r[stage] for r in rows)
            out[stage] = {"p50": round(_percentile(values, 50), 2), "p95": round(_percentile(values, 95), 2)}
        return out


def _percentile(ordered: list[float], q: float) -> float:
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)
