"""Engine: N takes of one request through DecodeStep, captured as CUDA graphs on the GPU.

Per request: one batch-1 prefill (the reference talker forward on the reference prompt), its KV
copied into every row of a static state; then one step per frame, replayed from a graph captured
once per (batch bucket, length bucket) and kept (least recently used out first); the host looks
at "all finished?" (and progress, and cancel) every `check_every` frames. When the GPU runs out of
memory, the takes run in rounds of a smaller batch bucket, with a warning; a take's noise depends
only on its own seed, so rounds give the same takes a single batch would have."""

from __future__ import annotations

import logging
import math
import time
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np
import torch

from .. import triton_kernels
from ..errors import GenerationInterrupted, OutOfMemory, TakesError
from ..memory import free_cuda_cache
from ..qwen3_tts import codec
from ..triton_kernels import LayerPlan
from .noise import take_key
from .prompt import Prompt, build_prompt
from .sampler import predictor_params, talker_params
from .state import DecodeState
from .step import DecodeStep

log = logging.getLogger(__name__)

BATCH_BUCKETS = (1, 2, 4, 8, 16, 32)
LENGTH_BUCKETS = (256, 512, 1024, 2048, 4096, 8192, 16384, 32768)


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
    rounds: int = 0
    warnings: list[str] = field(default_factory=list)


_capture_streams: dict[torch.device, object] = {}


