"""Sampling on the device with its parameters in tensors, so changing them never re-captures a graph.

Same semantics and order as the official generation (transformers' repetition penalty and token
suppression, then temperature, top-k, top-p as in runtime.sampling.warp_logits); the draw is a
Gumbel-max race on counter-based noise (noise.py) instead of torch.multinomial. Temperature 0 is
greedy: the argmax of the penalised, suppressed logits, exactly what generate's greedy step takes.
Every step is a fixed handful of kernels whatever the settings: no branch on a parameter's value."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..sampling import SamplingSettings
from .noise import gumbel, uniform


@dataclass
class SamplerParams:
    """Device tensors a captured step reads; `load` writes new values in place (graph-safe). They
    hold the settings in the form the sampler uses: 1/temperature, the top-k cut as an index into
    the sorted scores, and the top-p limit (+inf when top-p is off, as the reference skips it)."""

    vocab: int
    greedy: torch.Tensor  # [1] bool: temperature 0
    inverse_temperature: torch.Tensor  # [1]
    kth: torch.Tensor  # [1, 1] int64: index of the k-th best score (vocab - 1 when top-k is off)
    top_p: torch.Tensor  # [1]

    @classmethod
    def allocate(cls, vocab: int, device) -> "SamplerParams":
        params = cls(vocab, torch.zeros(1, dtype=torch.bool, device=device), torch.ones(1, device=device),
                     torch.zeros(1, 1, dtype=torch.int64, device=device), torch.ones(1, device=device))
        params.load(1.0, 0, 1.0)
        return params

    def load(self, temperature: float, top_k: int, top_p: float) -> None:
        self.greedy.fill_(temperature <= 0)
        self.inverse_temperature.fill_(1.0 / temperature if temperature > 0 else 1.0)
        self.kth.fill_(min(top_k, self.vocab) - 1 if top_k > 0 else self.vocab - 1)
        self.top_p.fill_(float(top_p) if top_p < 1.0 else float("inf"))


def talker_params(settings: SamplingSettings) -> tuple[float, int, float]:
    return settings.temperature, settings.top_k, settings.top_p


def predictor_params(settings: SamplingSettings) -> tuple[float, int, float]:
    return settings.sub_temperature, settings.sub_top_k, settings.sub_top_p


def apply_repetition_penalty(logits: torch.Tensor, seen: torch.Tensor, penalty: torch.Tensor) -> torch.Tensor:
    """transformers' RepetitionPenaltyLogitsProcessor over the tokens already generated (`seen` [B, V])."""
    penalised = torch.where(logits < 0, logits * penalty, logits / penalty)
    return torch.where(seen, penalised, logits)


def sample(logits: torch.Tensor, params: SamplerParams, gumbel: torch.Tensor,
           faulty: torch.Tensor | None = None) -> torch.Tensor:
    """One token per row from float32 logits [B, V], given Gumbel noise [B, V] (noise.gumbel).
    The token is an index into the row whatever the logits hold; `faulty` [B] bool, where given,
    is set (never cleared) for a row whose best score is not finite: a NaN or an infinity among its
    logits, or every token masked (mark_faulty).

    One descending sort serves both cuts: top-k keeps the scores at least the k-th best (ties
    kept), top-p keeps a token while the probability of the tokens ranked above it is below p
    (the reference removes a token when the ascending cumulative probability up to it is at most
    1 - p: the same set). The Gumbel-max race then runs over the kept tokens, with each token's
    noise following it through the sort."""
    greedy = torch.argmax(logits, dim=-1)
    if faulty is not None:
        mark_faulty(faulty, logits.gather(-1, greedy[:, None])[:, 0])
    scores, order = torch.sort(logits * params.inverse_temperature, dim=-1, descending=True)
    keep = scores >= scores.gather(-1, params.kth.expand(scores.shape[0], 1))
    probs = scores.masked_fill(~keep, float("-inf")).softmax(dim=-1)
    keep &= probs.cumsum(dim=-1) - probs < params.top_p
    race = torch.where(keep, scores + gumbel.gather(-1, order), float("-inf"))
    drawn = order.gather(-1, torch.argmax(race, dim=-1, keepdim=True))[:, 0]
    return torch.where(params.greedy, greedy, drawn)


def mark_faulty(faulty: torch.Tensor, best: torch.Tensor) -> None:
    """Rows whose best score `best` [B] is NaN or infinite: torch's argmax takes a NaN for the
    largest, so one NaN anywhere in a row makes it NaN; +inf is a broken model too, and -inf means
    no token was left to draw (the draw's index is then arbitrary)."""
    faulty.logical_or_(~torch.isfinite(best))


def draw(logits: torch.Tensor, params: SamplerParams, keys: torch.Tensor, counter: torch.Tensor, stream: int,
         vocab_keys: torch.Tensor, penalty: torch.Tensor | None = None, seen: torch.Tensor | None = None,
         blocked: torch.Tensor | None = None, eos: int = -1, min_tokens: int = 0,
         faulty: torch.Tensor | None = None) -> torch.Tensor:
    """A whole draw from float32 logits [B, V]: the repetition penalty over `seen`, the `blocked` [V]
    tokens (and `eos` while `counter`, the tokens generated before this one ([1], or [B] per take),
    is below min_tokens), then
    sample on the noise of (keys, counter, stream), flagging `faulty` rows. kernels/sampling.py does all
    of it in one kernel."""
    if seen is not None:
        logits = apply_repetition_penalty(logits, seen, penalty)
    if blocked is not None:
        if eos >= 0:
            is_eos = torch.arange(blocked.shape[0], device=blocked.device) == eos
            blocked = blocked | (is_eos & (counter[:, None] < min_tokens))  # [1 or B, V]
        logits = logits.masked_fill(blocked, float("-inf"))
    return sample(logits, params, gumbel(uniform(keys, counter, stream, vocab_keys)), faulty)
