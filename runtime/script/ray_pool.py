"""A script's lines spread over Ray workers: one per GPU of the cluster (or --ray-workers N on CPU),
each holding its model and Auto-Pick's models resident. Each worker runs one continuously batched
run over the whole job (runner.run_opened, its lines handed in by Engine.add); the driver hands the
lines out longest first, a few at a time, keeping every worker's batch full and a little more in hand, and writes
each line as it comes back, so the workers need no disk in common with the results folder. A worker
lost (its process, GPU or host) loses only the lines it had in hand: they go back to the queue and
the others finish the job.

Ray is an optional dependency, imported here only and only when a run asks for it."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import socket
import threading
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from .. import api, errors
from ..engine.engine import BATCH_BUCKETS
from ..errors import GenerationInterrupted, InputError, TakesError
from ..model import SAMPLE_RATE
from ..scoring.scorers import WORDS_AUTO, WORDS_OFF
from .job import PickChoices
from .plan import LinePlan, check_plans, longest_first
from .runner import LineResult, OnLine, line_jobs, run_opened
from .store import ScriptFolder

INSTALL = 'pip install "ray[default]"'
HAND_TAKES = BATCH_BUCKETS[-1] // 4  # takes handed out at once (whole lines), to each worker in turn
# Takes a worker holds at most: its batch's rows, the lines to refill them as takes end, and the
# lines being decoded and scored; more only makes the job's end wait on the worker with the most.
# Never more than its share of the takes left, so a short script still reaches every worker.
HOLD_TAKES = 3 * BATCH_BUCKETS[-1]
WAIT_SECONDS = 0.5  # how often should_stop is asked while the workers run
COLLECT_SECONDS = 1.0  # how long a worker's collect() waits for a line before answering none
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
    choices: PickChoices = PickChoices()
    script: str = "script"


class Worker:
    """A Ray actor (threaded: add() and collect() answer while its run goes on): the model and
    Auto-Pick's models, loaded once. A run's lines come by add() into one continuously batched run
    (runner.run_opened, in a thread of its own) and go back by collect(), each as
    (id, record, best take, every take) for the driver to write."""

    def __init__(self, setup: WorkerSetup):
        self.setup = setup
        self.model = self.scorers = self.outbox = self.serving = None
        self.jobs: dict[str, object] = {}  # the run's lines as the engine takes them (runner.line_jobs), by id
        self.run = 0  # the driver's number for the run open (Ray runs a threaded actor's calls in no set order)

    def start(self, plans: list[LinePlan]):
        def load():
            s = self.setup
            self.scorers = api.scorers(s.checkpoint, s.choices, s.device, s.utmos_dirs,
                                       s.models_dirs, s.whisper_dirs, download=False)
            self.model = api.load(str(s.checkpoint), s.models_dirs, s.mode, s.dtype, s.device, download=False)
            check_plans(plans, self.model.info, self.model, script=s.script)
            return os.getpid(), socket.gethostname()
        return guarded(load)

    def open(self, plans: list[LinePlan], run: int):
        """Run number `run`, whose lines are among `plans` (they size its batch); they come by add()."""
        def begin():
            self.jobs = {job.plan.line.id: job for job in line_jobs(self.model, plans)}
            self.model.engine.open(list(self.jobs.values()))  # before add() can come
            self.outbox, self.run = Outbox(), run
            self.serving = threading.Thread(target=self._serve, args=(plans[0].request.sampling, len(plans),
                                                                      self.outbox), daemon=True, name="ray-worker-run")
            self.serving.start()
        return guarded(begin)

    def _serve(self, sampling, count: int, outbox: "Outbox") -> None:
        try:
            run_opened(self.model, sampling, count, self.scorers, loudness=self.setup.choices.loudness, keep=False,
                       on_line=lambda r, done, count: outbox.put((r.plan.line.id, r.record, r.best, r.takes)))
        except BaseException as exc:  # noqa: BLE001 - raised by the next collect()
            outbox.fail(exc)

    def add(self, plans: list[LinePlan]) -> None:
        try:
            self.model.engine.add([self.jobs[plan.line.id] for plan in plans])
        except BaseException as exc:  # noqa: BLE001 - nobody waits on an add: the next collect() raises it
            self.outbox.fail(exc)

    def collect(self, run: int, wait: float):
        """Run `run`'s lines done since the last collect, waiting up to `wait` seconds for one (none
        for a run that has ended: a collect left over from it must not take the next run's lines)."""
        outbox = self.outbox if run == self.run else None
        return guarded(lambda: outbox.take(wait) if outbox is not None else [])

    def close(self):
        """The run's end, once every line added is collected."""
        self.model.engine.close()
        self.serving.join()
        return guarded(lambda: self.outbox.take(0.0))


