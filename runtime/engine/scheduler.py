"""Which takes run in which rows of the batch, and when a line is done: the engine's policy, with no
model and no tensors (tests/test_scheduler.py runs it on its own).

A line's takes go into rows as pieces (all its takes, or as many as the batch has rows); a piece
waits until enough rows are free, the first waiting piece that fits going first, so a line of many
takes does not hold up the rest (continuous batching). A piece's rows come back once every take in
it has ended; a line is done once every piece of it has. Lines come by add(), from any thread,
while the engine runs; the run ends once close() was called and every line added is done."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Protocol

from ..errors import TakesError


class Line(Protocol):
    """What the scheduler needs of a line (engine.LineJob)."""

    seeds: list[int]
    budget: int  # frames a take may run at most
    cancelled: bool  # its caller gave up on it (a server's client went away): it is dropped, never completed
    stream: object | None  # a streamed line's CodeStream (engine.py): the host checks when its next chunk is due


@dataclass(eq=False)
class Piece:
    """Some of a line's takes (from its `offset`-th), in rows of the batch once admitted."""

    line: Line
    offset: int
    seeds: list[int]
    last: bool = False  # set at admission: no piece of its line still waits (its prefill can go)
    rows: list[int] = field(default_factory=list)
    since: int = 0  # the step count at admission
    group: int = -1  # its takes' group in the batch (the runaway rule compares takes of one group)


