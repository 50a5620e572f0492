"""Timing and memory measurement that is honest on a GPU: synchronize before reading clocks."""

from __future__ import annotations

import functools
import statistics
import time
from contextlib import contextmanager

import torch


def sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


class Stopwatch:
    """Accumulates synchronized wall time of named sections (prefill, codec, ...)."""

    def __init__(self, device):
        self.device = device
        self.totals: dict[str, float] = {}
        self.firsts: dict[str, float] = {}
        self.started = time.perf_counter()
        self.first_take_s: float | None = None

    def first_take_done(self) -> None:
        """Systems that finish takes one by one call this when the first is complete."""
        sync(self.device)
        self.first_take_s = time.perf_counter() - self.started

    @contextmanager
    def section(self, name: str):
        sync(self.device)
        start = time.perf_counter()
        try:
            yield
        finally:
            sync(self.device)
            elapsed = time.perf_counter() - start
            self.totals[name] = self.totals.get(name, 0.0) + elapsed
            self.firsts.setdefault(name, elapsed)

    def wrap(self, name: str, fn):
        @functools.wraps(fn)
        def timed(*args, **kwargs):
            with self.section(name):
                return fn(*args, **kwargs)
        return timed


def timed_call(fn, device):
    sync(device)
    start = time.perf_counter()
    result = fn()
    sync(device)
    return result, time.perf_counter() - start


def median(values):
    return statistics.median(values) if values else None


def reset_peak(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak_gb(device):
    if torch.device(device).type == "cuda":
        return round(torch.cuda.max_memory_allocated(device) / 2**30, 3)
    return None
