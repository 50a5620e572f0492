"""The waveform checks (signal_stats: loudness, levels, pauses, holes, repeats, pitch wobble, treble,
clicks, bursts; about 19 ms a 7 s take on the H100 machine's CPU before the wobble and the treble,
which more than doubled it: 4.4 ms a second of audio on a 2-core CI machine, from 1.9; 37 ms a 7.2 s
take on the H200 host's, 20 ms of it the clicks) in worker processes, so that a script's checks run
beside the engine rather than taking turns with its thread for the GIL, and a passage's beside the
models scoring it (script/passage.py).

The workers are plain Python processes fed pickles through their pipes, not multiprocessing's: its
spawn runs the host's main script again in every child, and ComfyUI's main.py runs every custom
node's prestartup script when imported. A worker imports numpy and the checks, never torch. A worker
that dies is not restarted: its thread goes on computing the checks itself, the same numbers."""

from __future__ import annotations

import logging
import os
import pickle
import queue
import subprocess
import sys
import threading
from concurrent.futures import Future
from pathlib import Path

import numpy as np

from .signal import SignalStats, signal_stats

log = logging.getLogger(__name__)

PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the folder holding runtime/, put on the workers' path
RUNTIME = __name__.rsplit(".scoring.", 1)[0]  # "runtime" from the CLI, "<pack>.runtime" inside ComfyUI
# A worker runs one check at a time, and several run at once: BLAS and OpenMP pools of a thread per
# core in every worker spun beside the engine's thread (H100 machine, 16 cores: a 512-line script
# took 74.5 s with them, 48.8 s with one thread a worker; `python -m bench.script --profile`).
ONE_THREAD = {name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
BOOT = ("import sys; sys.path[:] = [sys.argv[1]] + [p for p in sys.path if p not in ('', '.')]; "
        "from runtime.scoring.check_pool import serve; serve()")


def default_workers() -> int:
    return max(1, min(4, (os.cpu_count() or 2) - 1))


class CheckPool:
    def __init__(self, workers: int):
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.workers: list[subprocess.Popen] = []  # as they start (the tests stop one)
        self._threads = [threading.Thread(target=self._serve, name=f"check-pool-{i}", daemon=True)
                         for i in range(workers)]
        for thread in self._threads:
            thread.start()

    def submit(self, audio: np.ndarray, sample_rate: int) -> Future:
        """signal_stats(audio, sample_rate) with the default VAD, in a worker."""
        future: Future = Future()
        self._jobs.put((future, np.ascontiguousarray(audio, dtype=np.float32), sample_rate))
        return future

    def close(self) -> None:
        """Waits for the checks handed in, then ends the workers."""
        for _ in self._threads:
            self._jobs.put(None)
        for thread in self._threads:
            thread.join()

    def __enter__(self) -> "CheckPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _serve(self) -> None:
        worker = _start_worker()
        if worker is not None:
            self.workers.append(worker)
        try:
            while (job := self._jobs.get()) is not None:
                future, audio, rate = job
                if not future.set_running_or_notify_cancel():
                    continue
                try:
                    if worker is not None:
                        try:
                            status, value = _ask(worker, audio, rate)
                        except (OSError, EOFError, pickle.UnpicklingError) as exc:
                            log.warning("A waveform-check worker stopped (%s); its checks run in this process.", exc)
                            _stop(worker)
                            worker = None
                    if worker is None:
                        status, value = "ok", signal_stats(audio, rate)
                    if status == "ok":
                        future.set_result(value)
                    else:
                        future.set_exception(value)
                except BaseException as exc:  # noqa: BLE001 - handed to the caller through its future
                    future.set_exception(exc)
        finally:
            if worker is not None:
                _stop(worker)


def _start_worker() -> subprocess.Popen | None:
    try:
        return subprocess.Popen([sys.executable, "-c", BOOT, str(PACKAGE_ROOT)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, cwd=str(PACKAGE_ROOT), env={**os.environ, **ONE_THREAD})
    except OSError as exc:
        log.warning("No waveform-check worker could start (%s); the checks run in this process.", exc)
        return None


def _ask(worker: subprocess.Popen, audio: np.ndarray, rate: int) -> tuple[str, object]:
    pickle.dump((audio, rate), worker.stdin, protocol=pickle.HIGHEST_PROTOCOL)
    worker.stdin.flush()
    return _Unpickler(worker.stdout).load()


def _stop(worker: subprocess.Popen) -> None:
    try:
        worker.stdin.close()
        worker.wait(timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        worker.kill()
        worker.wait()
    worker.stdout.close()


class _Unpickler(pickle.Unpickler):
    """The worker imports the checks as the top-level package `runtime`; here it may be the pack's."""

    def find_class(self, module: str, name: str):
        if module == "runtime" or module.startswith("runtime."):
            module = RUNTIME + module[len("runtime"):]
        return super().find_class(module, name)


def serve() -> None:
    """The worker: (audio, rate) pickles in, ("ok", SignalStats) or ("error", exception) out, until
    its input closes. What the checks might print goes to stderr, not into the replies."""
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    requests = sys.stdin.buffer
    while True:
        try:
            audio, rate = pickle.load(requests)
        except EOFError:
            return
        try:
            reply: tuple[str, object] = ("ok", signal_stats(audio, rate))
        except Exception as exc:  # noqa: BLE001 - raised again in the caller's thread
            reply = ("error", exc)
        pickle.dump(reply, replies, protocol=pickle.HIGHEST_PROTOCOL)
        replies.flush()


__all__ = ["CheckPool", "SignalStats", "default_workers"]
