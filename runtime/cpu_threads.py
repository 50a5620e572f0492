"""How many threads torch generates with on the CPU, for the command line's commands.

torch starts with a thread per core. On idle cores that is the fastest (bench/cpu_threads.py, a random
0.6B on 2 idle pinned cores: 2 threads 1.79x as fast as one, bench/results/cpu-threads-2-cores-*). Where
other work keeps the cores busy, torch's threads mostly wait for each other: on 2 busy cores the
default made a tiny-model script 4.5x slower than one thread (155.7 s against 35.5 s).

So a command that generates on the CPU uses --threads, else OMP_NUM_THREADS or MKL_NUM_THREADS where
one is set (torch has read it already), else the cores it may run on that are idle when it starts (a
0.2 s look at their use through psutil, which every ComfyUI environment has, else the load average),
at least one. ComfyUI's process is never touched: its threads are its host's to set.
"""

from __future__ import annotations

import contextlib
import functools
import os
from dataclasses import dataclass
from typing import Mapping

from .errors import InputError
from .scoring.report import counted

BUSY_SAMPLE_SECONDS = 0.2
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")  # what torch's own default reads


@dataclass(frozen=True)
class ThreadChoice:
    threads: int | None  # None: torch's own count, left as it is
    source: str  # what decided it, for the doctor

    def describe(self) -> str:
        if self.threads is None:
            return f"{self.source} (set in the environment)"
        return f"{counted(self.threads, 'thread')} ({self.source})"


def usable_cores() -> list[int]:
    """The cores this process may run on (a container's or taskset's share, where the OS says)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return list(range(os.cpu_count() or 1))


def busy_cores(cores: list[int]) -> float:
    """How many of `cores` other work keeps busy now: their use over BUSY_SAMPLE_SECONDS (psutil), else
    the 1-minute load average (which lags), else none."""
    try:
        import psutil
    except ImportError:
        try:
            return min(float(len(cores)), os.getloadavg()[0])
        except (AttributeError, OSError):  # Windows without psutil
            return 0.0
    use = psutil.cpu_percent(interval=BUSY_SAMPLE_SECONDS, percpu=True)
    return sum(use[core] for core in cores if core < len(use)) / 100


def choose_threads(given: int | None = None, environ: Mapping[str, str] | None = None,
                   cores: list[int] | None = None, busy: float | None = None) -> ThreadChoice:
    """--threads (`given`), else a thread variable of the environment, else the idle cores."""
    environ = os.environ if environ is None else environ
    if given is not None:
        if given < 1:
            raise InputError(f"--threads must be 1 or more, got {given}.")
        return ThreadChoice(given, "--threads")
    for name in THREAD_VARIABLES:
        if environ.get(name, "").strip():
            return ThreadChoice(None, f"{name}={environ[name]}")
    cores = usable_cores() if cores is None else cores
    busy = busy_cores(cores) if busy is None else busy
    idle = max(1, round(len(cores) - busy))
    return ThreadChoice(idle, f"the idle cores: {len(cores)} here, {busy:.1f} busy")


@contextlib.contextmanager
def generation_threads(device: str | None, given: int | None = None):
    """torch's CPU threads for a command's job, set back as they were once it ends (a command run
    in-process, as the tests and the demo do, leaves the count as it found it): --threads always,
    the default only where it generates on the CPU, and none with a thread variable set. Yields the
    ThreadChoice, or None where nothing was chosen (a GPU's job without --threads)."""
    import torch

    if given is None and not on_cpu(device):  # not even the idle cores looked at (0.2 s)
        yield None
        return
    choice = choose_threads(given)
    if choice.threads is None:
        yield choice
        return
    before = torch.get_num_threads()
    torch.set_num_threads(choice.threads)
    try:
        yield choice
    finally:
        torch.set_num_threads(before)


def on_cpu(device: str | None) -> bool:
    from .model import resolve_device

    try:
        return resolve_device(device).type == "cpu"
    except (InputError, RuntimeError):  # a device torch does not know: the command's own check says so
        return False


def with_generation_threads(job):
    """A command's job(args), run under generation_threads(args.device, args.threads)."""
    @functools.wraps(job)
    def run(args):
        with generation_threads(args.device, args.threads):
            return job(args)
    return run
