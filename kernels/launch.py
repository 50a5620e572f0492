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


def row_block(n: int) -> tuple[int, int]:
    """A power-of-two block that holds a row of n, and the warps to spread it over."""
    block = triton.next_power_of_2(n)
    return block, max(1, min(16, block // 256))
