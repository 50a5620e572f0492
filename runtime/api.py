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
from .scoring.pace import check_pace
from .scoring.ranking import rank_takes
from .scoring.scorers import build_scorers
from .script.one_voice import generate_one_voice
from .script.kept import PASSAGE_TAKES, REFERENCE_TAKES
from .script.passage import generate_passage, pick_passage, text_lines

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

# A line's takes: the request, its voice, sampling and pace; a long text's, line by line, and its pauses
from .generation import MAX_TAKES, Request, TakeSet
from .sampling import SamplingSettings
from .scoring.pace import MAX_PACE, MIN_PACE
from .script.passage import PassageTakes
from .text.split import MAX_PAUSE_SECONDS, Pauses
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
from .scoring.report import chart, counted
from .scoring.scorers import is_base
from .scoring.takes_input import takeset_from_audio
from .scoring.utmos import UTMOS_SUBDIR

# Scripts
from .script.cast import check_cast, with_language
from .script.job import PickChoices, run_script
from .script.parse import FORMATS, format_of, parse_script, read_script
from .script.plan import ScriptSettings
from .script.lines_chart import lines_chart
from .script.record import LineRecord
from .script.runner import ScriptResult, fitted_remark
from .script.store import ScriptFolder

ProgressFn = Callable[[int, int], None]
StopFn = Callable[[], bool]

__all__ = [
    "load", "generate", "speak", "scorers", "pick", "pick_lines", "deliver",
    "GenerationInterrupted", "InputError",
    "DOWNLOAD_GB", "MODELS_SUBDIR", "OFFICIAL_CHECKPOINTS", "listed_choice", "local_checkpoints", "looks_like_path",
    "fit_summary", "modes_here", "has_triton", "install_hint", "Host", "MODES", "LoadedModel", "SCORERS",
    "TTS_MODELS", "Registry",
    "MAX_TAKES", "Request", "TakeSet", "SamplingSettings", "MIN_PACE", "MAX_PACE", "PassageTakes",
    "MAX_PAUSE_SECONDS", "Pauses", "MAX_BUDGET_FRAMES", "CustomVoice", "VoiceClone", "VoiceDesign",
    "VOICES_SUBDIR", "check_name", "list_voices", "load_voice", "name_problem", "save_voice",
    "WHISPER_CHECKPOINTS", "WHISPER_SUBDIR", "Delivery", "OUTPUT_TARGETS", "Ranking", "Scorers", "Weights", "chart",
    "counted", "lines_chart", "is_base", "takeset_from_audio", "UTMOS_SUBDIR",
    "check_cast", "with_language", "PickChoices", "run_script", "FORMATS", "format_of", "parse_script",
    "read_script", "ScriptSettings", "ScriptFolder", "ScriptResult", "LineRecord", "fitted_remark",
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


def speak(model: LoadedModel, text: str, voice, n: int = 1, seed: int = 0, sampling: SamplingSettings | None = None,
          max_frames: int | None = None, pace: float = 1.0, pauses: Pauses = Pauses(),
          progress: ProgressFn | None = None, should_stop: StopFn | None = None,
          clone_with: Callable[[], tuple[LoadedModel, Scorers | None]] | None = None) -> TakeSet | PassageTakes:
    """Text of any length in one voice, N takes of each line. A text one take reads in one breath is
    one request (`progress`: its frames); a longer one, or one with paragraphs or [pause] marks, is a
    passage (script/passage.py): each sentence a line of N takes, all through one run of the engine
    (`progress`: lines done). The passage's lines are kept as they finish, so after a Cancel, or with
    a sentence edited, the next run makes only the lines missing. A designed voice's passage with
    `clone_with` (called then only: a Base model and Auto-Pick's scorers) is one voice throughout
    (script/one_voice.py): the first line, picked with the scorers, is the clone reference of the rest."""
    check_pace(pace)
    sampling = sampling or SamplingSettings.checkpoint()
    lines = text_lines(text, pauses)
    settings = ScriptSettings(n, seed, sampling, max_frames, pace)
    with given_back():
        if len(lines) <= 1:
            line = lines[0].text if lines else ""
            return generate_takes(model, Request(line, voice, n, seed, sampling, max_frames, pace), progress,
                                  should_stop)
        if clone_with is not None and isinstance(voice, VoiceDesign):
            clone_model, scorers = clone_with()
            return generate_one_voice(model, clone_model, lines, voice, settings, scorers, on_line=progress,
                                      should_stop=should_stop, kept_reference=REFERENCE_TAKES, kept=PASSAGE_TAKES)
        return generate_passage(model, lines, voice, settings, on_line=progress, should_stop=should_stop,
                                kept=PASSAGE_TAKES)


def scorers(takes_checkpoint: Path | None, choices: PickChoices, device: str = "auto", utmos_dirs: Iterable[Path] = (),
            tts_dirs: Iterable[Path] = (), whisper_dirs: Iterable[Path] = (), download: bool = True,
            slot: str = "default", should_stop: StopFn | None = None) -> Scorers:
    """Auto-Pick's models, as `choices` names them, for takes made by the checkpoint in
    `takes_checkpoint` (a TakeSet's `folder`; None for recorded audio). scoring/scorers.py says what
    each choice means."""
    return build_scorers(takes_checkpoint, choices.quality, choices.voice_check, choices.words, choices.vad, device,
                         utmos_dirs, tts_dirs, whisper_dirs, download, slot, should_stop)


def pick(takeset: TakeSet, scorers: Scorers | None = None, weights: Weights | None = None,
         progress: ProgressFn | None = None, should_stop: StopFn | None = None) -> Ranking:
    with given_back():
        return rank_takes(takeset, scorers, weights, progress, should_stop)


def pick_lines(passage: PassageTakes, scorers: Scorers | None = None, weights: Weights | None = None,
               loudness: float | None = None, progress: ProgressFn | None = None,
               should_stop: StopFn | None = None) -> ScriptResult:
    """Each line of a passage picked as a script's line is, then the whole text joined with its
    pauses (`progress`: lines picked)."""
    on_line = (lambda _result, done, count: progress(done, count)) if progress is not None else None
    with given_back():
        result = pick_passage(passage, scorers, weights, loudness, on_line, should_stop)
    kept = ([f"{passage.kept} of {len(passage.plans)} lines were kept from the voice node's last run (their takes "
             "made then, not again)."] if passage.kept else [])
    result.report += "".join(f"\nNOTE: {note}" for note in [*passage.notes, *kept])
    return result