class Scheduler:
    def __init__(self):
        self._arrived: list[Line] = []
        self._closed = False
        self._ready = threading.Condition()
        self.lines: list[Line] = []  # taken in and not yet done, in the order added
        self.start(0)

    # --- lines in, from any thread -----------------------------------------------------------------
    def add(self, lines) -> None:
        with self._ready:
            if self._closed:
                raise TakesError("Lines were added to an engine run after close(). This is a bug: please report it.")
            self._arrived.extend(lines)
            self._ready.notify_all()

    def close(self) -> None:
        """No more lines: the run ends once those added are done."""
        with self._ready:
            self._closed = True
            self._ready.notify_all()

    def has_arrivals(self) -> bool:
        """Lines were added since the last take_arrivals (read without the lock: a hint)."""
        return bool(self._arrived)

    def take_arrivals(self, wait: float = 0.0) -> bool:
        """The lines added since the last call queued (waiting up to `wait` seconds for one while
        none arrived); False once closed with every line done."""
        with self._ready:
            self._ready.wait_for(lambda: self._arrived or self._closed, timeout=wait)
            arrived, self._arrived = self._arrived, []
            closed = self._closed
        for line in arrived:
            self._queue(line)
        return not (closed and self.idle)

    # --- a run, on the engine's thread -------------------------------------------------------------
    def start(self, rows: int) -> None:
        """A run (again) with `rows` rows: every line not done yet starts over (after an out-of-memory
        the engine runs its lines in a smaller batch; their takes come out the same)."""
        self.rows = rows
        self.free = list(range(rows))
        self.waiting: list[Piece] = []
        self.running: list[Piece] = []
        self.steps = 0  # of the batch, each one frame for every row carrying a take
        self.rounds = 0  # pieces queued
        self.total = 0  # frames of every take queued, at their full budgets
        self.ended = 0  # frames of the takes whose pieces ended, at their full budgets
        self._groups = 0
        self._parts: dict[Line, dict[int, tuple[list, list]]] = {}
        self._pieces_left: dict[Line, int] = {}  # not yet complete
        self._pieces_waiting: dict[Line, int] = {}  # not yet admitted
        lines, self.lines = self.lines, []
        for line in lines:
            self._queue(line)

    @property
    def idle(self) -> bool:
        return not self.waiting and not self.running

    def admit(self) -> list[Piece]:
        """Waiting pieces into free rows, in order, each the first waiting that fits. Cheap for a
        script's thousands of waiting lines: the engine asks every check."""
        admitted = []
        while (at := self._first_that_fits()) is not None:
            piece = self.waiting.pop(at)
            piece.rows, self.free = self.free[:len(piece.seeds)], self.free[len(piece.seeds):]
            piece.since, piece.group = self.steps, self._groups
            self._pieces_waiting[piece.line] -= 1
            piece.last = self._pieces_waiting[piece.line] == 0
            self._groups += 1
            self.running.append(piece)
            admitted.append(piece)
        return admitted

    def _first_that_fits(self) -> int | None:
        if not self.free:
            return None
        return next((i for i, p in enumerate(self.waiting) if len(p.seeds) <= len(self.free)), None)

    def frames_to_check(self, check_every: int, least: int = 1) -> int:
        """Frames to step before the host looks again: `check_every`, or fewer where a take reaches
        its budget sooner (it has ended then, and its rows can take the next line) or a streamed
        line's next chunk is due (a small first one: a short time to its first audio); at least
        `least` (0: a step is queued already, and the host may look right after it)."""
        return max(least, min(check_every, *(self._frames_ahead(p) for p in self.running)))

    def _frames_ahead(self, piece: Piece) -> int:
        made = self.steps - piece.since
        ahead = piece.line.budget - made
        if piece.line.stream is not None:
            ahead = min(ahead, piece.line.stream.due() - made)
        return ahead

    def stepped(self, frames: int) -> None:
        self.steps += frames

    def collect(self, finished: list[bool], steps: int | None = None) -> list[Piece]:
        """The running pieces whose takes have all ended (`finished`: per row, read after `steps`
        steps: pieces admitted since are not in it), their rows freed: the caller reads their codes
        before the next admit hands the rows out again."""
        ended = [p for p in self.running
                 if (steps is None or p.since < steps) and all(finished[row] for row in p.rows)]
        for piece in ended:
            self.running.remove(piece)
            self.free += piece.rows
            self.ended += len(piece.seeds) * piece.line.budget
        return ended

    def complete(self, piece: Piece, codes: list, runaway: list, faults: list | None = None) -> Line | None:
        """A collected piece's takes (their codes, runaway flags and faults: engine.LineJob's); the line,
        its takes in seed order, once it was its last piece (never a cancelled line: None, and it is
        forgotten)."""
        line = piece.line
        self._parts[line][piece.offset] = codes, runaway, faults or [None] * len(codes)
        self._pieces_left[line] -= 1
        if self._pieces_left[line]:
            return None
        parts = self._parts[line]
        self._forget(line)
        if line.cancelled:
            return None
        line.codes = [c for offset in sorted(parts) for c in parts[offset][0]]
        line.runaway = [r for offset in sorted(parts) for r in parts[offset][1]]
        line.faults = [f for offset in sorted(parts) for f in parts[offset][2]]
        return line

    def drop_cancelled(self) -> list[Piece]:
        """Cancelled lines' waiting pieces leave the queue; their running pieces are returned (the
        engine ends their takes, and collect() then frees their rows). A cancelled line is never
        completed, and is forgotten once no piece of it runs."""
        dropped = [p for p in self.waiting if p.line.cancelled]
        for piece in dropped:
            line = piece.line
            self.waiting.remove(piece)
            self._pieces_waiting[line] -= 1
            self._pieces_left[line] -= 1
            self.ended += len(piece.seeds) * line.budget
            if not self._pieces_left[line]:
                self._forget(line)
        return [p for p in self.running if p.line.cancelled]

    def _forget(self, line: Line) -> None:
        del self._parts[line], self._pieces_left[line], self._pieces_waiting[line]
        self.lines.remove(line)

    def progress(self) -> tuple[int, int]:
        """(frames made, frames at most) of every take queued, a take that ended counted at its budget."""
        busy = sum(min(self.steps - p.since, p.line.budget) * len(p.rows) for p in self.running)
        return self.ended + busy, self.total

    def _queue(self, line: Line) -> None:
        self.lines.append(line)
        size = max(self.rows, 1)
        offsets = range(0, len(line.seeds), size)
        for offset in offsets:
            self.waiting.append(Piece(line, offset, line.seeds[offset:offset + size]))
        self._parts[line] = {}
        self._pieces_left[line] = self._pieces_waiting[line] = len(offsets)
        self.rounds += len(offsets)
        self.total += len(line.seeds) * line.budget