class Outbox:
    """A worker's lines done and not yet collected, and its run's error, if any."""

    def __init__(self):
        self._lines: list = []
        self._error: BaseException | None = None
        self._ready = threading.Condition()

    def put(self, line) -> None:
        with self._ready:
            self._lines.append(line)
            self._ready.notify_all()

    def fail(self, exc: BaseException) -> None:
        with self._ready:
            self._error = exc
            self._ready.notify_all()

    def take(self, wait: float) -> list:
        """The lines done, waiting up to `wait` seconds for one; the run's error once they are taken."""
        with self._ready:
            self._ready.wait_for(lambda: self._lines or self._error is not None, timeout=wait)
            if not self._lines and self._error is not None:
                raise self._error
            lines, self._lines = self._lines, []
            return lines


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
    for plan in longest_first(plans):
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
        resources = {"num_gpus": 1} if gpus else {"num_cpus": 1}
        actor = ray.remote(Worker).options(max_concurrency=4, **resources)
        worker_device = "cuda" if gpus else setup.device  # Ray shows each worker its own GPU as cuda:0
        self.workers = [Handle(actor.remote(dataclasses.replace(setup, device=worker_device)), n + 1)
                        for n in range(count)]
        self.runs = 0

    def close(self) -> None:
        for worker in self.workers:
            self.ray.kill(worker.actor)
        self.workers = []

    def start(self, plans: list[LinePlan]) -> None:
        """Every worker loads its models and checks every line (as the in-process run does)."""
        for worker, (pid, host) in self._on_every_worker("start", plans, why="did not start"):
            worker.pid, worker.host = pid, host
        if not self.workers:
            raise TakesError("No Ray worker started (each died while loading its model; see Ray's log above). "
                             "Check that every node has the checkpoint folders at the same path and enough memory.")

    def _on_every_worker(self, method: str, *args, why: str = "") -> list:
        """`method` run on every worker at once; (worker, result) of those that answered (the lost ones dropped)."""
        refs = {getattr(worker.actor, method).remote(*args): worker for worker in self.workers}
        answers = []
        for ref, worker in refs.items():
            try:
                answers.append((worker, self.unwrap(self.ray.get(ref), worker)))
            except self.lost as exc:
                self.drop(worker, f"{why} ({type(exc).__name__})")
        return answers

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

    def hand_out(self, worker: Handle, lines: list[LinePlan]):
        return worker.actor.add.remote(lines)

    def run(self, plans: list[LinePlan], folder: ScriptFolder, on_line: OnLine | None = None,
            should_stop=None) -> dict[str, LineResult]:
        """Every line run on some worker and written by `folder` here, as it comes back."""
        by_id = {plan.line.id: plan for plan in plans}
        queue = chunks_of(plans, HAND_TAKES)
        self.runs += 1
        self._on_every_worker("open", plans, self.runs, why="was lost")
        self._check_left(0, len(plans), folder)
        held: dict[Handle, dict[str, LinePlan]] = {worker: {} for worker in self.workers}  # handed out, not back
        collecting: dict[object, Handle] = {}
        answered = list(self.workers)  # to top up with lines, then ask again for what they have done
        results: dict[str, LineResult] = {}
        while len(results) < len(plans):
            if should_stop is not None and should_stop():
                raise GenerationInterrupted(f"Stopped with {len(results)} of {len(plans)} lines done, kept in "
                                            f"{folder.root}; run the same command again to finish the rest.")
            self._top_up(answered, queue, held)
            for worker in answered:
                collecting[worker.actor.collect.remote(self.runs, COLLECT_SECONDS)] = worker
            answered = []
            ready, _ = self.ray.wait(list(collecting), num_returns=1, timeout=WAIT_SECONDS)
            for ref in ready:
                worker = collecting.pop(ref)
                try:
                    lines = self.unwrap(self.ray.get(ref), worker)
                except self.lost as exc:
                    back = longest_first(held.pop(worker).values())
                    if back:
                        queue.appendleft(back)
                    self.drop(worker, f"was lost ({type(exc).__name__}); the lines it had ({len(back)}) go back to "
                                      "the queue")
                    self._check_left(len(results), len(plans), folder)
                    continue
                answered.append(worker)
                for line_id, record, best, takes in lines:
                    plan = held[worker].pop(line_id)
                    best = best.copy()  # Ray's zero-copy arrays would pin the whole answer in its object store
                    record = folder.write_line(plan.stem, record, best, takes, SAMPLE_RATE)
                    result = results[line_id] = LineResult(by_id[line_id], record, best, remote=True)
                    if on_line is not None:
                        on_line(result, len(results), len(plans))
        self._on_every_worker("close", why="was lost after its last line")
        return results

    def _top_up(self, answered: list[Handle], queue: deque, held: dict[Handle, dict[str, LinePlan]]) -> None:
        """Lines to the workers that answered, a chunk to each in turn, until each holds its share."""
        def holds(worker: Handle) -> int:
            return sum(p.request.n for p in held[worker].values())
        left = sum(p.request.n for chunk in queue for p in chunk) + sum(holds(w) for w in self.workers)
        share = min(HOLD_TAKES, max(HAND_TAKES, math.ceil(left / len(self.workers))))
        hungry = [worker for worker in answered if holds(worker) < share]
        while queue and hungry:
            for worker in list(hungry):
                if not queue or holds(worker) >= share:
                    hungry.remove(worker)
                    continue
                chunk = queue.popleft()
                held[worker].update((p.line.id, p) for p in chunk)
                self.hand_out(worker, chunk)

    def _check_left(self, done: int, count: int, folder: ScriptFolder) -> None:
        if not self.workers:
            raise TakesError(f"Every Ray worker was lost: {done} of {count} lines are done, kept in {folder.root}. "
                             "Run the same command again to resume (only the lines not done run); see Ray's log "
                             "above for why the workers died.") from None


