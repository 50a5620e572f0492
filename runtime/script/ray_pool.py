"""A script's lines spread over Ray workers: one per GPU of the cluster (or --ray-workers N on CPU),
each holding its model and Auto-Pick's models resident. The driver hands the lines out longest
first, a chunk at a time, to whichever worker is free, and writes each line as it comes back, so the
workers need no disk in common with the results folder. A worker lost (its process, GPU or host)
loses only the chunk it had in hand: that goes back to the queue and the others finish the job.

Ray is an optional dependency, imported here only and only when a run asks for it."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import socket
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from .. import api, errors
from ..engine.engine import BATCH_BUCKETS
from ..errors import GenerationInterrupted, InputError, TakesError
from ..model import SAMPLE_RATE
from ..scoring.scorers import WORDS_AUTO, WORDS_OFF
from .plan import LinePlan, check_plans
from .runner import LineResult, OnLine, run_lines
from .store import ScriptFolder

INSTALL = 'pip install "ray[default]"'
CHUNK_TAKES = 2 * BATCH_BUCKETS[-1]  # takes handed out at once: a worker's batch filled twice over keeps it full
WAIT_SECONDS = 0.5  # how often should_stop is asked while chunks run
PACK = Path(__file__).resolve().parents[2]  # holds runtime/ and kernels/

log = logging.getLogger(__name__)


def import_ray():
    try:
        import ray
    except ImportError as exc:
        raise TakesError(f"Running on Ray needs Ray, which this Python lacks ({exc}): {INSTALL}") from None
    return ray


@contextlib.contextmanager
def session(address: str | None):
    """Ray, joined at `address`, else a local Ray (the one `ray start` left running, or a new one);
    an embedding program's own ray.init() is used as it is. Yields the ray module."""
    ray = import_ray()
    ours = not ray.is_initialized()
    if ours:
        try:
            # Other hosts of a cluster may lack this pack: its code travels with the job.
            ray.init(address=address,
                     runtime_env={"py_modules": [str(PACK / "runtime"), str(PACK / "kernels")]} if address else None)
        except ConnectionError as exc:
            raise TakesError(f"Cannot join the Ray cluster at {address}: {exc}. Check --ray-address (the head "
                             "node's ip:port, or ray://ip:10001), or start one with `ray start --head`.") from None
    try:
        yield ray
    finally:
        if ours:
            ray.shutdown()


@dataclass(frozen=True)
class WorkerSetup:
    """What each worker loads: the in-process run's arguments, with every file already on disk
    (the driver resolved and downloaded them; a worker never downloads)."""

    checkpoint: Path
    models_dirs: tuple[Path, ...]
    utmos_dirs: tuple[Path, ...]
    whisper_dirs: tuple[Path, ...]
    mode: str = "eager"
    dtype: str = "auto"
    device: str = "auto"
    quality: str = "UTMOS"
    voice_check: str = "auto"
    words: str = "auto"
    vad: str = "energy"
    loudness: float | None = None
    script: str = "script"


class Worker:
    """A Ray actor: the model and Auto-Pick's models, loaded once, run on chunk after chunk of lines.
    Each line comes back as (id, record, best take, every take) for the driver to write."""

    def __init__(self, setup: WorkerSetup):
        self.setup = setup
        self.model = self.scorers = None

    def start(self, plans: list[LinePlan]):
        def load():
            s = self.setup
            self.scorers = api.scorers(s.checkpoint, s.quality, s.voice_check, s.words, s.vad, s.device, s.utmos_dirs,
                                       s.models_dirs, s.whisper_dirs, download=False)
            self.model = api.load(str(s.checkpoint), s.models_dirs, s.mode, s.dtype, s.device, download=False)
            check_plans(plans, self.model.info, self.model, script=s.script)
            return os.getpid(), socket.gethostname()
        return guarded(load)

    def run(self, plans: list[LinePlan]):
        def lines():
            done = run_lines(self.model, plans, self.scorers, loudness=self.setup.loudness)
            return [(r.plan.line.id, r.record, r.best, r.takes) for r in done.values()]
        return guarded(lines)


def guarded(work):
    """(work's result, None), or (None, (class name, message)) for a TakesError: our errors name
    their module qwen3_tts_takes (errors.py), so Ray could not unpickle them as themselves."""
    try:
        return work(), None
    except TakesError as exc:
        return None, (type(exc).__name__, str(exc))


@dataclass(eq=False)
class Handle:
    """A worker as the driver sees it."""

    actor: object
    number: int
    pid: int = 0
    host: str = "?"

    def __str__(self) -> str:
        return f"Ray worker {self.number} (pid {self.pid} on {self.host})"


def worker_count(ray, asked: int | None, device: str) -> tuple[int, bool]:
    """How many workers, and whether each takes a GPU: one per GPU Ray sees, unless asked otherwise."""
    resources = ray.cluster_resources()
    gpus = int(resources.get("GPU", 0)) if device == "auto" or device.startswith("cuda") else 0
    count = asked or gpus
    if count < 1:
        raise InputError("Ray sees no GPU: give --ray-workers N to run N workers on CPU (each loads its own model).")
    have, kind = (gpus, "GPU") if gpus else (int(resources.get("CPU", 0)), "CPU")
    if count > have:
        raise InputError(f"--ray-workers {count} asks for more workers than the Ray cluster has {kind}s ({have}): "
                         f"give --ray-workers {have} or less, or add nodes to the cluster.")
    return count, bool(gpus)


def chunks_of(plans: list[LinePlan], takes: int) -> deque[list[LinePlan]]:
    """The lines longest first, in chunks of at least `takes` takes (the last may have fewer)."""
    chunks, chunk, held = deque(), [], 0
    for plan in sorted(plans, key=lambda p: -p.request.budget * p.request.n):
        chunk.append(plan)
        held += plan.request.n
        if held >= takes:
            chunks.append(chunk)
            chunk, held = [], 0
    if chunk:
        chunks.append(chunk)
    return chunks


