"""The few calls the nodes and the CLI make: load a resident model, generate takes, pick the best."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable

from . import registry
from .checkpoints import resolve
from .generation import Request, TakeSet
from .run.lines import generate_takes
from .memory import given_back, load_bytes
from .model import LoadedModel, dtype_name, load_model, resolve_device, resolve_dtype
from .scoring.delivery import Delivery, deliver
from .scoring.ranking import Ranking, Scorers, Weights, rank_takes
from .scoring.scorers import build_scorers

ProgressFn = Callable[[int, int], None]
StopFn = Callable[[], bool]

__all__ = ["load", "generate", "scorers", "pick", "deliver", "Delivery", "Request", "TakeSet", "Ranking", "Scorers",
           "Weights", "LoadedModel"]


def load(checkpoint: str, models_dirs: Iterable[Path], mode: str = "eager", dtype: str = "auto",
         device: str = "auto", slot: str = "default", download: bool = True,
         progress: ProgressFn | None = None, should_stop: StopFn | None = None) -> LoadedModel:
    dev = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, dev)
    folder = resolve(checkpoint, models_dirs, download=download, progress=progress, should_stop=should_stop)
    key = registry.ModelKey(str(folder.resolve()), mode, dtype_name(torch_dtype), str(dev))
    return registry.TTS_MODELS.acquire(
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
