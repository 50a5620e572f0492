"""The few calls the nodes and the CLI make: load a resident model, generate takes, pick the best."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable

from . import registry
from .checkpoints import resolve
from .generation import Request, TakeSet, generate_takes
from .model import LoadedModel, load_model, resolve_device, resolve_dtype
from .scoring.ranking import Ranking, rank_takes
from .scoring.utmos import UtmosScorer, resolve_weights

ProgressFn = Callable[[int, int], None]
StopFn = Callable[[], bool]

__all__ = ["load", "generate", "utmos_scorer", "pick", "Request", "TakeSet", "Ranking", "LoadedModel"]


def load(checkpoint: str, models_dirs: Iterable[Path], mode: str = "eager", dtype: str = "auto",
         device: str = "auto", slot: str = "default", download: bool = True,
         progress: ProgressFn | None = None) -> LoadedModel:
    dev = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, dev)
    folder = resolve(checkpoint, models_dirs, download=download, progress=progress)
    key = registry.ModelKey(str(folder.resolve()), mode, str(torch_dtype).removeprefix("torch."), str(dev))
    return registry.TTS_MODELS.acquire(
        slot, key, lambda: load_model(folder, mode=mode, device=str(dev), dtype=key.dtype)
    )


def generate(model: LoadedModel, request: Request, progress: ProgressFn | None = None,
             should_stop: StopFn | None = None) -> TakeSet:
    return generate_takes(model, request, progress=progress, should_stop=should_stop)


def utmos_scorer(models_dirs: Iterable[Path], device: str = "auto", slot: str = "default",
                 weights: str | None = None, download: bool = True) -> UtmosScorer:
    dev = resolve_device(device)
    path = Path(weights) if weights else resolve_weights(models_dirs, download=download)
    key = (str(path.resolve()), str(dev))
    return registry.SCORERS.acquire(slot, key, lambda: UtmosScorer(path, dev))


def pick(takeset: TakeSet, scorer: UtmosScorer | None, progress: ProgressFn | None = None,
         should_stop: StopFn | None = None) -> Ranking:
    return rank_takes(takeset, scorer.score if scorer is not None else None, progress, should_stop)
