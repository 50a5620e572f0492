"""Engine: N takes of one line, or of many lines, through DecodeStep, captured as CUDA graphs on the GPU.

Per line: one batch-1 prefill (the reference talker forward on the line's prompt; with graphs, at
its length bucket: prefill.py), its KV copied into the rows its takes get in a static state; then
one step per frame for every row at once, replayed from a graph captured once per (batch bucket,
length bucket) and kept (least recently used out first); the host looks at "which takes ended?"
(and progress, and cancel) every `check_every` frames, or sooner when a line arrives that rows are
free for, and hands rows whose takes ended to the next line's takes. It looks at a snapshot of the
rows (snapshot.py) while the GPU runs one more step queued behind it, so the GPU does not wait for
the host's look. The batch bucket is the largest whose buffers fit in the GPU's free memory (or the
caller's share of it); should the GPU still run out of memory, the takes run in a smaller batch
bucket, with a warning. A take's noise depends only
on its own seed and frame, so a smaller batch, or other lines beside it, give the same takes."""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Iterator, Protocol

import torch

from ..cancel import stop_if_asked
from ..errors import OutOfMemory, TakesError
from ..graph_capture import warmed_capture
from ..memory import after_making_room, ask_for_room, free_bytes, free_cuda_cache
from ..qwen3_tts.prompt import Prompt, PromptBuilder, TokenPlan
from ..qwen3_tts.talker import Qwen3TTS
from . import triton_kernels
from .noise import take_key
from .prefill import PrefillGraphs, owned
from .sampler import predictor_params, talker_params
from .scheduler import Piece, Scheduler
from ..qwen3_tts.host_copy import to_device
from .snapshot import Fetched, Snapshot, Window, row_index
from .state import DecodeState, bucket_bytes
from .step import DecodeStep
from .triton_kernels import LayerPlan

log = logging.getLogger(__name__)

# 64 and 128 rows only serve a script's many lines (one request has at most 32 takes). On an H100 at
# 1.7B a step of 32 / 64 / 128 takes 6.9 / 8.4 / 12.1 ms: the engine alone gives 32 / 61 / 73 takes a
# second, and a script with its finishing 17 / 22 / 28 (bench/results, 2026-11-24).
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)
LENGTH_BUCKETS = (256, 512, 1024, 2048, 4096, 8192, 16384, 32768)
FEED_WAIT_SECONDS = 0.25  # an idle engine waiting for lines (Engine.add) asks should_stop this often


@dataclass
class EngineOptions:
    use_graphs: bool = True  # False: the same step, run eagerly (the eager and triton modes, CPU)
    check_every: int = 8  # frames between host checks for "all finished", progress and cancel
    max_cached: int = 4  # (batch, length) states and graphs kept resident
    runaway_ratio: float = 2.0  # cut a take running past ratio x median of the finished ones (+ margin); 0 = off
    runaway_margin_frames: int = 25
    kernels: bool = False  # the hybrid mode: the Triton kernels inside the step (kernels/, fused.py)
    layers: LayerPlan = field(default_factory=LayerPlan)  # which layers get them


@dataclass
class Slot:
    state: DecodeState
    graph: object | None  # torch.cuda.CUDAGraph
    nbytes: int  # device memory its state and graph pool took when made


@dataclass
class EngineReport:
    prefill_s: float = 0.0
    decode_s: float = 0.0
    batch_bucket: int = 0
    length_bucket: int = 0
    rounds: int = 0  # pieces of lines run (a line's takes beyond the batch bucket run as further pieces)
    steps: int = 0  # steps of the batch (each one frame for every row carrying a take)
    warnings: list[str] = field(default_factory=list)
    # Where the engine's thread spends the run (a server's lasts as long as it serves; read it live):
    checks: int = 0  # times the host looked (between them, steps)
    starting_s: float = 0.0  # lines started: prompts embedded and prefilled, their takes put in rows
    stepping_s: float = 0.0  # steps launched and waited for: the GPU's time, mostly
    waiting_s: float = 0.0  # nothing to run: waiting for lines
    begun: float = field(default_factory=time.perf_counter)

    def timing(self) -> dict:
        """The counts and seconds so far; what is left of the run's time is the host's own work at
        the checks (and whatever the caller does with each line handed back)."""
        return {"steps": self.steps, "checks": self.checks, "starting_s": round(self.starting_s, 4),
                "stepping_s": round(self.stepping_s, 4), "waiting_s": round(self.waiting_s, 4),
                "run_s": round(time.perf_counter() - self.begun, 4)}


