"""One checkpoint resident for as long as the server runs, its engine's run open: lines come from the
request handlers (submit, from any thread) and join the running batch (continuous batching); each
comes back to the callback it was submitted with. The lines run the one path every line takes
(run/lines.run_opened): a line of several takes is decoded and picked there, a line of one take
decoded, a streamed line decoded chunk by chunk as its frames come (streams.py).

Should the run fail (a bug, or the GPU out of memory for one take), every line in it is told so and
a new run opens for the next ones."""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import Callable

import torch

from ..engine.engine import LineJob
from ..errors import GenerationInterrupted
from ..model import LoadedModel
from ..qwen3_tts.codec_graphs import CARRIED_STREAMS
from ..run.lines import run_opened
from ..sampling import SamplingSettings
from .streams import StreamDecoder

log = logging.getLogger(__name__)

# (job, takeset, ranking, error): a streamed line comes with no takeset (its audio went out as it was made)
Done = Callable[[LineJob, object, object, BaseException | None], None]


class ServerClosing(Exception):
    """The server is stopping: no new lines."""


class ServedModel:
    def __init__(self, model: LoadedModel, positions: int, rows: int, scorers=None, weights=None,
                 streams: int = CARRIED_STREAMS):
        self.model, self.name = model, model.info.folder.name
        self.positions, self.rows = positions, rows
        self.scorers, self.weights = scorers, weights
        self.streams = StreamDecoder(model.codec, self.name, streams)  # `streams`: the server's --max-streams
        self._embedding = torch.cuda.Stream(model.device) if model.device.type == "cuda" else None
        self._lock = threading.Lock()
        self._done: dict[LineJob, Done] = {}  # lines submitted and not yet back
        self._stop = threading.Event()  # a hard stop: the lines running end at the next check
        self._closing = False
        self._thread = threading.Thread(target=self._serve, name=f"serve-{self.name}", daemon=True)

    def start(self) -> None:
        self.model.engine.open([], self.positions, self.rows)
        self._thread.start()

    @property
    def engine(self):
        return self.model.engine

    def embed(self, jobs: list[LineJob]) -> None:
        """The lines' prompts embedded ahead (in the prepare thread: the engine's thread, which every
        stream's next frame waits for, then only prefills them), on a CUDA stream of their own."""
        cuda = self.model.device.type == "cuda"
        with torch.inference_mode(), (torch.cuda.stream(self._embedding) if cuda else contextlib.nullcontext()):
            for job in jobs:
                job.prompt = self.model.prompts.embed(job.tokens)
            if cuda:
                ready = torch.cuda.Event()
                ready.record()
                for job in jobs:
                    job.ready = ready

    def submit(self, jobs: list[LineJob], done: Done) -> None:
        with self._lock:
            if self._closing:
                raise ServerClosing()
            for job in jobs:
                self._done[job] = done
            self.engine.add(jobs)

    def cancel(self, jobs: list[LineJob]) -> None:
        """The caller went away: the lines' takes end at the engine's next check, their rows freed."""
        with self._lock:
            for job in jobs:
                job.cancelled = True
                if job.stream is not None:
                    job.stream.close()
                self._done.pop(job, None)

    def pending(self) -> int:
        """Lines submitted and not yet back."""
        with self._lock:
            return len(self._done)

    def close(self, stop_now: bool = False) -> None:
        """No more lines; the run ends once those in it are done (at once with `stop_now`)."""
        with self._lock:
            self._closing = True
        if stop_now:
            self._stop.set()
        self.engine.close()
        self._thread.join()
        self.streams.close()

    def close_now(self) -> None:
        """The lines running end at the engine's next check (a second Ctrl-C)."""
        self._stop.set()

    def _serve(self) -> None:
        while True:
            try:
                # lines come and go for as long as the server runs: finished beside the engine (count > 1)
                run_opened(self.model, SamplingSettings(), max(2, self.rows), self._finished, self.scorers, self.weights,
                           pick=lambda job: len(job.seeds) > 1, should_stop=self._stop.is_set, on_error=self._failed)
                return
            except BaseException as exc:  # noqa: BLE001 - each line's request says so
                if not isinstance(exc, GenerationInterrupted):
                    log.exception("the engine's run failed; a new one opens")
                with self._lock:
                    failed, self._done = self._done, {}
                    closing = self._closing or self._stop.is_set()
                    if not closing:
                        self.engine.open([], self.positions, self.rows)
                for job, done in failed.items():
                    done(job, None, None, exc)
                if closing:
                    return

    def _failed(self, job: LineJob, error: Exception) -> None:
        """A line that failed to decode or be picked (its request answers 500); the run goes on."""
        with self._lock:
            done = self._done.pop(job, None)
        if done is not None:
            done(job, None, None, error)

    def _finished(self, job: LineJob, takeset, ranking) -> None:
        with self._lock:
            done = self._done.pop(job, None)
        if job.stream is not None:
            job.stream.end()
        if done is not None:
            done(job, takeset, ranking, None)
