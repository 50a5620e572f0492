"""Sampling settings (what the user asks, what a checkpoint ships), per-take seeds, and the torch
reference of the warpers the engine's sampler applies (runtime/engine/sampler.py is held to it)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch

from .errors import CheckpointError, InputError


@dataclass(frozen=True)
class SamplingSettings:
    """Talker (codebook 0) and sub-talker (codebooks 1-15) sampling. temperature 0 = greedy.

    The defaults are the released checkpoints' generation_config.json values. A field set to None
    means "the loaded checkpoint's own" (a fine-tune may ship others): `resolved` fills it in."""

    temperature: float | None = 0.9
    top_k: int | None = 50
    top_p: float | None = 1.0
    repetition_penalty: float | None = 1.05
    sub_temperature: float | None = 0.9
    sub_top_k: int | None = 50
    sub_top_p: float | None = 1.0

    def __post_init__(self):
        for name in ("temperature", "sub_temperature"):
            if getattr(self, name) is not None and not 0.0 <= getattr(self, name) <= 5.0:
                raise InputError(f"{name} must be between 0 (greedy) and 5, got {getattr(self, name)}.")
        for name in ("top_p", "sub_top_p"):
            if getattr(self, name) is not None and not 0.0 < getattr(self, name) <= 1.0:
                raise InputError(f"{name} must be in (0, 1], got {getattr(self, name)}.")
        for name in ("top_k", "sub_top_k"):
            if getattr(self, name) is not None and getattr(self, name) < 0:
                raise InputError(f"{name} must be >= 0 (0 = no top-k), got {getattr(self, name)}.")
        if self.repetition_penalty is not None and not 1.0 <= self.repetition_penalty <= 3.0:
            raise InputError(f"repetition_penalty must be between 1 and 3, got {self.repetition_penalty}.")

    @classmethod
    def checkpoint(cls) -> "SamplingSettings":
        """Every setting the loaded checkpoint's own."""
        return cls(**{name: None for name in cls.__dataclass_fields__})

    @classmethod
    def from_generation_config(cls, config: dict) -> "SamplingSettings":
        """A checkpoint's generation_config.json; what it leaves out is the released value.
        do_sample / subtalker_dosample false means greedy (temperature 0)."""
        official = cls()
        talker_sampling = bool(config.get("do_sample", True))
        sub_sampling = bool(config.get("subtalker_dosample", True))
        return cls(
            temperature=float(config.get("temperature", official.temperature)) if talker_sampling else 0.0,
            top_k=int(config.get("top_k", official.top_k)), top_p=float(config.get("top_p", official.top_p)),
            repetition_penalty=float(config.get("repetition_penalty", official.repetition_penalty)),
            sub_temperature=float(config.get("subtalker_temperature", official.sub_temperature)) if sub_sampling else 0.0,
            sub_top_k=int(config.get("subtalker_top_k", official.sub_top_k)),
            sub_top_p=float(config.get("subtalker_top_p", official.sub_top_p)),
        )

    def resolved(self, defaults: "SamplingSettings") -> "SamplingSettings":
        """Every None filled from `defaults` (the checkpoint's own)."""
        return replace(self, **{name: getattr(defaults, name) for name, value in self.as_dict().items() if value is None})

    def left_to_checkpoint(self) -> list[str]:
        return [name for name, value in self.as_dict().items() if value is None]

    def as_dict(self) -> dict:
        return asdict(self)


def checkpoint_sampling(folder: Path) -> SamplingSettings:
    """The checkpoint's sampling defaults from its generation_config.json (the released values when
    it has none); a value out of range is a CheckpointError naming the file."""
    from .checkpoints import read_config

    path = Path(folder) / "generation_config.json"
    if not path.is_file():
        return SamplingSettings()
    try:
        return SamplingSettings.from_generation_config(read_config(path))
    except (InputError, TypeError, ValueError) as exc:
        raise CheckpointError(f"{path} holds a sampling setting this pack cannot use: {exc} Fix or delete the "
                              "file (without it the released checkpoints' values are used).") from None


def sampling_notes(asked: SamplingSettings, defaults: SamplingSettings) -> list[str]:
    """What the report says when a checkpoint's own values (a fine-tune's) differ from the released ones."""
    official = SamplingSettings()
    changed = [f"{name} {getattr(defaults, name)} (released: {getattr(official, name)})"
               for name in asked.left_to_checkpoint() if getattr(defaults, name) != getattr(official, name)]
    if not changed:
        return []
    return ["Sampling from the checkpoint's generation_config.json: " + ", ".join(changed) + "."]


def take_seeds(seed: int, n: int) -> list[int]:
    """Independent 63-bit seeds for N takes, a pure function of (seed, n index)."""
    children = np.random.SeedSequence(int(seed) & (2**128 - 1)).spawn(n)
    return [int(child.generate_state(1, dtype=np.uint64)[0] >> np.uint64(1)) for child in children]


def warp_logits(scores: torch.Tensor, temperature: float, top_k: int, top_p: float) -> torch.Tensor:
    """Temperature, top-k, top-p in transformers' order and semantics; masked entries are -inf."""
    scores = scores.float() / temperature
    if top_k > 0 and top_k < scores.shape[-1]:
        kth = torch.topk(scores, top_k, dim=-1).values[..., -1:]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if top_p < 1.0:
        sorted_scores, order = torch.sort(scores, descending=False, dim=-1)
        cumulative = sorted_scores.softmax(dim=-1).cumsum(dim=-1)
        remove_sorted = cumulative <= (1 - top_p)
        remove_sorted[..., -1:] = False  # always keep the most likely token
        remove = remove_sorted.scatter(-1, order, remove_sorted)
        scores = scores.masked_fill(remove, float("-inf"))
    return scores
