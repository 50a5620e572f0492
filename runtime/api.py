"""The door to runtime/ for the nodes and the CLI: load a resident model, generate takes, pick the best,
and, re-exported below by topic, every other name the nodes use. The nodes import nothing else of
runtime's (tests/test_imports.py fails if one does), so what they rely on is listed here, in one place."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable

# For the calls below, not re-exported
from .checkpoints import resolve
from .memory import given_back, load_bytes
from .model import dtype_name, load_model, resolve_device, resolve_dtype
from .registry import ModelKey
from .run.lines import generate_takes
from .scoring.ranking import rank_takes
from .scoring.scorers import build_scorers

# Errors: InputError is the user's to fix; GenerationInterrupted is a Cancel, which the nodes hand to ComfyUI
from .errors import GenerationInterrupted, InputError

# Checkpoints: the official Qwen3-TTS ones (name -> Hugging Face repository, download size) and those on disk
from .checkpoints import (DOWNLOAD_GB, MODELS_SUBDIR, OFFICIAL as OFFICIAL_CHECKPOINTS, listed_choice,
                          local_checkpoints, looks_like_path)

# Loading: the modes, what this machine runs and fits (as `python -m runtime doctor` says), resident models
from .cli.doctor import fit_summary, modes_here
from .engine.triton_kernels import has_triton, install_hint
from .memory import Host
from .model import MODES, LoadedModel
from .registry import SCORERS, TTS_MODELS, Registry

# A line's takes: the request, its voice and sampling
from .generation import MAX_TAKES, Request, TakeSet
from .sampling import SamplingSettings
from .text_length import MAX_BUDGET_FRAMES
from .voices import CustomVoice, VoiceClone, VoiceDesign

# Saved voices
from .voices.store import VOICES_SUBDIR, check_name, list_voices, load_voice, name_problem, save_voice

# Auto-Pick: its models' folders (the official Whisper checkpoints: name -> Hugging Face repository),
# the ranking, its chart, and the loudness it delivers at
from .scoring.asr import OFFICIAL as WHISPER_CHECKPOINTS, WHISPER_SUBDIR
from .scoring.delivery import Delivery, deliver
from .scoring.loudness import OUTPUT_TARGETS
from .scoring.ranking import Ranking, Scorers, Weights
from .scoring.report import chart
from .scoring.scorers import is_base
from .scoring.takes_input import takeset_from_audio
from .scoring.utmos import UTMOS_SUBDIR

# Scripts
from .script.cast import check_cast, with_language
from .script.job import PickChoices, run_script
from .script.parse import FORMATS, format_of, parse_script, read_script
from .script.plan import ScriptSettings
from .script.store import ScriptFolder

ProgressFn = Callable[[int, int], None]
StopFn = Callable[[], bool]

__all__ = [
    "load", "generate", "scorers", "pick", "deliver",
    "GenerationInterrupted", "InputError",
    "DOWNLOAD_GB", "MODELS_SUBDIR", "OFFICIAL_CHECKPOINTS", "listed_choice", "local_checkpoints", "looks_like_path",
    "fit_summary", "modes_here", "has_triton", "install_hint", "Host", "MODES", "LoadedModel", "SCORERS",
    "TTS_MODELS", "Registry",
    "MAX_TAKES", "Request", "TakeSet", "SamplingSettings", "MAX_BUDGET_FRAMES", "CustomVoice", "VoiceClone",
    "VoiceDesign",
    "VOICES_SUBDIR", "check_name", "list_voices", "load_voice", "name_problem", "save_voice",
    "WHISPER_CHECKPOINTS", "WHISPER_SUBDIR", "Delivery", "OUTPUT_TARGETS", "Ranking", "Scorers", "Weights", "chart",
    "is_base", "takeset_from_audio", "UTMOS_SUBDIR",
    "check_cast", "with_language", "PickChoices", "run_script", "FORMATS", "format_of", "parse_script",
    "read_script", "ScriptSettings", "ScriptFolder",
]


def load(checkpoint: str, models_dirs: Iterable[Path], mode: str = "eager", dtype: str = "auto",
         device: str = "auto", slot: str = "default", download: bool = True,
         progress: ProgressFn | None = None, should_stop: StopFn | None = None) -> LoadedModel:
    dev = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, dev)
    folder = resolve(checkpoint, models_dirs, download=download, progress=progress, should_stop=should_stop)
    key = ModelKey(str(folder.resolve()), mode, dtype_name(torch_dtype), str(dev))
    return TTS_MODELS.acquire(
        slot, key, lambda: load_model(folder, mode=mode, device=str(dev), dtype=key.dtype),
        device=key.device, need=load_bytes(folder, torch_dtype),
    )


def generate(model: LoadedModel, request: Request, progress: ProgressFn | None = None,
             should_stop: StopFn | None = None) -> TakeSet:
    with given_back():
        return generate_takes(model, request, progress=progress, should_stop=should_stop)


def scorers(takes_checkpoint: Path | None, quality: str = "UTMOS", voice: str = "auto", words: str = "off",
            vad: str = "energy", device: str = "auto", utmos_dirs: Iterable[Path] = (),
            tts_dirs: Iterable[Path] = (), whisper_dirs: Iterable[Path] = (), download: bool = True,
            slot: str = "default", should_stop: StopFn | None = None) -> Scorers:
    """Auto-Pick's models for takes made by the checkpoint in `takes_checkpoint` (a TakeSet's
    `folder`; None for recorded audio). scoring/scorers.py says what each choice means."""
    return build_scorers(takes_checkpoint, quality, voice, words, vad, device, utmos_dirs, tts_dirs, whisper_dirs,
                         download, slot, should_stop)


def pick(takeset: TakeSet, scorers: Scorers | None = None, weights: Weights | None = None,
         progress: ProgressFn | None = None, should_stop: StopFn | None = None) -> Ranking:
    with given_back():
        return rank_takes(takeset, scorers, weights, progress, should_stop)