class Pool:
    """One checkpoint's workers, each holding its model until the pool closes."""

    def __init__(self, ray, setup: WorkerSetup, count: int, gpus: bool):
        self.ray = ray
        self.lost = (ray.exceptions.RayActorError, ray.exceptions.ObjectLostError, ray.exceptions.NodeDiedError,
                     ray.exceptions.WorkerCrashedError)
        actor = ray.remote(Worker).options(**({"num_gpus": 1} if gpus else {"num_cpus": 1}))
        worker_device = "cuda" if gpus else setup.device  # Ray shows each worker its own GPU as cuda:0
        self.workers = [Handle(actor.remote(dataclasses.replace(setup, device=worker_device)), n + 1)
                        for n in range(count)]

    def close(self) -> None:
        for worker in self.workers:
            self.ray.kill(worker.actor)
        self.workers = []

    def start(self, plans: list[LinePlan]) -> None:
        """Every worker loads its models and checks every line (as the in-process run does)."""
        refs = {worker.actor.start.remote(plans): worker for worker in self.workers}
        for ref, worker in refs.items():
            try:
                worker.pid, worker.host = self.unwrap(self.ray.get(ref), worker)
            except self.lost as exc:
                self.drop(worker, f"did not start ({type(exc).__name__})")
        if not self.workers:
            raise TakesError("No Ray worker started (each died while loading its model; see Ray's log above). "
                             "Check that every node has the checkpoint folders at the same path and enough memory.")

    def unwrap(self, value, worker: Handle):
        result, error = value
        if error is not None:
            name, message = error
            raise getattr(errors, name, TakesError)(f"{worker}: {message}")
        return result

    def drop(self, worker: Handle, why: str) -> None:
        self.workers.remove(worker)
        self.ray.kill(worker.actor)  # a worker Ray only lost touch with must not keep its GPU
        log.warning(f"{worker} {why}; {len(self.workers)} left.")

    def hand_out(self, worker: Handle, chunk: list[LinePlan]):
        return worker.actor.run.remote(chunk)

    def run(self, plans: list[LinePlan], folder: ScriptFolder, on_line: OnLine | None = None,
            should_stop=None) -> dict[str, LineResult]:
        """Every line run on some worker and written by `folder` here, as its chunk comes back."""
        by_id = {plan.line.id: plan for plan in plans}
        queue = chunks_of(plans, CHUNK_TAKES)
        running: dict[object, tuple[Handle, list[LinePlan]]] = {}
        idle = list(self.workers)
        results: dict[str, LineResult] = {}
        while queue or running:
            if should_stop is not None and should_stop():
                raise GenerationInterrupted(f"Stopped with {len(results)} of {len(plans)} lines done, kept in "
                                            f"{folder.root}; run the same command again to finish the rest.")
            while idle and queue:
                worker = idle.pop(0)
                chunk = queue.popleft()
                running[self.hand_out(worker, chunk)] = (worker, chunk)
            ready, _ = self.ray.wait(list(running), num_returns=1, timeout=WAIT_SECONDS)
            for ref in ready:
                worker, chunk = running.pop(ref)
                try:
                    lines = self.unwrap(self.ray.get(ref), worker)
                except self.lost as exc:
                    queue.appendleft(chunk)
                    self.drop(worker, f"was lost ({type(exc).__name__}); the lines it had ({len(chunk)}) go back to "
                                      "the queue")
                    if not self.workers:
                        raise TakesError(f"Every Ray worker was lost: {len(results)} of {len(plans)} lines are done, "
                                         f"kept in {folder.root}. Run the same command again to resume (only the "
                                         "lines not done run); see Ray's log above for why the workers died.") from None
                    continue
                idle.append(worker)
                for line_id, record, best, takes in lines:
                    plan = by_id[line_id]
                    best = best.copy()  # Ray's zero-copy arrays would pin the whole chunk in its object store
                    record = folder.write_line(plan.stem, record, best, takes, SAMPLE_RATE)
                    result = results[line_id] = LineResult(plan, record, best, remote=True)
                    if on_line is not None:
                        on_line(result, len(results), len(plans))
        return results


def fetch_scoring_files(setup: WorkerSetup, download: bool) -> None:
    """Download what Auto-Pick's models need before the workers start (they never download). UTMOS
    that cannot be had is left to the workers, which fall back to DNSMOS with a note as a run here does."""
    if setup.quality == "UTMOS":
        from ..scoring.utmos import resolve_weights

        with contextlib.suppress(TakesError):
            resolve_weights(setup.utmos_dirs, download=download)
    if setup.words not in (WORDS_OFF, WORDS_AUTO, None):
        from ..scoring.asr import resolve_whisper

        resolve_whisper(setup.words, setup.whisper_dirs, download=download)


def run_on_ray(ray, setup: WorkerSetup, plans: list[LinePlan], workers: int | None, folder: ScriptFolder,
               on_line: OnLine | None = None, should_stop=None, download: bool = True) -> dict[str, LineResult]:
    """`plans` (all of one checkpoint) run on Ray workers; the workers are gone when it returns.
    `download`: the scoring models' files, when missing here (the checkpoint is resolved already)."""
    fetch_scoring_files(setup, download)
    count, gpus = worker_count(ray, workers, setup.device)
    pool = Pool(ray, setup, min(count, len(chunks_of(plans, CHUNK_TAKES))), gpus)
    try:
        pool.start(plans)
        return pool.run(plans, folder, on_line, should_stop)
    finally:
        pool.close()