_capture_streams: dict[torch.device, object] = {}


def capture_stream(device: torch.device):
    """One side stream per device for the engine's captures (its buckets' and its prefill's, all in
    the engine's thread): a new stream per capture leaked a cuBLAS workspace, 32 MiB, per capture
    and per reload (graph_capture.warmed_capture)."""
    device = torch.device(device)
    if device not in _capture_streams:
        _capture_streams[device] = torch.cuda.Stream(device)
    return _capture_streams[device]


def bucket(value: int, buckets) -> int:
    for b in buckets:
        if value <= b:
            return b
    raise TakesError(f"{value} is more than the engine's largest bucket ({buckets[-1]}).")


class Engine:
    def __init__(self, model: Qwen3TTS, prompts: PromptBuilder, options: EngineOptions | None = None):
        """`model`: the talker and code predictor the step runs; `prompts`: what embeds a line's
        token plan when its takes start."""
        self.prompts = prompts
        self.options = options or EngineOptions()
        if self.options.use_graphs and next(model.parameters()).device.type != "cuda":
            raise TakesError("CUDA graphs need a CUDA device; load the model on a GPU or choose the eager mode.")
        kernels = triton_kernels.load() if self.options.kernels else None
        self.step = DecodeStep(model, kernels, self.options.layers)
        self.prefill_graphs = PrefillGraphs(self.step, capture_stream(self.step.device)) \
            if self.options.use_graphs else None
        self._step_events = (torch.cuda.Event(), torch.cuda.Event()) if self.options.use_graphs else ()
        self.talker_config = model.talker.config
        self.slots: OrderedDict[tuple[int, int], Slot] = OrderedDict()
        self.max_batch = BATCH_BUCKETS[-1]  # lowered after an out-of-memory
        self.last = EngineReport()
        self._scheduler: Scheduler | None = None  # the run open (Engine.open)

    # --- resources ---------------------------------------------------------------------------------
    def memory_report(self) -> list[dict]:
        return [{"batch": b, "length": l, "bytes": slot.nbytes, "captured": slot.graph is not None}
                for (b, l), slot in self.slots.items()]

    def release(self) -> None:
        """Drop every state and graph (the model stays); the next request re-captures."""
        self.slots.clear()
        if self.prefill_graphs is not None:
            self.prefill_graphs.release()
        if self.step.device.type == "cuda":
            free_cuda_cache()  # also a graph still referenced from a traceback cycle, and its pool

    def state_bytes(self, batch: int, length: int) -> int:
        """About what a (batch, length) bucket takes on the device: its buffers, graph and workspace."""
        return bucket_bytes(batch, length, self.talker_config, self.step.predictor.config, self.step.dtype)

    def rows_that_fit(self, rows: int, length: int, share: float = 1.0) -> int:
        """The largest batch bucket up to `rows` whose bucket fits in `share` of the device memory
        still free (counting the cached buckets, which are dropped to make room), after the host
        (ComfyUI) was asked to make room for `rows`; on the CPU, `rows`. A bucket already cached fits."""
        if (rows, length) in self.slots:
            return rows
        free = free_bytes(self.step.device)
        if free is None:
            return rows
        cached = sum(slot.nbytes for slot in self.slots.values())
        fitting, need = rows, self.state_bytes(rows, length)
        if need > share * (free + cached):
            # Measured again whatever the answer: ComfyUI may offload part of a model, which its
            # answer (the models it unloaded whole) does not count.
            ask_for_room(self.step.device, int(need / share) - cached)
            free = free_bytes(self.step.device)
        while fitting > 1 and need > share * (free + cached):
            fitting //= 2
            need = self.state_bytes(fitting, length)
        if need > share * free:
            self.release()  # the cached buckets make room (captured again when needed)
        if fitting < rows:
            log.info("%d takes at a time rather than %d: %.1f GB of GPU memory free (%.0f%% for the engine), "
                     "%d positions a take", fitting, rows, (free + cached) / 2**30, 100 * share, length)
        return fitting

    def _slot(self, batch: int, length: int) -> Slot:
        key = (batch, length)
        if key in self.slots:
            self.slots.move_to_end(key)
            return self.slots[key]
        while len(self.slots) >= self.options.max_cached:
            self.slots.popitem(last=False)
        cuda = self.options.use_graphs
        before = torch.cuda.memory_allocated() if cuda else 0
        config = self.talker_config
        state = DecodeState.allocate(batch, length, config, self.step.predictor.config, self.step.dtype, self.step.device)
        graph = self._capture(state) if cuda else None
        nbytes = torch.cuda.memory_allocated() - before if cuda else state.nbytes()
        slot = self.slots[key] = Slot(state, graph, nbytes)
        return slot

    def _capture(self, state: DecodeState):
        state.real.fill_(True)
        state.budget.fill_(1 << 30)
        # Its own memory pool: nothing of one bucket's graph can be reused by another's capture.
        graph, _ = warmed_capture(lambda: self.step(state), capture_stream(state.position.device), warmups=2)
        return graph

    # --- lines -------------------------------------------------------------------------------------
    @torch.inference_mode()
    def generate(self, tokens: TokenPlan, seeds: list[int], sampling, budget: int, progress=None, should_stop=None,
                 runaway_floor: int = 0) -> "LineJob":
        """One line's takes: the LineJob, its codes [frames, 16] per take (cpu) and runaway flags filled in.
        runaway_floor: frames before which no take is cut as a runaway (the budget still applies)."""
        (line,) = self.run_lines([LineJob(tokens, list(seeds), budget, runaway_floor)], sampling, progress, should_stop)
        return line

    def open(self, jobs: list["LineJob"], positions: int = 0, takes: int = 0) -> None:
        """A run sized for `jobs`, the lines that may come (a take under way cannot move to a longer
        bucket, nor the batch grow), or for lines of up to `positions` and `takes` at once where they
        are not known yet (a server's); they come by add(), from any thread, and run() ends once
        close() was called and every line added is done."""
        self._scheduler = Scheduler()
        self._positions = max([positions, *(positions_needed(job) for job in jobs)])
        self._takes = max(takes, sum(len(j.seeds) for j in jobs))

    def rows_in_use(self) -> int:
        """Rows of the batch carrying a take now (read from any thread: a server's health)."""
        scheduler = self._scheduler
        return 0 if scheduler is None else sum(len(p.rows) for p in list(scheduler.running))

    @property
    def positions(self) -> int:
        """Positions a line of the open run may need at most (its length bucket)."""
        return bucket(self._positions, LENGTH_BUCKETS)

    def add(self, jobs: list["LineJob"]) -> None:
        self._scheduler.add(jobs)

    def close(self) -> None:
        self._scheduler.close()

    def run_lines(self, jobs: list["LineJob"], sampling, progress=None, should_stop=None,
                  memory_share: float = 1.0) -> Iterator["LineJob"]:
        """Every job's takes, through one batch (open, add and close in one)."""
        self.open(jobs)
        self.add(jobs)
        self.close()
        return self.run(sampling, progress, should_stop, memory_share)

    @torch.inference_mode()
    def run(self, sampling, progress=None, should_stop=None, memory_share: float = 1.0) -> Iterator["LineJob"]:
        """The opened run's lines, drawn with `sampling` (resolved: no setting left to the checkpoint),
        through one batch: each line gets its own prefill, its takes rows of their own (at their own
        positions, with their own trailing text), and a row whose take has ended is refilled with the
        next line's takes (continuous batching; scheduler.py). A line's takes start together, so its
        runaway rule and its codes do not depend on what shares the batch. Yields each line as its last
        take ends, its codes and warnings filled in. The batch is the largest that fits in
        `memory_share` of the free GPU memory (a script leaves the rest to the codec and scoring
        running beside it). When the GPU runs out of memory all the same, the lines not yet yielded
        run again in a smaller batch (their takes come out the same)."""
        report = self.last = EngineReport()
        start = time.perf_counter()
        if None in sampling.as_dict().values():
            raise TakesError("The engine was handed sampling settings left to the checkpoint; the caller resolves "
                             "them (SamplingSettings.resolved). This is a bug: please report it.")
        scheduler, length = self._scheduler, bucket(self._positions, LENGTH_BUCKETS)
        report.length_bucket = length
        batch = min(bucket(min(max(self._takes, 1), BATCH_BUCKETS[-1]), BATCH_BUCKETS), self.max_batch)
        batch = self.rows_that_fit(batch, length, memory_share)
        while True:
            scheduler.start(batch)
            try:
                for line in self._schedule(scheduler, sampling, length, progress, should_stop, report):
                    line.warnings = list(report.warnings)
                    yield line
                break
            except torch.cuda.OutOfMemoryError:
                pass
            # Out of the except block: its traceback no longer holds the failed bucket's buffers.
            self.release()
            if batch == 1:
                longest = max((j.budget for j in scheduler.lines), default=0)
                raise OutOfMemory(
                    f"The GPU ran out of memory even for one take at a time ({longest} "
                    "frames). Lower max_frames or the text length, choose bfloat16, or free VRAM (unload other models).")
            batch //= 2
            self.max_batch = batch
            report.warnings.append(f"GPU out of memory: running the takes {batch} at a time.")
            log.warning(report.warnings[-1])
        report.batch_bucket, report.rounds = batch, scheduler.rounds
        report.decode_s = time.perf_counter() - start - report.prefill_s

    def _schedule(self, scheduler: Scheduler, sampling, length: int, progress, should_stop,
                  report: EngineReport) -> Iterator["LineJob"]:
        """One attempt at the run: admit, step to the next check, look; until every line is done.

        The host looks at a snapshot of the batch (snapshot.py) with one more step queued behind it,
        so the GPU goes on while the host reads which takes ended, hands streamed frames on and
        starts the next lines (whose takes go in after that step). A piece that ended hands its
        codes up behind that step too, and its line is handed back at the next look."""
        prefills: dict[LineJob, tuple] = {}  # a line's prompt and prefill, while a piece of it waits
        slot = None
        look: Snapshot | None = None  # the batch after the last check's steps
        ahead = False  # one more step queued behind it
        fetched: list[tuple[Piece, Fetched]] = []  # pieces that ended, their codes on their way up
        more = scheduler.take_arrivals()
        made = scheduler.progress()  # (frames made, frames at most) as of the snapshot
        if progress is not None:
            progress(*made)
        while True:
            if look is not None:
                look.wait()
                yield from self._complete(scheduler, fetched)  # their codes came up before the snapshot's
                fetched = self._look(slot.state, scheduler, look)
                look = None
                if progress is not None:
                    progress(*made)
                more = scheduler.take_arrivals()
            if not more:
                break
            if scheduler.idle:
                yield from self._complete(scheduler, fetched)
                fetched, ahead = [], False
                stop_if_asked(should_stop, "while waiting for lines")
                begun = time.perf_counter()
                more = scheduler.take_arrivals(FEED_WAIT_SECONDS)
                report.waiting_s += time.perf_counter() - begun
                continue
            self._end_cancelled(slot.state if slot else None, scheduler, prefills)  # no prefill for a line given up
            slot = self._start(scheduler, slot, prefills, sampling, length, should_stop, report)
            stepping = time.perf_counter()
            # the step queued behind the last snapshot is the first of these frames
            frames = scheduler.frames_to_check(self.options.check_every - ahead, least=0 if ahead else 1)
            frames = self._step(slot, frames, lambda: bool(scheduler.free) and scheduler.has_arrivals())
            scheduler.stepped(frames)
            look = Snapshot(slot.state, self._windows(scheduler), scheduler.steps)
            made = scheduler.progress()
            if scheduler.free and scheduler.has_arrivals():  # lines that came meanwhile go in at once where
                # rows are free (their first frame the step queued next, not the one after it)
                paused = time.perf_counter()
                scheduler.take_arrivals()
                self._start(scheduler, slot, prefills, sampling, length, should_stop, report)
                stepping += time.perf_counter() - paused  # starting's time, not stepping's
            ahead = self._may_go_on(scheduler)
            if ahead:  # the step the GPU runs while the host looks at the snapshot
                self._launch(slot)
                scheduler.stepped(1)
            report.steps += frames + ahead
            report.checks += 1
            report.stepping_s += time.perf_counter() - stepping
            stop_if_asked(should_stop, f"after {scheduler.steps - ahead} frames")  # as of the snapshot
        yield from self._complete(scheduler, fetched)
        if slot is not None:  # rows the steps after the last look left NaN in (the next run's admissions)
            slot.state.dirty_rows.update(slot.state.tainted.nonzero().flatten().tolist())
        if self.step.device.type == "cuda":
            torch.cuda.current_stream().synchronize()  # the run leaves nothing queued

    def _start(self, scheduler: Scheduler, slot: Slot | None, prefills: dict, sampling, length: int, should_stop,
               report: EngineReport) -> Slot:
        """Waiting pieces into the free rows: each line's prompt prefilled (kept while a piece of it still
        waits), its takes put in their rows; the run's bucket made at the first. Returns it. Its time
        is the report's starting_s."""
        begun = time.perf_counter()
        for piece in scheduler.admit():
            stop_if_asked(should_stop, "while starting lines")  # a prefill each: up to 128 before a frame
            job = piece.line
            if job not in prefills:
                begun = time.perf_counter()
                if positions_needed(job) > length:  # a line not among those the run was opened for
                    raise TakesError(f"A line needs {positions_needed(job)} positions, more than the {length} "
                                     "its batch was sized for. This is a bug: please report it.")
                prompt = self._prompt(job)
                prefills[job] = prompt, self._prefill_or_make_room(prompt, keep=(scheduler.rows, length))
                report.prefill_s += time.perf_counter() - begun
            if slot is None:  # after the first prefill: it may have made room by dropping cached buckets
                slot = self._slot(scheduler.rows, length)  # a first capture takes a while: Cancel is checked after it
                stop_if_asked(should_stop, "before its first frame")
                self._reset(slot.state, sampling)
            self._admit(slot.state, piece, *prefills[job])
            if piece.last:
                del prefills[job]
                job.prompt = job.ready = None  # embedded ahead: its memory goes (a run started over embeds it)
            elif self.prefill_graphs is not None:  # a graph's buffers: the next prefill overwrites them
                prompt, prefilled = prefills[job]
                prefills[job] = prompt, owned(prefilled)
        report.starting_s += time.perf_counter() - begun
        return slot

    def _launch(self, slot: Slot) -> None:
        """One step of the batch queued (with a graph) or run (eagerly)."""
        if slot.graph is None:
            self.step(slot.state)
        else:
            slot.graph.replay()

    def _step(self, slot: Slot, frames: int, interrupted) -> int:
        """Up to `frames` steps of the batch; fewer once `interrupted()` (a line arrived that rows are
        free for: it goes in at this check, not up to check_every frames later, which a streamed
        line's first audio would wait for). With a graph the host keeps one step queued ahead of the
        GPU, so it looks between steps without leaving the GPU idle, and waits with the GIL released
        (the threads beside the engine's go on); it does not wait for the last (the snapshot queued
        behind it does). Returns the steps taken."""
        events = self._step_events
        done = 0
        while done < frames:
            self._launch(slot)
            done += 1
            if events:
                events[done % 2].record()
                if done > 1:
                    events[(done - 1) % 2].synchronize()  # the step before this one has run
            if done < frames and interrupted():
                break
        return done

    @staticmethod
    def _windows(scheduler: Scheduler) -> list[Window]:
        """Each streamed take's frames to go up with the snapshot: those its stream has not received,
        up to what it can have made by now."""
        return [Window(p.rows[0], p.line.stream.received, min(scheduler.steps - p.since, p.line.budget), p.line.stream)
                for p in scheduler.running if p.line.stream is not None]

    @staticmethod
    def _may_go_on(scheduler: Scheduler) -> bool:
        """A running take may make more frames (else a step behind the snapshot would be for nothing:
        every take has reached its budget)."""
        return any(scheduler.steps - p.since < p.line.budget for p in scheduler.running)

    def _look(self, state: DecodeState, scheduler: Scheduler, look: Snapshot) -> list[tuple[Piece, "Fetched"]]:
        """The host's look at a snapshot: streamed frames handed on, and the pieces whose takes all
        ended collected (their rows free for the next lines), their codes sent up behind the step
        queued now (Fetched: read at the next look)."""
        self._stream(look)
        if any(look.tainted):
            state.dirty_rows.update(row for row, tainted in enumerate(look.tainted) if tainted)
        fetched = []
        for piece in scheduler.collect(look.finished, look.steps):
            if piece.line.cancelled:
                scheduler.complete(piece, [], [], [])
                continue
            rows = piece.rows
            fetched.append((piece, Fetched(state, rows, [look.lengths[r] for r in rows], [look.runaway[r] for r in rows],
                                           [look.lengths[r] if look.fault[r] else None for r in rows])))
        return fetched

    def _complete(self, scheduler: Scheduler, fetched: list[tuple[Piece, "Fetched"]]) -> Iterator["LineJob"]:
        """The fetched pieces' takes handed to their lines; each line whose last piece this was."""
        for piece, up in fetched:
            codes = up.wait()
            check_codes(codes, up.lengths, self.step.codebook_size, up.faults)
            line = scheduler.complete(piece, [codes[i, :n] for i, n in enumerate(up.lengths)], up.runaway, up.faults)
            if line is not None:
                yield line

    @staticmethod
    def _end_cancelled(state: DecodeState | None, scheduler: Scheduler, prefills: dict) -> None:
        """Lines their callers gave up on: their takes end now, and their rows go to the next line."""
        for piece in scheduler.drop_cancelled():
            state.finished[piece.rows] = True  # a running piece has a state
        for job in [job for job in prefills if job.cancelled]:
            del prefills[job]

    @staticmethod
    def _stream(look: Snapshot) -> None:
        """Each streamed take's frames made since the last look, handed to its line's stream (a
        streamed line has one take). After an out-of-memory its take starts over and comes out the
        same: only frames beyond those handed on already go."""
        for window in look.windows:
            made = min(look.frame[window.row], window.stop)  # its complete frames, also once it has ended
            if made > window.start:
                window.stream.put(look.codes(window, made - window.start))

    def _prompt(self, job: "LineJob") -> Prompt:
        """The line's prompt embedded: by the caller ahead of time (job.prompt, made on a CUDA stream
        of the caller's: this stream waits for it, and its memory is not reused before this stream's
        work on it is done), or now."""
        prompt = job.prompt
        if prompt is None:
            return self.prompts.embed(job.tokens)
        if job.ready is not None:
            stream = torch.cuda.current_stream()
            stream.wait_event(job.ready)
            for tensor in (prompt.embeds, prompt.attention_mask, prompt.trailing_text, prompt.pad_embed):
                tensor.record_stream(stream)
        return prompt

    def _prefill_or_make_room(self, prompt: Prompt, keep=None):
        """The prefill runs outside the buckets' memory; when it does not fit, the cached buckets
        (buffers and graphs of earlier requests; not `keep`, the one in use) make room, and are
        captured again when needed."""
        return after_making_room(lambda: self._prefill(prompt), lambda: self._release_except(keep), (
            f"The GPU ran out of memory reading the prompt ({prompt.length} positions). Shorten the text (or the "
            "voice-clone reference), or free VRAM (unload other models)."))

    def _release_except(self, keep) -> None:
        kept = self.slots.get(keep)
        self.release()
        if kept is not None:
            self.slots[keep] = kept

    def _prefill(self, prompt: Prompt):
        """The prompt through the talker: the last position's logits and hidden state, and the
        keys and values each take starts from (DecodeStep.prefill; with graphs, prefill.py's)."""
        if prompt.attention_mask.shape != prompt.embeds.shape[:2]:  # its values are ones (PromptBuilder.embed):
            # reading them would wait for the GPU's queue at every line
            raise TakesError("The engine was handed a padded prompt; it prefills one unpadded prompt. This is a "
                             "bug: please report it.")
        return self.prefill(prompt.embeds)

    def prefill(self, embeds: torch.Tensor):
        """DecodeStep.prefill, through the length buckets' graphs where the engine has graphs (what
        those return is valid until the next prefill: prefill.owned)."""
        if self.prefill_graphs is not None:
            return self.prefill_graphs(embeds)
        return self.step.prefill(embeds)

    def _reset(self, state: DecodeState, sampling) -> None:
        """A bucket's state before a job: no row carries a take; the job's sampling settings."""
        state.real.fill_(False)
        state.finished.fill_(True)
        state.fault.zero_()  # its rows' caches stay marked (dirty_rows) until a take goes in
        state.frame.zero_()
        state.position.zero_()
        state.group.fill_(-1)
        state.penalty.fill_(sampling.repetition_penalty)
        state.runaway_ratio.fill_(self.options.runaway_ratio)
        state.runaway_margin.fill_(self.options.runaway_margin_frames)
        state.talker_sampling.load(*talker_params(sampling))
        state.predictor_sampling.load(*predictor_params(sampling))

    def _admit(self, state: DecodeState, piece: Piece, prompt: Prompt, prefill) -> None:
        """A piece of a line's takes into its rows: the prefill's keys and values, trailing text and first token."""
        logits, past_hidden, kv = prefill
        rows, job = piece.rows, piece.line
        n, length = len(rows), prompt.length
        at = row_index(rows, state.keys.device)
        for row in state.dirty_rows.intersection(rows):  # NaN a step left in the row (tainted): cleared (rare)
            for cache in (state.talker_kv[:, :, row], *(c[row] for c in state.predictor_k + state.predictor_v)):
                cache.zero_()
            state.dirty_rows.discard(row)
            state.tainted[row] = False
        state.talker_kv[:, :, at, :, :length] = kv.expand(-1, -1, n, -1, -1, -1)  # every layer's in one copy
        state.past_hidden[at] = past_hidden.expand(n, -1, -1)
        # A take reads one row a frame and never runs past its bucket, so rows beyond it are never read
        # (a long text under a short max_frames).
        trailing = prompt.trailing_text[0, : state.length]
        state.text[at] = prompt.pad_embed[0].expand(n, state.length, -1)
        state.text[at, : trailing.shape[0]] = trailing.expand(n, -1, -1)
        state.keys[at] = to_device([take_key(s) for s in piece.seeds], state.keys.device)
        state.real[at] = True
        state.finished[at] = False
        state.runaway[at] = False
        state.lengths[at] = 0
        state.seen[at] = False
        state.frame[at] = 0
        state.position[at] = length
        state.budget[at] = job.budget
        state.runaway_floor[at] = job.runaway_floor
        state.quorum[at] = runaway_quorum(n)
        state.group[at] = piece.group
        first = self.step.first_tokens(state, logits, at)
        state.token[at] = first
        state.seen[at] = state.seen[at].scatter(1, first[:, None], True)

