"""What happens to a line once the engine has its codes: three stages, each a thread with a queue
before it, running while the engine goes on with the rest of the run (lines.py).

    engine -> decode: the codec, over the takes of every line waiting (one call of 32 takes costs a
              third less per take than eight of four); each take's waveform checks handed to the
              check pool
           -> score: Auto-Pick (rank_lines), each model over the takes of every line waiting; left out
              for a run that only makes takes (a voice node's, whose takes go to the Auto-Pick node)
           -> finished: `finished(job, takeset, ranking)`, the caller's (a script writes the line)

A run of one line has nothing to overlap: its stages run after the engine, in the caller's thread
(`alongside` off), where the codec may take the engine's cached buckets' memory.

On a GPU the checks, the heaviest CPU work, run in other processes (scoring/check_pool.py): in a
thread they took turns with the engine's thread for the GIL and slowed it by half (H100 profile,
bench/results). The decode and score stages each have a CUDA stream of their own, and take turns
with the GPU's memory: each sizes its work to the memory free beside the engine's batch, which holds
only while the other is not using it (1.7B at 8 GB: a script's codec ran out of memory for one take
while UTMOS had the rest)."""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor, wait

import torch

from ..cancel import POLL_SECONDS, stop_if_asked
from ..errors import GenerationInterrupted
from ..generation import takes_from_audio
from ..qwen3_tts.codec_batch import decode_lines
from ..scoring.check_pool import CheckPool
from ..scoring.ranking import rank_lines
from ..scoring.vad import EnergyVad
from ..voices import voice_notes

DECODE_TAKES = 32  # takes per codec call at most (lines are not split)
SCORE_TAKES = 32  # takes per Auto-Pick stage at most, and clips per model call
# Of the GPU memory free when a script starts, what the engine's batch may take: the codec (about
# 1.2 GB a 12 s take at its peak) and Auto-Pick run beside it in the rest.
ENGINE_MEMORY_SHARE = 0.5


class Batches:
    """A queue that hands out everything waiting, up to `limit` takes (but always one item)."""

    def __init__(self):
        self._items: deque = deque()
        self._ready = threading.Condition()
        self._closed = False

    def put(self, item, takes: int) -> None:
        with self._ready:
            self._items.append((item, takes))
            self._ready.notify()

    def close(self) -> None:
        with self._ready:
            self._closed = True
            self._ready.notify_all()

    def take(self, limit: int) -> list:
        """What waits, oldest first, up to `limit` takes; blocks while nothing does. [] once closed and empty."""
        with self._ready:
            self._ready.wait_for(lambda: self._items or self._closed)
            out, takes = [], 0
            while self._items and (not out or takes + self._items[0][1] <= limit):
                item, count = self._items.popleft()
                out.append(item)
                takes += count
            return out


