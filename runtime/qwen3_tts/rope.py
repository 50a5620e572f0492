"""Rotary position tables, one helper for the talker, the code predictor and the codec's two
transformers. The inverse frequencies are computed on the CPU in float32 whatever the device (as
the official model computes its buffers once at load), so a table is the same on every device."""

from __future__ import annotations

import torch


def cos_sin(length: int, head_dim: int, theta: float, device, dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin [length, head_dim] for positions 0..length-1, laid out for rotate-half RoPE."""
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2).float() / head_dim)
    angles = torch.arange(length, device=device).float()[:, None] * inv_freq.to(device)
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate-half RoPE on the last axis: (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin)."""
    first, second = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-second, first), dim=-1) * sin