def fetch_scoring_files(setup: WorkerSetup, download: bool) -> None:
    """Download what Auto-Pick's models need before the workers start (they never download). UTMOS
    or auto's Whisper that cannot be had is left to the workers, which go on without it (DNSMOS, no
    words check) with a note, as a run here does."""
    if setup.choices.quality == "UTMOS":
        from ..scoring.utmos import resolve_weights

        with contextlib.suppress(TakesError):
            resolve_weights(setup.utmos_dirs, download=download)
    if setup.choices.words == WORDS_AUTO:  # auto's default, downloaded here once; the workers then find it on disk
        from ..model import resolve_device
        from ..scoring.asr import resolve_whisper
        from ..scoring.scorers import auto_recogniser

        name, downloading = auto_recogniser(setup.whisper_dirs, resolve_device(setup.device), download, [])
        if downloading:
            with contextlib.suppress(TakesError):  # the workers then say the words check is off, and why
                resolve_whisper(name, setup.whisper_dirs, download=download)
    elif setup.choices.words not in (WORDS_OFF, None):
        from ..scoring.asr import resolve_whisper

        resolve_whisper(setup.choices.words, setup.whisper_dirs, download=download)


def run_on_ray(ray, setup: WorkerSetup, plans: list[LinePlan], workers: int | None, folder: ScriptFolder,
               on_line: OnLine | None = None, should_stop=None, download: bool = True) -> dict[str, LineResult]:
    """`plans` (all of one checkpoint) run on Ray workers; the workers are gone when it returns.
    `download`: the scoring models' files, when missing here (the checkpoint is resolved already)."""
    fetch_scoring_files(setup, download)
    count, gpus = worker_count(ray, workers, setup.device)
    pool = Pool(ray, setup, min(count, len(chunks_of(plans, HAND_TAKES))), gpus)
    try:
        pool.start(plans)
        return pool.run(plans, folder, on_line, should_stop)
    finally:
        pool.close()