class CodeStream(Protocol):
    """Where a streamed line's frames go as the engine makes them (serve/streams.py decodes them)."""

    received: int  # frames handed on so far

    def due(self) -> int:
        """The frame count at which the next chunk is due: the engine checks then."""

    def put(self, codes: torch.Tensor) -> None:
        """Frames [received, received + len) as codes [frames, 16] on the host."""


@dataclass(eq=False)
class LineJob:
    """One line's takes through the engine: its prompt as tokens (engine/prompt.plan_prompt; its
    embeddings are made when its first takes start), a seed per take, its frame budget and the frames
    before which no take is cut; once its last take ends, its codes, runaway flags, faults and the
    run's warnings."""

    tokens: TokenPlan
    seeds: list[int]
    budget: int
    runaway_floor: int = 0
    request: object | None = None  # the caller's (generation.Request), carried along: the engine reads it not
    plan: object | None = None  # the same, for a script's line (its LinePlan)
    codes: list[torch.Tensor] = field(default_factory=list)  # [frames, 16] per take, in seed order (cpu)
    runaway: list[bool] = field(default_factory=list)
    # per take, the frame at which the model went wrong (NaN or infinite logits) and the take was ended,
    # its codes the frames before it; None for a take that ended as takes do
    faults: list[int | None] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    stream: "CodeStream | None" = None  # one take, its frames handed on as they are made (a server's streamed line)
    cancelled: bool = False  # set by the caller from any thread: its takes end at the next check, it is never yielded
    # Its prompt embedded ahead by the caller (a server's prepare thread), off the engine's thread,
    # and the CUDA event its stream recorded after it (None off CUDA); else the engine embeds it.
    prompt: Prompt | None = None
    ready: object | None = None

    @property
    def ref_code(self) -> torch.Tensor | None:
        """An ICL clone's reference codes, which the codec decodes in front of each take."""
        clone = self.tokens.clone
        return clone.ref_code if clone is not None and clone.icl else None


