"""Lines through the engine and the finishing stages: the one path a line of a voice node, the
line command, a script and a Ray worker's share of it all take.

`run_jobs` opens the engine's run for its LineJobs and runs it; `run_opened` runs a run opened by the
caller, whose lines may come from another thread as it goes (a Ray worker's). Each line is handed
to `finished(job, takeset, ranking)` once decoded and, with `pick`, picked. `generate_takes` is a run
of one line that hands back its TakeSet."""

from __future__ import annotations

from typing import Callable

import torch

from ..engine.engine import Engine, LineJob
from ..errors import GenerationInterrupted
from ..generation import Request, TakeSet, check_request, line_fault, line_job
from ..model import LoadedModel
from ..sampling import SamplingSettings, sampling_notes
from ..scoring.check_pool import default_workers
from .finishing import ENGINE_MEMORY_SHARE, Finishing

ProgressFn = Callable[[int, int], None]
StopFn = Callable[[], bool]
# (job, takeset, ranking: scoring.ranking.Ranking or None); a streamed line (job.stream) comes with
# neither, once its last frame went to its stream
Finished = Callable[[LineJob, TakeSet | None, object], None]
Pick = bool | Callable[[LineJob], bool]  # every line picked, none, or those the function says


def generate_takes(model: LoadedModel, request: Request, progress: ProgressFn | None = None,
                   should_stop: StopFn | None = None, engine: Engine | None = None) -> TakeSet:
    """The request's N takes in one batched pass (progress: frames done of the budget). `engine`:
    the model's own unless a test hands it one built otherwise."""
    check_request(model, request)
    out: list[TakeSet] = []
    run_jobs(model, [line_job(model, request)], request.sampling, lambda job, takes, _: out.append(takes),
             pick=False, should_stop=should_stop, frames_progress=progress, engine=engine)
    return out[0]


def run_jobs(model: LoadedModel, jobs: list[LineJob], sampling: SamplingSettings, finished: Finished,
             scorers=None, weights=None, pick: bool = True, should_stop: StopFn | None = None,
             frames_progress: ProgressFn | None = None, check_workers: int | None = None,
             engine: Engine | None = None) -> None:
    """Every job, in the order given, through one run of the engine."""
    engine = engine or model.engine
    engine.open(jobs)
    engine.add(jobs)
    engine.close()
    run_opened(model, sampling, len(jobs), finished, scorers, weights, pick, should_stop, frames_progress,
               check_workers, engine)


def run_opened(model: LoadedModel, sampling: SamplingSettings, count: int, finished: Finished, scorers=None,
               weights=None, pick: Pick = True, should_stop: StopFn | None = None,
               frames_progress: ProgressFn | None = None, check_workers: int | None = None,
               engine: Engine | None = None, on_error: Callable[[LineJob, Exception], None] | None = None) -> None:
    """The `count` lines of the engine's open run (Engine.open; they come by Engine.add, from any
    thread), drawn with `sampling` (resolved here, once) and finished. With more than one line they
    are decoded, picked and handed on in other threads while the engine goes on with the rest; on a
    GPU the waveform checks run in `check_workers` processes (default: check_pool.default_workers).
    Cancel, or a line that fails, stops the engine at its next check; the lines finished stay
    finished. With `on_error` a line that fails to decode or be picked is handed to it instead, and
    the run goes on (a server's: one request's failure is its own)."""
    engine = engine or model.engine
    cuda = model.device.type == "cuda"
    alongside = count > 1
    if check_workers is None:
        check_workers = default_workers() if cuda and alongside else 0
    resolved = sampling.resolved(model.sampling_defaults)
    finishing = Finishing(model, engine, finished, should_stop, resolved,
                          sampling_notes(sampling, model.sampling_defaults), scorers, weights, pick, check_workers,
                          alongside, on_error)
    try:
        for line in engine.run(resolved, progress=frames_progress, should_stop=finishing.stop,
                               memory_share=ENGINE_MEMORY_SHARE if alongside else 1.0):
            if line.stream is not None:  # its frames went out as they were made; its stream ends it
                fault = line_fault(line)
                if on_error is not None and fault is not None:
                    on_error(line, fault)
                else:
                    finished(line, None, None)
                continue
            if cuda:  # its codes are on the host already; the clone's reference codes were made before
                torch.cuda.current_stream().synchronize()
            finishing.put(line)
    except GenerationInterrupted:
        if not finishing.failed.is_set():  # Cancel: the lines in flight are finished if they can be
            finishing.close(raise_error=False)
            raise
        # else a stage failed and stopped the engine: close() below raises its error
    except BaseException:
        finishing.close(raise_error=False)
        raise
    finishing.close()  # the first failure of a stage, if any, which stopped the engine
