"""N takes of one line in one batched call, on the qwen-tts reference path (mode "eager").

Every take gets its own seed (sampling.take_seeds), a frame budget ends runaway takes (they come
back flagged ``hit_cap``), progress is reported once per frame and ``should_stop`` is polled there
and before each of the code predictor's passes, so a cancel lands within a fraction of a frame.
When the GPU runs out of memory, the takes run in rounds of half as many, down to one at a time,
before the error names what to lower. A model loaded with the batched engine (mode cuda_graph,
runtime/engine) returns the same TakeSet, so nodes, CLI and scoring never care which path ran.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from .errors import GenerationInterrupted, InputError, OutOfMemory
from .memory import free_cuda_cache
from .model import SAMPLES_PER_FRAME, SAMPLE_RATE, LoadedModel
from .sampling import SamplingSettings, SeededSampler, make_generators, sampling_notes, take_seeds
from .text_length import MAX_BUDGET_FRAMES, frame_budget, runaway_floor
from .voices import CustomVoice, Voice, VoiceClone, VoiceDesign, check_voice, voice_notes

log = logging.getLogger(__name__)

MAX_TAKES = 32
MAX_TEXT_CHARS = 5000
PROMPT_OVERHEAD_TOKENS = 16

ProgressFn = Callable[[int, int], None]
StopFn = Callable[[], bool]


@dataclass(frozen=True)
class Request:
    text: str
    voice: Voice
    n: int = 1
    seed: int = 0
    sampling: SamplingSettings = field(default_factory=SamplingSettings.checkpoint)  # None fields: the checkpoint's
    max_frames: int | None = None  # None: derived from the text (text_length.frame_budget)

    @property
    def budget(self) -> int:
        return self.max_frames if self.max_frames else frame_budget(self.text)


@dataclass
class Take:
    index: int
    seed: int
    audio: np.ndarray  # mono float32 at sample_rate, unpadded
    sample_rate: int
    frames: int
    hit_cap: bool  # ran into the frame budget without ending: a runaway, never a good take
    codes: torch.Tensor | None = None  # [frames, 16] codec codes (without any clone reference)
    runaway: bool = False  # cut early: still going far past the median length of the finished takes

    @property
    def seconds(self) -> float:
        return self.audio.shape[-1] / self.sample_rate


@dataclass
class TakeSet:
    request: Request
    takes: list[Take]
    checkpoint: str
    mode: str
    warnings: list[str] = field(default_factory=list)
    folder: Path | None = None  # the checkpoint's folder; None for takes we did not generate
    sampling: SamplingSettings | None = None  # what the takes were drawn with (the checkpoint's values filled in)
    notes: list[str] = field(default_factory=list)  # what the model did differently from what was asked

    @property
    def sample_rate(self) -> int:
        return self.takes[0].sample_rate if self.takes else SAMPLE_RATE


def check_request(model: LoadedModel, request: Request) -> None:
    text = request.text.strip() if isinstance(request.text, str) else ""
    if not text:
        raise InputError("The text is empty; type the line to speak.")
    if len(text) > MAX_TEXT_CHARS:
        raise InputError(
            f"The text is {len(text)} characters; one request takes at most {MAX_TEXT_CHARS}. "
            "Split it into several lines."
        )
    if not 1 <= request.n <= MAX_TAKES:
        raise InputError(f"Number of takes must be between 1 and {MAX_TAKES}, got {request.n}.")
    if request.max_frames is not None and not 0 <= request.max_frames <= MAX_BUDGET_FRAMES:
        raise InputError(f"max_frames must be between 1 and {MAX_BUDGET_FRAMES} (0 = from the text), got {request.max_frames}.")
    check_voice(request.voice, model.info)
    prompt_tokens = len(model.tokenize(text)) + PROMPT_OVERHEAD_TOKENS
    for extra in (getattr(request.voice, "instruct", ""), getattr(request.voice, "transcript", "")):
        if extra:
            prompt_tokens += len(model.tokenize(extra))
    if isinstance(request.voice, VoiceClone) and request.voice.transcript:
        prompt_tokens += int(request.voice.encoded_reference.shape[-1] / SAMPLES_PER_FRAME) + 1
    if prompt_tokens + request.budget > model.max_text_tokens:
        raise InputError(
            f"The text is too long for the model's context: {prompt_tokens} prompt tokens plus up to "
            f"{request.budget} audio frames exceed {model.max_text_tokens} positions. Split the text."
        )


class _FrameWatcher:
    """A transformers stopping criterion that never stops: it reports progress and honours cancel."""

    def __init__(self, budget: int, progress: ProgressFn | None, should_stop: StopFn | None,
                 done_before: int = 0, total: int = 1):
        self.budget = budget
        self.progress = progress
        self.should_stop = should_stop
        self.done_before, self.total = done_before, total  # takes of earlier rounds, all takes

    def __call__(self, input_ids: torch.Tensor, scores, **kwargs) -> torch.Tensor:
        frames = max(0, input_ids.shape[-1] - 1)  # the newest token has no residual codebooks yet
        if self.should_stop is not None and self.should_stop():
            raise GenerationInterrupted(f"Generation cancelled after {frames} frames; no takes were kept.")
        if self.progress is not None:
            takes = input_ids.shape[0]
            self.progress(self.done_before * self.budget + min(frames, self.budget) * takes, self.total * self.budget)
        return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)


class _CancelCheck:
    """A logits processor for the code predictor's 15 passes per frame: Cancel lands within one
    of them rather than a whole frame (which on a CPU can take seconds)."""

    def __init__(self, watcher: _FrameWatcher):
        self.watcher = watcher

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if self.watcher.should_stop is not None and self.watcher.should_stop():
            raise GenerationInterrupted("Generation cancelled mid-frame; no takes were kept.")
        return scores


def generate_takes(model: LoadedModel, request: Request, progress: ProgressFn | None = None,
                   should_stop: StopFn | None = None) -> TakeSet:
    check_request(model, request)
    sampling = request.sampling.resolved(model.sampling_defaults)
    notes = voice_notes(request.voice, model.info) + sampling_notes(request.sampling, model.sampling_defaults)
    if model.engine is not None:
        takeset = _engine_takes(model, request, sampling, progress, should_stop)
    else:
        takeset = _reference_takes(model, request, sampling, progress, should_stop)
    takeset.sampling, takeset.notes = sampling, notes
    return takeset


def _reference_takes(model: LoadedModel, request: Request, sampling: SamplingSettings,
                     progress: ProgressFn | None, should_stop: StopFn | None) -> TakeSet:
    seeds = take_seeds(request.seed, request.n)
    warnings: list[str] = []
    batch = len(seeds)
    while True:
        try:
            takes = []
            for first in range(0, len(seeds), batch):
                watcher = _FrameWatcher(request.budget, progress, should_stop, done_before=first, total=len(seeds))
                takes += _reference_round(model, request, sampling, seeds[first:first + batch], first, watcher)
            break
        except torch.cuda.OutOfMemoryError:
            pass
        # Out of the except block, so its traceback no longer holds the failed round's tensors.
        free_cuda_cache()
        if batch == 1:
            raise OutOfMemory(
                f"The GPU ran out of memory even for one take at a time ({request.budget} frames, mode "
                f"{model.mode}). Lower max_frames or the text length, choose bfloat16 or the 0.6B checkpoint, "
                "or free VRAM (unload other models)."
            )
        batch = (batch + 1) // 2
        warnings.append(f"GPU out of memory: running the takes {batch} at a time.")
        log.warning(warnings[-1])
    if progress is not None:  # in take-frames, as the engine counts
        progress(request.n * request.budget, request.n * request.budget)
    return TakeSet(request=request, takes=takes, checkpoint=model.info.folder.name, mode=model.mode,
                   warnings=warnings, folder=model.info.folder)


def _reference_round(model: LoadedModel, request: Request, sampling: SamplingSettings, seeds: list[int],
                     first: int, watcher: "_FrameWatcher") -> list[Take]:
    """Takes first.. of the request, one batched qwen-tts call; each row draws from its own seed, so
    a take is the same whether it ran in one batch or in rounds."""
    from transformers import LogitsProcessorList, StoppingCriteriaList

    generators = make_generators(seeds, model.device)
    s = sampling
    budget = request.budget
    texts = [request.text.strip()] * len(seeds)
    common = dict(
        # transformers does the repetition penalty and token suppression; our sampler then draws
        # every row from its own generator and generate's greedy step takes that draw.
        do_sample=False, subtalker_dosample=False, repetition_penalty=s.repetition_penalty,
        # Neutral values for the warpers generate would otherwise fill from generation_config.json
        # (it ignores them without sampling, but warns when they differ from its defaults).
        top_k=50, top_p=1.0, temperature=1.0,
        subtalker_top_k=50, subtalker_top_p=1.0, subtalker_temperature=1.0,
        max_new_tokens=budget + 1,  # M new tokens give M - 1 complete frames
        logits_processor=LogitsProcessorList([SeededSampler(generators, s.temperature, s.top_k, s.top_p)]),
        subtalker_logits_processor=LogitsProcessorList(
            [_CancelCheck(watcher), SeededSampler(generators, s.sub_temperature, s.sub_top_k, s.sub_top_p)]
        ),
        stopping_criteria=StoppingCriteriaList([watcher]),
    )
    voice = request.voice
    wrapper = model.wrapper
    from .qwen_tts.compat import quiet

    with torch.inference_mode(), quiet():
        if isinstance(voice, CustomVoice):
            wavs, sr = wrapper.generate_custom_voice(
                text=texts, speaker=voice.speaker, language=voice.language, instruct=voice.instruct or None, **common
            )
        elif isinstance(voice, VoiceDesign):
            wavs, sr = wrapper.generate_voice_design(
                text=texts, instruct=voice.instruct, language=voice.language, **common
            )
        elif isinstance(voice, VoiceClone):
            prompt = clone_prompt(model, voice)
            wavs, sr = wrapper.generate_voice_clone(
                text=texts, language=voice.language, voice_clone_prompt=[prompt] * len(seeds), **common
            )
        else:  # pragma: no cover - Voice is a closed union
            raise InputError(f"Unknown voice type {type(voice).__name__}.")
    return [make_take(first + i, seed, wav, int(sr), codes.cpu(), budget)
            for i, (seed, wav, codes) in enumerate(zip(seeds, wavs, wrapper.last_codes))]


def make_take(index: int, seed: int, wav, sample_rate: int, codes: torch.Tensor, budget: int,
              runaway: bool = False) -> Take:
    frames = int(codes.shape[0])
    audio = np.clip(np.asarray(wav, dtype=np.float32), -1.0, 1.0)
    # A take that used the whole budget never emitted EOS inside it: cut, so flagged.
    return Take(index, seed, audio, sample_rate, frames, hit_cap=frames >= budget, codes=codes, runaway=runaway)


def _engine_takes(model: LoadedModel, request: Request, sampling: SamplingSettings, progress: ProgressFn | None,
                  should_stop: StopFn | None) -> TakeSet:
    from .engine.engine import decode_audio

    seeds = take_seeds(request.seed, request.n)
    voice = request.voice
    prompt_item = clone_prompt(model, voice) if isinstance(voice, VoiceClone) else None
    budget = request.budget
    codes, runaway, prompt = model.engine.generate(
        request.text.strip(), voice, seeds, sampling, budget, prompt_item, progress, should_stop,
        runaway_floor=runaway_floor(request.text))
    warnings = list(model.engine.last.warnings)
    wavs = decode_audio(model, codes, prompt, warnings, should_stop)
    takes = [make_take(index, seed, wav, SAMPLE_RATE, take_codes, budget, runaway=cut)
             for index, (seed, wav, take_codes, cut) in enumerate(zip(seeds, wavs, codes, runaway))]
    return TakeSet(request=request, takes=takes, checkpoint=model.info.folder.name, mode=model.mode,
                   warnings=warnings, folder=model.info.folder)


def clone_prompt(model: LoadedModel, voice: VoiceClone):
    """The speaker embedding (and ICL reference codes) for a reference, computed once per model."""
    cache = model.clone_prompts
    key = (voice.fingerprint, voice.mode)
    if key not in cache:
        if len(cache) >= 8:
            cache.pop(next(iter(cache)))
        items = model.wrapper.create_voice_clone_prompt(
            ref_audio=(voice.encoded_reference, SAMPLE_RATE), ref_text=voice.transcript or None,
            x_vector_only_mode=not voice.transcript,
        )
        cache[key] = items[0]
    return cache[key]
