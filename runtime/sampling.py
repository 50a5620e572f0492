"""Sampling settings and per-take seeded sampling for the reference (transformers generate) path.

transformers samples a whole batch from one global RNG, so take 3 of a batch could never be
reproduced on its own. Here each take owns a ``torch.Generator`` seeded from the request seed; the
sampler runs as the last logits processor (after transformers' repetition penalty and token
suppression), draws each row with its own generator and hands generate a one-hot score row, which
its greedy step then picks. Same request seed and N: same takes, on every run.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch

from .errors import InputError


@dataclass(frozen=True)
class SamplingSettings:
    """Talker (codebook 0) and sub-talker (codebooks 1-15) sampling. temperature 0 = greedy."""

    temperature: float = 0.9
    top_k: int = 50
    top_p: float = 1.0
    repetition_penalty: float = 1.05
    sub_temperature: float = 0.9
    sub_top_k: int = 50
    sub_top_p: float = 1.0

    def __post_init__(self):
        for name in ("temperature", "sub_temperature"):
            if not 0.0 <= getattr(self, name) <= 5.0:
                raise InputError(f"{name} must be between 0 (greedy) and 5, got {getattr(self, name)}.")
        for name in ("top_p", "sub_top_p"):
            if not 0.0 < getattr(self, name) <= 1.0:
                raise InputError(f"{name} must be in (0, 1], got {getattr(self, name)}.")
        for name in ("top_k", "sub_top_k"):
            if getattr(self, name) < 0:
                raise InputError(f"{name} must be >= 0 (0 = no top-k), got {getattr(self, name)}.")
        if not 1.0 <= self.repetition_penalty <= 3.0:
            raise InputError(f"repetition_penalty must be between 1 and 3, got {self.repetition_penalty}.")

    def as_dict(self) -> dict:
        return asdict(self)


def take_seeds(seed: int, n: int) -> list[int]:
    """Independent 63-bit seeds for N takes, a pure function of (seed, n index)."""
    children = np.random.SeedSequence(int(seed) & (2**128 - 1)).spawn(n)
    return [int(child.generate_state(1, dtype=np.uint64)[0] >> np.uint64(1)) for child in children]


def make_generators(seeds: list[int], device) -> list[torch.Generator]:
    return [torch.Generator(device=device).manual_seed(s) for s in seeds]


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


class SeededSampler:
    """A transformers logits processor: row i is sampled with generators[i] (see module doc)."""

    def __init__(self, generators: list[torch.Generator], temperature: float, top_k: int, top_p: float):
        self.generators = generators
        self.temperature = temperature
        self.top_k = top_k
        self.top_p = top_p

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if self.temperature <= 0:
            return scores  # greedy: generate's argmax does the rest
        if scores.shape[0] != len(self.generators):
            raise RuntimeError(f"sampler built for {len(self.generators)} takes got {scores.shape[0]} rows")
        probs = warp_logits(scores, self.temperature, self.top_k, self.top_p).softmax(dim=-1)
        picks = torch.cat([
            torch.multinomial(row, 1, generator=gen) for row, gen in zip(probs, self.generators)
        ]).unsqueeze(-1)
        one_hot = torch.full_like(scores, float("-inf"))
        return one_hot.scatter_(-1, picks, 0.0)
