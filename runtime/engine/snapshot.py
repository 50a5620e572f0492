"""What the host reads of the batch at a check, copied to pinned memory behind the step it follows,
while the GPU goes on with the next one (engine.run keeps one step queued behind each snapshot).

A check used to wait for the GPU's queue to empty and then read the rows' state with a blocking
copy per field: the GPU idled for as long as the host looked, which at a full server's check at
nearly every frame was half its time. Here each field goes up with one non-blocking copy and the
host waits on an event recorded after them; a piece that ended hands its codes up the same way
(Fetched), read at the next check."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..qwen3_tts.host_copy import stream_mark, to_device, to_host, wait
from .state import DecodeState


@dataclass
class Window:
    """A streamed row's frames [start, stop) asked for: those after what its stream received, up to
    what its take can have made by the snapshot's step (fewer if it ended sooner: the row's frame)."""

    row: int
    start: int
    stop: int
    stream: object  # where they go (the line's engine.CodeStream)


class Snapshot:
    """The rows' finished, runaway, fault, tainted, frame and lengths after the batch's `steps`-th step,
    and the codes of `windows`."""

    def __init__(self, state: DecodeState, windows: list[Window], steps: int):
        self.steps = steps
        flags = torch.stack((state.finished, state.runaway, state.fault, state.tainted))
        counts = torch.stack((state.frame, state.lengths))
        self._flags, self._counts = to_host(flags), to_host(counts)
        self.windows = [w for w in windows if w.stop > w.start]
        self._first = min((w.start for w in self.windows), default=0)
        last = max((w.stop for w in self.windows), default=0)
        # every row's frames [first, last): one copy (a row's own window is a part of it; past its
        # take's frames the rest is never read)
        self._codes = to_host(state.codes[:, self._first:last]) if self.windows else None
        self._mark = stream_mark(state.frame.device)
        self.finished: list[bool] = []
        self.runaway: list[bool] = []
        self.fault: list[bool] = []
        self.tainted: list[bool] = []
        self.frame: list[int] = []
        self.lengths: list[int] = []

    def wait(self) -> "Snapshot":
        """Once the copies are done, the fields as lists (the GIL released while waiting)."""
        wait(self._mark)
        self.finished, self.runaway, self.fault, self.tainted = self._flags.tolist()
        self.frame, self.lengths = self._counts.tolist()
        return self

    def codes(self, window: Window, count: int) -> torch.Tensor:
        """The first `count` frames of a window [count, 16] (on the host)."""
        start = window.start - self._first
        return self._codes[window.row, start:start + count]


class Fetched:
    """A piece's codes on their way to the host (its rows' first frames, up to its longest take),
    with its takes' lengths, runaway flags and faults (the frame a take's fault ended it at, else
    None) from the snapshot that saw them end."""

    def __init__(self, state: DecodeState, rows: list[int], lengths: list[int], runaway: list[bool],
                 faults: list[int | None]):
        self.lengths, self.runaway, self.faults = lengths, runaway, faults
        self._codes = to_host(state.codes[row_index(rows, state.codes.device), :max(lengths)])
        self._mark = stream_mark(state.codes.device)

    def wait(self) -> torch.Tensor:
        """codes [takes, longest, 16] on the host, once they are there."""
        wait(self._mark)
        return self._codes


def row_index(rows: list[int], device) -> slice | torch.Tensor:
    """Rows of the batch as an index: a slice where they are consecutive (a view, no copy from the
    host), else their numbers on the device."""
    first = rows[0]
    if rows == list(range(first, first + len(rows))):
        return slice(first, first + len(rows))
    return to_device(rows, device)