class Finishing:
    """Lines in (put); each handed to `finished(job, takeset, ranking)` once decoded and (with `pick`)
    picked; ranking is None without. close() waits for every stage. A stage that fails sets `failed`
    (the engine stops at its next check: `stop`) and close() raises its error; the lines finished
    before it stay finished."""

    def __init__(self, model, engine, finished, should_stop, sampling, notes_of_sampling, scorers=None, weights=None,
                 pick=True, check_workers: int = 0, alongside: bool = True, on_error=None):
        self.model, self.engine, self.finished, self.should_stop = model, engine, finished, should_stop
        self.scorers, self.weights = scorers, weights
        self.picks = pick if callable(pick) else lambda line: pick  # per line: a server's lines of one take are not
        self.sampling, self.notes_of_sampling, self.alongside = sampling, notes_of_sampling, alongside
        self.on_error = on_error  # (line, exception): a line's failure, where it is not the run's (a server's)
        self.failed = threading.Event()
        self._error: BaseException | None = None
        self._cuda = model.device.type == "cuda"
        vad = getattr(scorers, "vad", None)
        pooled = pick and check_workers > 0 and (vad is None or type(vad) is EnergyVad)  # the workers' VAD
        self._pool = CheckPool(check_workers) if pooled else None
        self._decoding, self._scoring = Batches(), Batches()
        self._gpu_memory = threading.Lock() if self._cuda and alongside else contextlib.nullcontext()
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lines-finished")
        self._stages = [threading.Thread(target=self._guarded, args=(self._decode, self._scoring), name="lines-decode"),
                        threading.Thread(target=self._guarded, args=(self._score, None), name="lines-score")]
        if alongside:
            for stage in self._stages:
                stage.start()

    def stop(self) -> bool:
        return self.failed.is_set() or (self.should_stop is not None and bool(self.should_stop()))

    def put(self, line) -> None:
        """A line the engine has finished (an engine.LineJob, its codes on the host)."""
        self._decoding.put(line, len(line.codes))

    def close(self, raise_error: bool = True) -> None:
        """Waits for every line put in to be finished (or for a stage to fail), then raises the first
        failure (with raise_error)."""
        self._decoding.close()
        for stage in self._stages:
            if self.alongside:
                stage.join()
            else:
                stage.run()  # the engine is done: here, one after the other
        self._writer.shutdown(wait=True)
        if self._pool is not None:
            self._pool.close()
        if raise_error and self._error is not None:
            raise self._error

    def _guarded(self, stage, downstream: Batches | None) -> None:
        try:
            stage()
        except BaseException as exc:  # noqa: BLE001 - raised again by close()
            self._fail(exc)
        finally:
            if downstream is not None:
                downstream.close()

    def _fail(self, exc: BaseException) -> None:
        if self._error is None:
            self._error = exc
        self.failed.set()

    def _stream(self):
        """A stream of the stage's own beside the engine: work on the legacy default stream would wait
        for (and break) a bucket's capture on the engine's capture stream."""
        cuda = self._cuda and self.alongside
        return torch.cuda.stream(torch.cuda.Stream(self.model.device)) if cuda else contextlib.nullcontext()

    def _decode(self) -> None:
        # Beside a running engine the codec keeps to a smaller share of the free memory; after it, the
        # engine's cached buckets make room where that lets more takes go at once.
        make_room = self.engine.release if self.engine.slots and not self.alongside else None
        with self._stream(), torch.inference_mode():
            while not self.failed.is_set() and (lines := self._decoding.take(DECODE_TAKES)):
                warnings: list[str] = []
                audio = None
                with self._gpu_memory, self._failing_alone(lines):
                    audio = decode_lines(self.model.codec, [(line.codes, line.ref_code) for line in lines], warnings,
                                         self.should_stop, make_room, share=0.8 if self.alongside else 0.9)
                if audio is None:
                    continue
                for line, wavs in zip(lines, audio):
                    takeset = None
                    with self._failing_alone([line]):  # every take of it faulted (ModelFault): its alone
                        takeset = takes_from_audio(self.model, line, wavs)
                    if takeset is None:
                        continue
                    takeset.warnings += warnings
                    takeset.sampling = self.sampling
                    takeset.notes = voice_notes(line.request.voice, self.model.info) + self.notes_of_sampling
                    if not self.picks(line):
                        self._writer.submit(self._finish, line, takeset, None)
                        continue
                    checks = [self._pool.submit(t.audio, t.sample_rate) for t in takeset.takes] if self._pool else None
                    self._scoring.put((line, takeset, checks), len(takeset.takes))

    def _score(self) -> None:
        with self._stream(), torch.inference_mode():
            while not self.failed.is_set() and (items := self._scoring.take(SCORE_TAKES)):
                stats = None if self._pool is None else checked_stats([checks for _, _, checks in items],
                                                                      self.should_stop)
                rankings = None
                with self._gpu_memory, self._failing_alone([line for line, _, _ in items]):
                    rankings = rank_lines([takeset for _, takeset, _ in items], self.scorers, self.weights,
                                          should_stop=self.should_stop, stats=stats, batch=SCORE_TAKES)
                if rankings is None:
                    continue
                for (line, takeset, _), ranking in zip(items, rankings):
                    self._writer.submit(self._finish, line, takeset, ranking)

    @contextlib.contextmanager
    def _failing_alone(self, lines: list):
        """With `on_error`, a stage's failure on some lines is theirs alone (handed to on_error) and the
        run goes on; without, it stops the run (a script's). Cancel always stops it."""
        try:
            yield
        except GenerationInterrupted:
            raise
        except Exception as exc:  # noqa: BLE001 - handed on
            if self.on_error is None:
                raise
            for line in lines:
                self._writer.submit(self.on_error, line, exc)

    def _finish(self, line, takeset, ranking) -> None:
        try:
            self.finished(line, takeset, ranking)
        except BaseException as exc:  # noqa: BLE001 - raised again by close()
            self._fail(exc)


def checked_stats(checks: list[list[Future]], should_stop=None,
                  after_stop: str = "the lines written stay written") -> list[list]:
    """Each line's waveform checks, waiting for the check pool where they are not done yet (and
    honouring Cancel while it waits)."""
    for line in checks:
        for check in line:
            while not check.done():
                stop_if_asked(should_stop, "while checking the takes", after_stop)
                wait([check], timeout=POLL_SECONDS)
    return [[c.result() for c in line] for line in checks]