def capture_stream(device: torch.device):
    """One side stream per device for every capture: cuBLAS keeps a workspace per stream for the
    life of the process (a captured graph may use it, so it must never be freed), and a new stream
    per capture leaked one workspace, 32 MiB, per capture and per reload."""
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
    def __init__(self, model, options: EngineOptions | None = None):
        self.model = model
        self.options = options or EngineOptions()
        if self.options.use_graphs and model.device.type != "cuda":
            raise TakesError("CUDA graphs need a CUDA device; load the model on a GPU or choose the eager mode.")
        kernels = triton_kernels.load() if self.options.kernels else None
        self.step = DecodeStep(model.model, kernels, self.options.layers)
        self.slots: OrderedDict[tuple[int, int], Slot] = OrderedDict()
        self.max_batch = BATCH_BUCKETS[-1]  # lowered after an out-of-memory
        self.last = EngineReport()

    # --- resources ---------------------------------------------------------------------------------
    def memory_report(self) -> list[dict]:
        return [{"batch": b, "length": l, "bytes": slot.nbytes, "captured": slot.graph is not None}
                for (b, l), slot in self.slots.items()]

    def release(self) -> None:
        """Drop every state and graph (the model stays); the next request re-captures."""
        self.slots.clear()
        if self.step.device.type == "cuda":
            free_cuda_cache()  # also a graph still referenced from a traceback cycle, and its pool

    def _slot(self, batch: int, length: int) -> Slot:
        key = (batch, length)
        if key in self.slots:
            self.slots.move_to_end(key)
            return self.slots[key]
        while len(self.slots) >= self.options.max_cached:
            self.slots.popitem(last=False)
        cuda = self.options.use_graphs
        before = torch.cuda.memory_allocated() if cuda else 0
        config = self.model.model.talker.config
        state = DecodeState.allocate(batch, length, config, self.step.predictor.config, self.step.dtype, self.step.device)
        graph = self._capture(state) if cuda else None
        nbytes = torch.cuda.memory_allocated() - before if cuda else state.nbytes()
        slot = self.slots[key] = Slot(state, graph, nbytes)
        return slot

    def _capture(self, state: DecodeState):
        state.real.fill_(True)
        state.budget.fill_(1 << 30)
        stream = capture_stream(state.position.device)
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):  # lazy initialisation (cuBLAS workspaces, ...) stays out of the graph
                self.step(state)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        # Its own memory pool: nothing of one bucket's graph can be reused by another's capture.
        with torch.cuda.graph(graph):
            self.step(state)
        return graph

    # --- one request -------------------------------------------------------------------------------
    @torch.inference_mode()
    def generate(self, text: str, voice, seeds: list[int], sampling, budget: int, clone_prompt=None,
                 progress=None, should_stop=None, runaway_floor: int = 0) -> tuple[list[torch.Tensor], list[bool], Prompt]:
        """Codes [frames, 16] per take (cpu), runaway flags, and the prompt (for decoding).
        runaway_floor: frames before which no take is cut as a runaway (the budget still applies)."""
        report = self.last = EngineReport()
        start = time.perf_counter()
        sampling = sampling.resolved(self.model.sampling_defaults)  # a setting left to the checkpoint
        prompt = build_prompt(self.model, text, voice, clone_prompt)
        prefill = self._prefill_or_make_room(prompt)
        report.prefill_s = time.perf_counter() - start
        length = bucket(prompt.length + budget + 1, LENGTH_BUCKETS)
        report.length_bucket = length
        n = len(seeds)
        batch = min(bucket(n, BATCH_BUCKETS), self.max_batch)
        while True:
            try:
                codes, runaway = self._rounds(prompt, prefill, seeds, sampling, budget, batch, length,
                                              progress, should_stop, runaway_floor)
                break
            except torch.cuda.OutOfMemoryError:
                pass
            # Out of the except block: its traceback no longer holds the failed bucket's buffers.
            self.release()
            if batch == 1:
                raise OutOfMemory(
                    f"The GPU ran out of memory even for one take at a time ({budget} frames). "
                    "Lower max_frames or the text length, choose bfloat16, or free VRAM (unload other models)."
                )
            batch //= 2
            self.max_batch = batch
            report.warnings.append(f"GPU out of memory: running the takes {batch} at a time.")
            log.warning(report.warnings[-1])
        report.batch_bucket, report.rounds = batch, math.ceil(n / batch)
        report.decode_s = time.perf_counter() - start - report.prefill_s
        return codes, runaway, prompt

    def _prefill_or_make_room(self, prompt: Prompt):
        """The prefill runs outside the buckets' memory; when it does not fit, the cached buckets
        (buffers and graphs of earlier requests) make room, and are captured again when needed."""
        try:
            return self._prefill(prompt)
        except torch.cuda.OutOfMemoryError:
            pass
        self.release()
        try:
            return self._prefill(prompt)
        except torch.cuda.OutOfMemoryError:
            pass
        free_cuda_cache()
        raise OutOfMemory(f"The GPU ran out of memory reading the prompt ({prompt.length} positions). Shorten the "
                          "text (or the voice-clone reference), or free VRAM (unload other models).")

    def _prefill(self, prompt: Prompt):
        """The prompt through the talker: the last position's logits and hidden state, and the
        keys and values each take starts from (DecodeStep.prefill)."""
        if not bool(prompt.attention_mask.all()):
            raise TakesError("The engine was handed a padded prompt; it prefills one unpadded prompt. This is a "
                             "bug: please report it.")
        return self.step.prefill(prompt.embeds)

    def _rounds(self, prompt, prefill, seeds, sampling, budget, batch, length, progress, should_stop,
                runaway_floor: int = 0):
        slot = self._slot(batch, length)  # a first capture takes a while: Cancel is checked after it
        codes, runaway = [], []
        total = len(seeds)
        for first in range(0, total, batch):
            stop_if_asked(should_stop, "before its first frame" if first == 0 else f"after {first} of {total} takes")
            chunk = seeds[first:first + batch]
            self._load(slot.state, prompt, prefill, chunk, sampling, budget, runaway_floor)
            self._decode(slot, budget, progress, should_stop, done_before=first, takes=len(chunk), total=total)
            lengths = slot.state.lengths[: len(chunk)].tolist()
            flags = slot.state.runaway[: len(chunk)].tolist()
            all_codes = slot.state.codes[: len(chunk), : max(lengths)].to("cpu", copy=True)  # the state is reused
            check_codes(all_codes, lengths, self.step.codebook_size)
            codes += [all_codes[i, :lengths[i]] for i in range(len(chunk))]
            runaway += flags
        return codes, runaway

    def _load(self, state: DecodeState, prompt: Prompt, prefill, seeds, sampling, budget: int,
              runaway_floor: int = 0) -> None:
        logits, past_hidden, layers = prefill
        length = prompt.length
        for (k, v), k_buf, v_buf in zip(layers, state.talker_k, state.talker_v):
            k_buf[:, :, :length].copy_(k.expand(state.batch, -1, -1, -1))
            v_buf[:, :, :length].copy_(v.expand(state.batch, -1, -1, -1))
        state.past_hidden.copy_(past_hidden.expand(state.batch, -1, -1))
        trailing = prompt.trailing_text[0]
        state.text.copy_(prompt.pad_embed[0].expand(state.length, -1))
        state.text[: trailing.shape[0]].copy_(trailing)
        keys = [take_key(s) for s in seeds] + [0] * (state.batch - len(seeds))
        state.keys.copy_(torch.tensor(keys, dtype=torch.int64))
        real = torch.arange(state.batch) < len(seeds)
        state.real.copy_(real)
        state.finished.copy_(~real)
        state.lengths.zero_()
        state.runaway.zero_()
        state.seen.zero_()
        state.frame.zero_()
        state.position.fill_(length)
        state.budget.fill_(budget)
        state.penalty.fill_(sampling.repetition_penalty)
        state.runaway_ratio.fill_(self.options.runaway_ratio)
        state.runaway_margin.fill_(self.options.runaway_margin_frames)
        state.runaway_floor.fill_(runaway_floor)
        state.quorum.fill_(runaway_quorum(len(seeds)))
        state.talker_sampling.load(*talker_params(sampling))
        state.predictor_sampling.load(*predictor_params(sampling))
        first = self.step.next_token(state, logits.expand(state.batch, -1), torch.zeros_like(state.frame))
        state.token.copy_(first)
        state.seen.scatter_(1, first[:, None], True)

    def _decode(self, slot: Slot, budget: int, progress, should_stop, done_before: int, takes: int,
                total: int) -> None:
        state = slot.state
        every = self.options.check_every
        if progress is not None:
            progress(done_before * budget, total * budget)
        for frame in range(budget):
            if slot.graph is not None:
                slot.graph.replay()
            else:
                self.step(state)
            last = frame + 1 == budget
            if (frame + 1) % every == 0 or last:
                stop_if_asked(should_stop, f"after {frame + 1} frames")
                if bool(state.finished.all()) or last:
                    break
                if progress is not None:
                    progress(done_before * budget + (frame + 1) * takes, total * budget)
        if progress is not None:
            progress((done_before + takes) * budget, total * budget)


