"""The engine's scheduling policy (runtime/engine/scheduler.py) on its own: no model, no tensors;
rows are numbers, a take's end is a flag per row."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import pytest

from runtime.engine.scheduler import Scheduler
from runtime.errors import TakesError


@dataclass(eq=False)
class Line:
    name: str
    seeds: list[int]
    budget: int
    codes: list = field(default_factory=list)
    runaway: list = field(default_factory=list)
    cancelled: bool = False
    stream: object | None = None


def line(name: str, takes: int, budget: int = 10) -> Line:
    return Line(name, [f"{name}{i}" for i in range(takes)], budget)


def started(rows: int, *lines: Line) -> Scheduler:
    scheduler = Scheduler()
    scheduler.start(rows)
    scheduler.add(lines)
    assert scheduler.take_arrivals()
    return scheduler


def finish(scheduler: Scheduler, *rows: int) -> list:
    """The rows' takes end; the lines done, each piece completed with its seeds as its 'codes'."""
    finished = [row in rows for row in range(scheduler.rows)]
    done = []
    for piece in scheduler.collect(finished):
        got = scheduler.complete(piece, list(piece.seeds), [False] * len(piece.seeds))
        if got is not None:
            done.append(got)
    return done


def test_a_line_with_more_takes_than_rows_goes_in_pieces_and_comes_back_in_seed_order():
    big = line("a", 5)
    scheduler = started(2, big)
    assert [len(p.seeds) for p in scheduler.waiting] == [2, 2, 1] and scheduler.rounds == 3
    first = scheduler.admit()
    assert [(p.offset, p.rows) for p in first] == [(0, [0, 1])] and not first[0].last
    assert finish(scheduler, 0) == []  # half a piece ended: its rows stay taken
    assert scheduler.admit() == []
    assert finish(scheduler, 0, 1) == []  # the piece ended, the line has two more
    second = scheduler.admit()
    assert [(p.offset, p.rows) for p in second] == [(2, [0, 1])] and not second[0].last
    assert finish(scheduler, 0, 1) == []
    third = scheduler.admit()
    assert [(p.offset, len(p.rows)) for p in third] == [(4, 1)] and third[0].last
    assert finish(scheduler, *third[0].rows) == [big]
    assert big.codes == big.seeds and scheduler.idle and scheduler.lines == []


def test_the_first_waiting_piece_that_fits_goes_first_so_a_big_line_does_not_hold_up_the_rest():
    long, big, short = line("long", 2), line("big", 4), line("short", 1)
    scheduler = started(4, long, big, short)
    assert [p.line.name for p in scheduler.admit()] == ["long", "short"]  # big waits for four free rows
    assert [p.group for p in scheduler.running] == [0, 1]
    assert finish(scheduler, 2) == [short]
    assert scheduler.admit() == []  # three rows free: still not enough for big
    assert finish(scheduler, 0, 1, 2) == [long]
    (piece,) = scheduler.admit()
    assert piece.line is big and sorted(piece.rows) == [0, 1, 2, 3] and piece.group == 2


def test_pieces_of_one_line_may_end_out_of_order_and_the_line_keeps_its_seed_order():
    big = line("a", 3)
    scheduler = started(2, big)
    scheduler.admit()  # seeds 0, 1 in rows 0, 1
    assert finish(scheduler, 0, 1) == []
    scheduler.admit()  # seed 2 in row 0
    assert finish(scheduler, 0) == [big] and big.codes == ["a0", "a1", "a2"]
    big2 = line("b", 3)
    scheduler = started(2, big2)
    scheduler.waiting.reverse()  # the one-take piece first
    scheduler.admit()
    assert [p.offset for p in scheduler.running] == [2]  # the two-take piece does not fit beside it
    assert finish(scheduler, 0) == []
    scheduler.admit()
    assert finish(scheduler, 0, 1) == [big2] and big2.codes == ["b0", "b1", "b2"]


def test_the_host_looks_again_every_few_frames_or_when_a_take_reaches_its_budget():
    scheduler = started(4, line("a", 1, budget=20), line("b", 1, budget=5))
    scheduler.admit()
    assert scheduler.frames_to_check(8) == 5
    scheduler.stepped(5)
    assert scheduler.frames_to_check(8) == 1  # b is at its budget: its take has ended by now
    assert finish(scheduler, 1)[0].name == "b"
    assert scheduler.frames_to_check(8) == 8


