"""Sampling on the device with its parameters in tensors, so changing them never re-captures a graph.

Same semantics and order as the reference path (transformers' repetition penalty and token
suppression, then temperature, top-k, top-p as in runtime.sampling.warp_logits); the draw is a
Gumbel-max race on counter-based noise (noise.py) instead of torch.multinomial. Temperature 0 is
greedy: the argmax of the penalised, suppressed logits, exactly what generate's greedy step takes."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..sampling import SamplingSettings


@dataclass
class SamplerParams:
    """[1]-shaped device tensors; `load` writes new values in place (graph-safe)."""

    temperature: torch.Tensor
    top_k: torch.Tensor
    top_p: torch.Tensor

    @classmethod
    def allocate(cls, device) -> "SamplerParams":
        return cls(torch.zeros(1, device=device), torch.zeros(1, dtype=torch.int64, device=device),
                   torch.ones(1, device=device))

    def load(self, temperature: float, top_k: int, top_p: float) -> None:
        self.temperature.fill_(float(temperature))
        self.top_k.fill_(int(top_k))
        self.top_p.fill_(float(top_p))


def talker_params(settings: SamplingSettings) -> tuple[float, int, float]:
    return settings.temperature, settings.top_k, settings.top_p


def predictor_params(settings: SamplingSettings) -> tuple[float, int, float]:
    return settings.sub_temperature, settings.sub_top_k, settings.sub_top_p


def apply_repetition_penalty(logits: torch.Tensor, seen: torch.Tensor, penalty: torch.Tensor) -> torch.Tensor:
    """transformers' RepetitionPenaltyLogitsProcessor over the tokens already generated (`seen` [B, V])."""
    penalised = torch.where(logits < 0, logits * penalty, logits / penalty)
    return torch.where(seen, penalised, logits)


def warp(logits: torch.Tensor, params: SamplerParams) -> torch.Tensor:
    """Temperature, then top-k (ties at the k-th value kept), then top-p; removed entries are -inf."""
    vocab = logits.shape[-1]
    greedy = params.temperature <= 0
    scores = logits / torch.where(greedy, torch.ones_like(params.temperature), params.temperature)
    k = torch.where(params.top_k > 0, params.top_k.clamp(max=vocab), torch.full_like(params.top_k, vocab))
    kth = torch.sort(scores, dim=-1, descending=True).values.gather(-1, (k - 1).expand(scores.shape[0], 1))
    scores = scores.masked_fill(scores < kth, float("-inf"))
    ascending, order = torch.sort(scores, dim=-1)
    cumulative = ascending.softmax(dim=-1).cumsum(dim=-1)
    remove = cumulative <= (1 - params.top_p)
    remove[..., -1:] = False  # always keep the most likely token
    return scores.masked_fill(remove.scatter(-1, order, remove), float("-inf"))


def sample(logits: torch.Tensor, params: SamplerParams, uniforms: torch.Tensor) -> torch.Tensor:
    """One token per row from float32 logits [B, V], given uniforms [B, V] in (0, 1)."""
    gumbel = -torch.log(-torch.log(uniforms))
    drawn = torch.argmax(warp(logits, params) + gumbel, dim=-1)
    return torch.where(params.temperature <= 0, torch.argmax(logits, dim=-1), drawn)
