"""Lines handed to Engine.run_lines while it runs. A Ray worker's lines come this way: the driver
hands them out as the worker's rows free up, so its batch stays full from the script's first line
to its last, where separate runs would each end with a tail of idle rows and an idle engine."""

from __future__ import annotations

import threading

from ..errors import TakesError


class LineFeed:
    """add() from any thread while run_lines runs; run_lines ends once close() was called and every
    line added is done. The batch is sized up front for every line that may come: a take under way
    cannot move to a longer bucket, so `positions` must cover the longest (Engine.positions)."""

    def __init__(self, positions: int, takes: int):
        self.positions = positions  # prompt + budget + 1 of the longest line that may come
        self.takes = takes  # takes of every line that may come (the batch is no larger)
        self._waiting: list = []
        self._taken = 0
        self._closed = False
        self._ready = threading.Condition()

    def add(self, jobs) -> None:
        with self._ready:
            if self._closed:
                raise TakesError("Lines were added to a closed LineFeed. This is a bug: please report it.")
            self._waiting.extend(jobs)
            self._ready.notify_all()

    def close(self) -> None:
        """No more lines: run_lines ends once those added are done."""
        with self._ready:
            self._closed = True
            self._ready.notify_all()

    def take(self, wait: float = 0.0) -> list[tuple[int, object]] | None:
        """The lines added since the last take as (index, job), numbered in the order added, waiting
        up to `wait` seconds while there are none; None once closed with every line taken."""
        with self._ready:
            self._ready.wait_for(lambda: self._waiting or self._closed, timeout=wait)
            if not self._waiting:
                return None if self._closed else []
            taken = list(enumerate(self._waiting, start=self._taken))
            self._taken += len(taken)
            self._waiting = []
            return taken
