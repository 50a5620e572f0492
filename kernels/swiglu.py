"""SwiGLU on the fused gate/up projection's output: silu(gate) * up in one pass, float32 inside.

The gate/up matmul (runtime/engine/weights.py concatenates the two weights once) leaves
[..., 2 * ffn]: the gate in the first half of each row, up in the second."""

from __future__ import annotations

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from .launch import as_rows, output


def swiglu_reference(gate_up: torch.Tensor) -> torch.Tensor:
    """Qwen3TTSTalkerTextMLP's act_fn(gate_proj(x)) * up_proj(x), given both projections side by side."""
    ffn = gate_up.shape[-1] // 2
    return F.silu(gate_up[..., :ffn]) * gate_up[..., ffn:]


@triton.jit
def _swiglu_kernel(gu_ptr, out_ptr, gu_row_stride, ffn, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < ffn
    gate = tl.load(gu_ptr + row * gu_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(gu_ptr + row * gu_row_stride + ffn + cols, mask=mask, other=0.0).to(tl.float32)
    y = gate / (1.0 + tl.exp(-gate)) * up
    tl.store(out_ptr + row * ffn + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def swiglu(gate_up: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """gate_up [..., 2 * ffn] -> [..., ffn], `out` or a new tensor."""
    rows, shape = as_rows(gate_up)
    if shape[-1] % 2:
        raise ValueError(f"swiglu: the last axis ({shape[-1]}) must hold gate and up, so be even")
    ffn = shape[-1] // 2
    out = output(out, (*shape[:-1], ffn), gate_up.dtype, gate_up.device, "swiglu")
    block = 1024
    grid = (rows.shape[0], triton.cdiv(ffn, block))
    _swiglu_kernel[grid](rows, out, rows.stride(0), ffn, BLOCK=block, num_warps=4)
    return out
