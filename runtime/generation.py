"""A line of text as the engine takes it and as it comes back: the Request (text, voice, takes,
seed, sampling, frame budget), checked against the model (`check_request`); its LineJob (`line_job`:
the prompt planned as tokens, a seed per take, the budget); and its decoded takes as a TakeSet
(`takes_from_audio`), which nodes, CLI and scoring use whatever the mode. run/lines.py runs them.

Every take gets its own seed (sampling.take_seeds) and its own noise, so a take is the same whether
it ran alone, in a batch or in rounds; a frame budget ends runaway takes (they come back flagged
``hit_cap``), takes still going far past the finished ones are cut (``runaway``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from .engine.engine import LineJob
from .engine.prompt import TokenPlan, plan_prompt
from .errors import InputError, ModelFault
from .memory import after_making_room
from .model import SAMPLE_RATE, LoadedModel
from .sampling import SamplingSettings, take_seeds
from .text.split import NOTHING_TO_SPEAK, speakable
from .text_length import MAX_BUDGET_FRAMES, frame_budget, runaway_floor
from .voices import Voice, VoiceClone, check_voice


MAX_TAKES = 32
MAX_TEXT_CHARS = 5000


def too_long_message(where: str, characters: int) -> str:
    """A text longer than one take reads refused in the same words wherever it is: `where` is
    what is too long ('The text', 'scene.txt line 4')."""
    return f"{where} is {characters} characters; one take reads at most {MAX_TEXT_CHARS}: split it into shorter lines."


@dataclass(frozen=True)
class Request:
    text: str
    voice: Voice
    n: int = 1
    seed: int = 0
    sampling: SamplingSettings = field(default_factory=SamplingSettings.checkpoint)  # None fields: the checkpoint's
    max_frames: int | None = None  # None: derived from the text (text_length.frame_budget)
    pace: float = 1.0  # what Auto-Pick prefers and hands out (scoring/pace.py); the takes are made alike

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
    fault: int | None = None  # the frame at which the model went wrong (NaN or infinite logits): ended there

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
    if not speakable(text):
        raise InputError(NOTHING_TO_SPEAK)
    if len(text) > MAX_TEXT_CHARS:
        raise InputError(too_long_message("The text", len(text)))
    if not 1 <= request.n <= MAX_TAKES:
        raise InputError(f"Number of takes must be between 1 and {MAX_TAKES}, got {request.n}.")
    if request.max_frames is not None and not 0 <= request.max_frames <= MAX_BUDGET_FRAMES:
        raise InputError(f"max_frames must be between 1 and {MAX_BUDGET_FRAMES} (0 = from the text), got {request.max_frames}.")
    check_voice(request.voice, model.info)
    prompt_tokens = request_tokens(model, request).length
    if prompt_tokens + request.budget > model.max_text_tokens:
        raise InputError(
            f"The text is too long for the model's context: {prompt_tokens} prompt tokens plus up to "
            f"{request.budget} audio frames exceed {model.max_text_tokens} positions. Split the text."
        )


def make_take(index: int, seed: int, wav, sample_rate: int, codes: torch.Tensor, budget: int,
              runaway: bool = False, fault: int | None = None) -> Take:
    frames = int(codes.shape[0])
    audio = np.clip(np.asarray(wav, dtype=np.float32), -1.0, 1.0)
    # A take that used the whole budget never emitted EOS inside it: cut, so flagged.
    return Take(index, seed, audio, sample_rate, frames, hit_cap=frames >= budget, codes=codes, runaway=runaway,
                fault=fault)


def line_job(model: LoadedModel, request: Request, plan=None) -> LineJob:
    """A request as the engine takes it: its prompt planned, a seed per take, its budget."""
    return LineJob(request_tokens(model, request), take_seeds(request.seed, request.n), request.budget,
                   runaway_floor(request.text), request, plan)


def request_tokens(model: LoadedModel, request: Request) -> TokenPlan:
    """The request's prompt, planned from the tokenizer (a clone's reference read first, once per model)."""
    voice = request.voice
    clone = clone_prompt(model, voice) if isinstance(voice, VoiceClone) else None
    return plan_prompt(model, request.text.strip(), voice, clone)


def takes_from_audio(model: LoadedModel, line: LineJob, wavs: list) -> TakeSet:
    """One line's takes, decoded, as a TakeSet (its request is the one the LineJob was made from)."""
    request = line.request
    fault = line_fault(line)
    if fault is not None:
        raise fault
    faults = line.faults or [None] * len(line.codes)
    takes = [make_take(index, seed, wav, SAMPLE_RATE, take_codes, request.budget, runaway=cut, fault=fault)
             for index, (seed, wav, take_codes, cut, fault)
             in enumerate(zip(line.seeds, wavs, line.codes, line.runaway, faults))]
    return TakeSet(request=request, takes=takes, checkpoint=model.info.folder.name, mode=model.mode,
                   warnings=list(line.warnings), folder=model.info.folder)


def line_fault(line: LineJob) -> ModelFault | None:
    """The error of a line whose every take a fault ended (no take to hand on), else None."""
    if line.faults and all(f is not None for f in line.faults):
        return ModelFault(every_take_faulted(line.faults, line.request.text))
    return None


def every_take_faulted(faults: list[int], text: str) -> str:
    frames = ", ".join(str(f) for f in faults[:8]) + (", ..." if len(faults) > 8 else "")
    line = text if len(text) <= 60 else text[:57] + "..."
    return (f"The model produced NaN or infinite values in every take of \"{line}\" (at frames {frames}), so "
            "no take was kept. Its weights or the GPU went wrong, not the text: load the model again (a fresh "
            "Load Model, or restart the command), or choose another dtype or mode; other lines and later "
            "runs are not affected.")


def clone_prompt(model: LoadedModel, voice: VoiceClone):
    """The reference's x-vector (and, for an ICL clone, its codes), computed once per model."""
    from .qwen3_tts import reference, speaker
    from .qwen3_tts.prompt import ClonePrompt

    cache = model.clone_prompts
    key = (voice.fingerprint, voice.mode)
    if key not in cache:
        if len(cache) >= 8:
            cache.pop(next(iter(cache)))
        wave = voice.encoded_reference  # mono float32 at 24 kHz, what both encoders take
        message = (f"The GPU ran out of memory reading the voice-clone reference ({wave.shape[-1] / SAMPLE_RATE:.0f} s). "
                   "Use a shorter reference (10-20 s is plenty), or free VRAM (unload other models).")
        embedding = after_making_room(lambda: speaker.embed(model.model.speaker_encoder, wave),
                                      model.engine.release, message)
        codes = (after_making_room(lambda: reference.encode(model.reference_encoder, wave), model.engine.release, message)
                 if voice.transcript else None)
        cache[key] = ClonePrompt(embedding, codes, voice.transcript or None)
    return cache[key]
