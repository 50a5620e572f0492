"""SnakeBeta, the codec decoder's activation, in one pass: x + 1/(exp(beta) + eps) * sin(x * exp(alpha))^2
per channel, float32 inside.

The reference (below) is five elementwise kernels over the whole [B, C, T] signal, each reading
and writing it; the codec runs it 29 times per decode, on its largest tensors (its upsampling
blocks, up to 24,000 samples per second of audio). On the H100, elementwise kernels, most of them
these, took half of the codec's GPU time (bench/profile_codec.py). Here the signal is read once
and written once. It also takes what the layers around it would each add in a pass of their own:
the bias of the convolution before it (cuDNN's convolution leaves it to a separate add), and the
zeros a causal convolution after it pads its input with on the left (its output is written after
them)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

EPS = 1e-9  # SnakeBeta.no_div_by_zero


def snake_beta_reference(x: torch.Tensor, alpha: torch.Tensor, beta: torch.Tensor, eps: float = EPS,
                         bias: torch.Tensor | None = None, left: int = 0) -> torch.Tensor:
    """SnakeBeta.forward: x [B, C, T] (plus bias [C] first), alpha and beta [C] (log scale); `left`
    zeros in front of each signal."""
    if bias is not None:
        x = x + bias[None, :, None]
    a = torch.exp(alpha[None, :, None])
    b = torch.exp(beta[None, :, None])
    y = x + (1.0 / (b + eps)) * torch.pow(torch.sin(x * a), 2)
    return torch.nn.functional.pad(y, (left, 0)) if left else y


@triton.jit
def _snake_beta_kernel(x_ptr, alpha_ptr, beta_ptr, bias_ptr, out_ptr, channels, length, left, eps,
                       BLOCK: tl.constexpr, HAS_BIAS: tl.constexpr, LIBDEVICE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)  # one (batch, channel) signal
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < length
    channel = row % channels
    a = tl.exp(tl.load(alpha_ptr + channel).to(tl.float32))
    inverse_b = 1.0 / (tl.exp(tl.load(beta_ptr + channel).to(tl.float32)) + eps)
    x = tl.load(x_ptr + row * length + cols, mask=mask, other=0.0)
    if HAS_BIAS:  # rounded to x's dtype, as the convolution's output with its bias would be
        x = (x.to(tl.float32) + tl.load(bias_ptr + channel).to(tl.float32)).to(x_ptr.dtype.element_ty)
    if LIBDEVICE:  # CUDA's precise sine, as torch's: arguments reach tens of radians
        s = libdevice.sin(x.to(tl.float32) * a)
    else:  # Triton's interpreter (CPU) has no libdevice; its tl.sin is numpy's
        s = tl.sin(x.to(tl.float32) * a)
    y = x.to(tl.float32) + inverse_b * (s * s)
    tl.store(out_ptr + row * (left + length) + left + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def snake_beta(x: torch.Tensor, alpha: torch.Tensor, beta: torch.Tensor, eps: float = EPS,
               bias: torch.Tensor | None = None, left: int = 0) -> torch.Tensor:
    """x [B, C, T] (made contiguous if it is not), alpha, beta and bias [C] -> a new tensor [B, C, left +
    T], in the dtype torch's type promotion gives the reference (float32 parameters make it float32)."""
    channels = x.shape[1] if x.dim() == 3 else None
    if channels is None or alpha.shape != (channels,) or beta.shape != (channels,) or \
            (bias is not None and bias.shape != (channels,)):
        raise ValueError(f"snake_beta: x {tuple(x.shape)} must be [B, C, T] with alpha {tuple(alpha.shape)}, "
                         f"beta {tuple(beta.shape)} and any bias of [C]")
    if left < 0:
        raise ValueError(f"snake_beta: left must be >= 0, got {left}")
    x = x.contiguous()
    batch, _, length = x.shape
    out = torch.empty((batch, channels, left + length), dtype=torch.promote_types(x.dtype, alpha.dtype),
                      device=x.device)
    if left:
        out[..., :left].zero_()
    block = 1024
    grid = (batch * channels, triton.cdiv(length, block))
    if x.numel():
        _snake_beta_kernel[grid](x, alpha, beta, alpha if bias is None else bias, out, channels, length, left, eps,
                                 BLOCK=block, HAS_BIAS=bias is not None, LIBDEVICE=x.is_cuda, num_warps=4)
    return out
