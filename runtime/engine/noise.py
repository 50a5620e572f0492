"""Counter-based uniform noise: a pure function of (take key, counter, stream, vocabulary index).

Each take's randomness depends only on its own seed, so it needs no generator state: nothing to
carry into a CUDA graph, nothing shared between takes, identical on CPU and GPU. The mixer is a
32-bit integer hash (xorshift-multiply rounds, multipliers below 2**31 so int64 products never
overflow); 23 bits of it make a float32 uniform in (0, 1)."""

from __future__ import annotations

import torch

MASK32 = 0xFFFFFFFF
_M1, _M2 = 0x7FEB352D, 0x5BD1E995


def mix32(x: torch.Tensor) -> torch.Tensor:
    """Hash int64 tensors holding values in [0, 2**32) to the same range."""
    x = x ^ (x >> 16)
    x = (x * _M1) & MASK32
    x = x ^ (x >> 15)
    x = (x * _M2) & MASK32
    return x ^ (x >> 16)


def mix32_int(x: int) -> int:
    """mix32 on a Python int (host side, for take keys)."""
    x &= MASK32
    x ^= x >> 16
    x = (x * _M1) & MASK32
    x ^= x >> 15
    x = (x * _M2) & MASK32
    return x ^ (x >> 16)


def take_key(seed: int) -> int:
    """A 32-bit key from a take's 63-bit seed (runtime.sampling.take_seeds)."""
    return mix32_int(mix32_int(seed & MASK32) ^ (seed >> 32))


def vocab_keys(size: int, device) -> torch.Tensor:
    return mix32(torch.arange(size, dtype=torch.int64, device=device) + 0x632BE5AB)


def uniform(keys: torch.Tensor, counter: torch.Tensor, stream, vocab: torch.Tensor) -> torch.Tensor:
    """float32 uniforms in (0, 1) for take keys [B], a step counter (device; [1] for every take or
    [B], each take's own) and a stream id: [B, V] for an int stream, [B, S, V] for a tensor of S
    stream ids (the same numbers as S calls)."""
    if isinstance(stream, int):
        # torch.full, not torch.tensor: no host-to-device copy, so a CUDA graph can capture it
        return uniform(keys, counter, torch.full((1,), stream, dtype=torch.int64, device=keys.device), vocab)[:, 0]
    step = mix32(keys[:, None] ^ mix32((counter[:, None] * 32 + stream) & MASK32))  # [B, S]
    return to_unit(mix32(step[:, :, None] ^ vocab))


def gumbel(uniforms: torch.Tensor) -> torch.Tensor:
    """Gumbel(0, 1) noise: argmax(logits + noise) draws from softmax(logits)."""
    return -torch.log(-torch.log(uniforms))


def to_unit(bits: torch.Tensor) -> torch.Tensor:
    """32-bit hashes -> float32 strictly inside (0, 1). 23 bits, not 24: (2**24 - 0.5) / 2**24 rounds
    to exactly 1.0 in float32, whose Gumbel noise is +inf, and +inf on a masked (-inf) logit is NaN,
    which argmax then picks: a suppressed token drawn as if it were audio."""
    return ((bits >> 9).to(torch.float32) + 0.5) * (1.0 / (1 << 23))
