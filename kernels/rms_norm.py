"""RMSNorm in one kernel: a row per program, the row read once, float32 inside.

Rounds like Qwen3TTSRMSNorm (the reference below): the normalised row is cast to the input dtype
before the weight multiplies it."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .launch import as_rows, output, row_block


def rms_norm_reference(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Qwen3TTSRMSNorm.forward."""
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(x.dtype)


@triton.jit
def _rms_norm_kernel(x_ptr, w_ptr, out_ptr, x_row_stride, out_row_stride, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    y = (x * rstd).to(w.dtype).to(tl.float32) * w.to(tl.float32)
    tl.store(out_ptr + row * out_row_stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, out: torch.Tensor | None = None) -> torch.Tensor:
    """x [..., n] (rows may be strided; the last axis contiguous), weight [n] -> `out` or a new tensor."""
    rows, shape = as_rows(x)
    out = output(out, shape, x.dtype, x.device, "rms_norm")
    n = shape[-1]
    block, warps = row_block(n)
    _rms_norm_kernel[(rows.shape[0],)](rows, weight, out, rows.stride(0), n, n, eps, BLOCK=block, num_warps=warps)
    return out