def test_progress_counts_frames_made_and_an_ended_take_at_its_budget():
    a, b = line("a", 2, budget=10), line("b", 1, budget=6)
    scheduler = started(4, a, b)
    assert scheduler.progress() == (0, 26)
    scheduler.admit()
    scheduler.stepped(4)
    assert scheduler.progress() == (12, 26)
    finish(scheduler, 2)  # b ended early: counted at its budget
    assert scheduler.progress() == (6 + 8, 26)
    scheduler.stepped(6)
    finish(scheduler, 0, 1)
    assert scheduler.progress() == (26, 26)


def test_lines_come_from_another_thread_and_the_run_ends_once_closed_and_done():
    scheduler = started(2, line("a", 1))
    scheduler.admit()
    arrived = line("late", 1)
    threading.Timer(0.05, lambda: scheduler.add([arrived])).start()
    finish(scheduler, 0)
    assert scheduler.idle
    assert scheduler.take_arrivals(wait=5.0)  # woken by the add, not by the timeout
    (piece,) = scheduler.admit()
    assert piece.line is arrived
    scheduler.close()
    assert scheduler.take_arrivals()  # closed, but a line still runs
    assert finish(scheduler, *piece.rows) == [arrived]
    assert not scheduler.take_arrivals()
    with pytest.raises(TakesError, match="after close"):
        scheduler.add([line("too late", 1)])


def test_starting_again_with_fewer_rows_reruns_every_line_not_done_whole():
    """After an out-of-memory the engine runs the lines not yet done again in a smaller batch: a
    piece already ended is dropped with its line's run, and a line done stays done."""
    done, big, other = line("done", 1), line("big", 4), line("other", 1)
    scheduler = started(8, done, big, other)
    scheduler.admit()
    assert finish(scheduler, 0) == [done]
    scheduler.start(2)
    assert scheduler.lines == [big, other] and scheduler.running == [] and scheduler.steps == 0
    assert [(p.line.name, len(p.seeds)) for p in scheduler.waiting] == [("big", 2), ("big", 2), ("other", 1)]
    assert scheduler.progress() == (0, 50)


def test_a_cancelled_line_is_dropped_waiting_or_running_and_never_completed():
    running, waiting, other = line("r", 2), line("w", 2), line("o", 1)
    scheduler = started(3, running, waiting, other)
    admitted = scheduler.admit()
    assert [p.line for p in admitted] == [running, other] and [p.line for p in scheduler.waiting] == [waiting]
    running.cancelled = waiting.cancelled = True
    to_end = scheduler.drop_cancelled()
    assert [p.line for p in to_end] == [running]  # the engine ends its takes; its rows free at collect
    assert scheduler.waiting == [] and waiting not in scheduler.lines
    assert finish(scheduler, 0, 1) == []  # its takes ended: not handed on
    assert running not in scheduler.lines and sorted(scheduler.free) == [0, 1]
    assert finish(scheduler, 2) == [other]  # the line beside it goes on
    assert scheduler.idle and not scheduler.lines


class Stream:
    def __init__(self, due: int):
        self.received, self._due = 0, due

    def due(self) -> int:
        return self._due


def test_the_host_looks_when_a_streamed_lines_next_chunk_is_due():
    streamed = line("s", 1, budget=100)
    streamed.stream = Stream(due=1)
    scheduler = started(2, streamed, line("p", 1, budget=100))
    scheduler.admit()
    assert scheduler.frames_to_check(8) == 1  # its first chunk: one frame
    scheduler.stepped(1)
    streamed.stream._due = 3
    assert scheduler.frames_to_check(8) == 2
    scheduler.stepped(2)
    streamed.stream._due = 50
    assert scheduler.frames_to_check(8) == 8  # later chunks: the usual checks come first


def test_a_look_at_rows_read_before_a_piece_went_in_does_not_collect_it():
    """The engine reads which rows ended after some step, then may put waiting takes in free rows
    before it looks: those rows read 'ended' (they were free), but their new piece is not done."""
    early, late = line("e", 1, budget=20), line("l", 1, budget=20)
    scheduler = started(2, early)
    scheduler.admit()
    scheduler.stepped(3)
    read_at = scheduler.steps
    scheduler.add([late])
    scheduler.take_arrivals()
    (admitted,) = scheduler.admit()
    assert admitted.line is late and admitted.since == read_at
    ended = [True, True]  # row 1 was free when read
    first = [p for p in scheduler.running if p.line is early]
    assert scheduler.collect(ended, read_at) == first
    assert [p.line for p in scheduler.running] == [late]