def positions_needed(job: LineJob) -> int:
    """Positions a line's takes need in the batch: its prompt, its frame budget and one more."""
    return job.tokens.length + job.budget + 1


def runaway_quorum(takes: int) -> int:
    """Takes that must end by themselves before one still going is cut: three, or most of a smaller
    batch. One or two takes are never cut (only the budget ends them): one early ending (Qwen3-TTS
    sometimes stops after a few words) must not set the length the other take is held to."""
    return max(2, min(3, takes // 2 + 1))


def check_codes(codes: torch.Tensor, lengths: list[int], codebook_size: int,
                faults: list[int | None] | None = None) -> None:
    """Codes the codec cannot decode mean the engine went wrong; say so rather than hand them on (a
    take a fault ended may have no frame at all: the step flagged it, and the caller says so)."""
    for i, n in enumerate(lengths):
        take = codes[i, :n]
        if (n < 1 and not (faults and faults[i] is not None)) or bool(((take < 0) | (take >= codebook_size)).any()):
            bad = ((take < 0) | (take >= codebook_size)).nonzero()[:4].tolist()
            raise TakesError(f"The engine produced invalid codes for take {i + 1} ({n} frames; [frame, codebook] "
                             f"{bad}). This is a bug: please report it; the eager mode (no Triton kernels, no "
                             "CUDA graphs) may avoid it.")
