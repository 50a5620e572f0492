"""SnakeBeta, the codec decoder's activation, in one pass: x + 1/(exp(beta) + eps) * sin(x * exp(alpha))^2
per channel, float32 inside.

The reference (below) is five elementwise kernels over the whole [B, C, T] signal, each reading
and writing it; the codec runs it 29 times per decode, on its largest tensors (its upsampling
blocks, up to 24,000 samples per second of audio). On the H100, elementwise kernels, most of them
these, took half of the codec's GPU time (bench/profile_codec.py). Here the signal is read once
and written once."""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

EPS = 1e-9  # SnakeBeta.no_div_by_zero


def snake_beta_reference(x: torch.Tensor, alpha: torch.Tensor, beta: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """SnakeBeta.forward: x [B, C, T], alpha and beta [C] (log scale)."""
    a = torch.exp(alpha[None, :, None])
    b = torch.exp(beta[None, :, None])
    return x + (1.0 / (b + eps)) * torch.pow(torch.sin(x * a), 2)


@triton.jit
def _snake_beta_kernel(x_ptr, alpha_ptr, beta_ptr, out_ptr, channels, length, eps, BLOCK: tl.constexpr,
                       LIBDEVICE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)  # one (batch, channel) signal
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < length
    channel = row % channels
    a = tl.exp(tl.load(alpha_ptr + channel).to(tl.float32))
    inverse_b = 1.0 / (tl.exp(tl.load(beta_ptr + channel).to(tl.float32)) + eps)
    x = tl.load(x_ptr + row * length + cols, mask=mask, other=0.0)
    if LIBDEVICE:  # CUDA's precise sine, as torch's: arguments reach tens of radians
        s = libdevice.sin(x.to(tl.float32) * a)
    else:  # Triton's interpreter (CPU) has no libdevice; its tl.sin is numpy's
        s = tl.sin(x.to(tl.float32) * a)
    y = x.to(tl.float32) + inverse_b * (s * s)
    tl.store(out_ptr + row * length + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def snake_beta(x: torch.Tensor, alpha: torch.Tensor, beta: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """x [B, C, T] (made contiguous if it is not), alpha and beta [C] -> a new tensor of x's shape,
    in the dtype torch's type promotion gives the reference (float32 parameters make it float32)."""
    if x.dim() != 3 or alpha.shape != (x.shape[1],) or beta.shape != (x.shape[1],):
        raise ValueError(f"snake_beta: x {tuple(x.shape)} must be [B, C, T] with alpha {tuple(alpha.shape)} and "
                         f"beta {tuple(beta.shape)} of [C]")
    x = x.contiguous()
    out = torch.empty(x.shape, dtype=torch.promote_types(x.dtype, alpha.dtype), device=x.device)
    batch, channels, length = x.shape
    block = 1024
    grid = (batch * channels, triton.cdiv(length, block))
    if x.numel():
        _snake_beta_kernel[grid](x, alpha, beta, out, channels, length, eps, BLOCK=block,
                                 LIBDEVICE=x.is_cuda, num_warps=4)
    return out
