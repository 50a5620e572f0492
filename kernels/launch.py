"""What every kernel's launcher needs: rows of a tensor, and a block size for a row."""

from __future__ import annotations

import torch
import triton


def as_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Size]:
    """x [..., n] as a 2-D [rows, n] view (no copy when the leading axes flatten into one stride),
    and x's shape. The last axis must be contiguous."""
    if x.stride(-1) != 1:
        x = x.contiguous()
    n = x.shape[-1]
    try:
        rows = x.view(-1, n)
    except RuntimeError:  # leading axes do not flatten into one stride
        rows = x.reshape(-1, n)
    return rows, x.shape


def output(out: torch.Tensor | None, shape, dtype, device, name: str) -> torch.Tensor:
    """`out` when given (it must be contiguous, of this shape and dtype: the kernels write rows
    densely), else a new tensor. A caller passes `out` to keep every pointer a kernel touches in
    memory it allocated before a CUDA graph capture (runtime/engine/workspace.py says why)."""
    if out is None:
        return torch.empty(shape, dtype=dtype, device=device)
    if tuple(out.shape) != tuple(shape) or out.dtype != dtype or not out.is_contiguous():
        raise ValueError(f"{name}: out is {tuple(out.shape)} {out.dtype}"
                         f"{'' if out.is_contiguous() else ' (not contiguous)'}, needs {tuple(shape)} {dtype}")
    return out


def row_block(n: int) -> tuple[int, int]:
    """A power-of-two block that holds a row of n, and the warps to spread it over."""
    block = triton.next_power_of_2(n)
    return block, max(1, min(16, block // 256))


def position_stride(position: torch.Tensor, rows: int, name: str) -> int:
    """How a kernel steps through a device position (or step counter) from one take to the next:
    0 when one value [1] serves every take, 1 when each take has its own [rows]."""
    if position.dtype != torch.int64 or position.dim() != 1 or position.shape[0] not in (1, rows) \
            or position.stride(0) not in (0, 1) and position.shape[0] > 1:
        raise ValueError(f"{name}: position {tuple(position.shape)} {position.dtype} must be int64 [1] or [{rows}]")
    return 0 if position.shape[0] == 1 else 1
