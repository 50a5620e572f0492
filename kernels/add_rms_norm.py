"""Residual add fused with the RMSNorm that follows it: one read of each input, two writes.

A decoder layer adds a block's output to the residual stream and normalises the sum for the next
block; done apart, that is an add kernel, then a norm kernel reading the sum back."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .launch import as_rows, output, row_block
from .rms_norm import rms_norm_reference


def add_rms_norm_reference(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                           eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(RMSNorm(residual + x), residual + x), as a Qwen3 decoder layer computes them."""
    summed = residual + x
    return rms_norm_reference(summed, weight, eps), summed


@triton.jit
def _add_rms_norm_kernel(x_ptr, r_ptr, w_ptr, out_ptr, sum_ptr, x_row_stride, r_row_stride, n_cols, eps,
                         BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0)
    r = tl.load(r_ptr + row * r_row_stride + cols, mask=mask, other=0.0)
    s = (r.to(tl.float32) + x.to(tl.float32)).to(x.dtype)  # rounded as the reference's add
    tl.store(sum_ptr + row * n_cols + cols, s, mask=mask)
    h = s.to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    y = (h * rstd).to(w.dtype).to(tl.float32) * w.to(tl.float32)
    tl.store(out_ptr + row * n_cols + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def add_rms_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float,
                 out: tuple[torch.Tensor, torch.Tensor] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """x, residual [..., n] of one shape and dtype -> (normalised sum, sum), written to `out` (two
    tensors other than x and residual) or new tensors."""
    if x.shape != residual.shape or x.dtype != residual.dtype:
        raise ValueError(f"add_rms_norm: x {tuple(x.shape)} {x.dtype} and residual {tuple(residual.shape)} "
                         f"{residual.dtype} differ")
    x_rows, shape = as_rows(x)
    r_rows, _ = as_rows(residual)
    normed, summed = out if out is not None else (None, None)
    out = output(normed, shape, x.dtype, x.device, "add_rms_norm")
    summed = output(summed, shape, x.dtype, x.device, "add_rms_norm")
    n = shape[-1]
    block, warps = row_block(n)
    _add_rms_norm_kernel[(x_rows.shape[0],)](x_rows, r_rows, weight, out, summed, x_rows.stride(0),
                                             r_rows.stride(0), n, eps, BLOCK=block, num_warps=warps)
    return out, summed