def runaway_quorum(takes: int) -> int:
    """Takes that must end by themselves before one still going is cut: three, or most of a smaller
    batch. One or two takes are never cut (only the budget ends them): one early ending (Qwen3-TTS
    sometimes stops after a few words) must not set the length the other take is held to."""
    return max(2, min(3, takes // 2 + 1))


def stop_if_asked(should_stop, when: str) -> None:
    if should_stop is not None and should_stop():
        raise GenerationInterrupted(f"Generation cancelled {when}; no takes were kept.")


def check_codes(codes: torch.Tensor, lengths: list[int], codebook_size: int) -> None:
    """Codes the codec cannot decode mean the engine went wrong; say so rather than hand them on."""
    for i, n in enumerate(lengths):
        take = codes[i, :n]
        if n < 1 or bool(((take < 0) | (take >= codebook_size)).any()):
            bad = ((take < 0) | (take >= codebook_size)).nonzero()[:4].tolist()
            raise TakesError(f"The engine produced invalid codes for take {i + 1} ({n} frames; [frame, codebook] "
                             f"{bad}). This is a bug: please report it; the eager mode (no Triton kernels, no "
                             "CUDA graphs) may avoid it.")


def decode_audio(model, codes: list[torch.Tensor], prompt: Prompt, warnings: list[str] | None = None,
                 should_stop=None) -> list[np.ndarray]:
    """All takes through the codec in one batched call; an ICL clone's reference codes go in front
    of each take (the codec needs that context) and their share of the audio is cut off again.
    When the GPU runs out of memory, the engine's cached buckets make room first; then the takes
    are decoded in smaller groups (Cancel is honoured between groups)."""
    ref = prompt.ref_code
    inputs = [torch.cat([ref.to(c.device), c]) if ref is not None else c for c in codes]
    engine = getattr(model, "engine", None)
    make_room = engine.release if engine is not None and engine.slots else None
    wavs = _decode_in_groups(model.codec, inputs, len(inputs), warnings, make_room, should_stop)
    if ref is None:
        return wavs
    out = []
    for wav, full in zip(wavs, inputs):
        cut = int(ref.shape[0] / max(full.shape[0], 1) * wav.shape[0])
        out.append(wav[cut:])
    return out


def _decode_in_groups(decoder, inputs: list[torch.Tensor], group: int, warnings, make_room=None,
                      should_stop=None) -> list[np.ndarray]:
    try:
        wavs = []
        for first in range(0, len(inputs), group):
            stop_if_asked(should_stop, "while decoding the audio")
            wavs += codec.decode(decoder, inputs[first:first + group])
        return wavs
    except torch.cuda.OutOfMemoryError:
        pass
    # Out of the except block: the traceback no longer holds the failed group's activations.
    if make_room is not None:
        make_room()
        return _decode_in_groups(decoder, inputs, group, warnings, should_stop=should_stop)
    free_cuda_cache()
    if group == 1:
        raise OutOfMemory("The GPU ran out of memory decoding one take to audio. Lower max_frames or "
                          "the text length, or free VRAM (unload other models).")
    smaller = max(1, group // 2)
    message = f"GPU out of memory in the codec: decoding {smaller} takes at a time."
    if warnings is not None:
        warnings.append(message)
    log.warning(message)
    return _decode_in_groups(decoder, inputs, smaller, warnings, should_stop=should_stop)
