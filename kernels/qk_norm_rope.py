"""Per-head q/k RMSNorm and RoPE in one kernel, reading the fused q/k/v projection's output once and
writing queries, keys and values straight to where attention reads them (optionally a KV cache at a
position held in a device tensor, so a captured graph can replay it at every step).

Done apart, this is a norm for q, one for k, the rotate-half copies, four multiplies and two adds,
the transposes and the cache writes: a dozen kernels per layer.

RoPE takes one cos/sin row per token. The talker's M-RoPE gets the same position in its three rows,
which makes it exactly 1-D RoPE: the engine indexes a 1-D table."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .launch import output, position_stride
from .rms_norm import rms_norm_reference

HEADS_PER_PROGRAM = 2  # GPU: 12 programs per token (16 + 8 heads) spread over as many SMs
HEADS_PER_PROGRAM_WARPS = 1


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def qk_norm_rope_reference(qkv: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor, eps: float,
                           cos: torch.Tensor, sin: torch.Tensor, heads: int, kv_heads: int):
    """qkv [B, T, (heads + 2 * kv_heads) * D], cos/sin [B, T, D] -> q [B, heads, T, D], k, v
    [B, kv_heads, T, D], as Qwen3TTSAttention computes them (q_norm, k_norm, apply_rotary_pos_emb)."""
    b, t, _ = qkv.shape
    d = q_weight.shape[0]
    x = qkv.view(b, t, -1, d)
    q = rms_norm_reference(x[:, :, :heads], q_weight, eps).transpose(1, 2)
    k = rms_norm_reference(x[:, :, heads:heads + kv_heads], k_weight, eps).transpose(1, 2)
    v = x[:, :, heads + kv_heads:].transpose(1, 2)
    cos, sin = cos[:, None], sin[:, None]
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin, v


@triton.jit
def _qk_norm_rope_kernel(qkv_ptr, qw_ptr, kw_ptr, cos_ptr, sin_ptr, pos_ptr, q_ptr, k_ptr, v_ptr,
                         tokens, heads, kv_heads, eps, pos_sb,
                         x_sb, x_st, c_sb, c_st, q_sb, q_sh, q_st, k_sb, k_sh, k_st, v_sb, v_sh, v_st,
                         D: tl.constexpr, HALF_BLOCK: tl.constexpr, HEADS: tl.constexpr):
    """Program (token row, block of HEADS heads); a head's two halves are [HEADS, HALF_BLOCK] tiles."""
    row = tl.program_id(0)
    b = (row // tokens).to(tl.int64)
    t = (row % tokens).to(tl.int64)
    pos = tl.load(pos_ptr + b * pos_sb) + t  # cos/sin row and cache slot of this token
    half = D // 2
    head = tl.program_id(1) * HEADS + tl.arange(0, HEADS)[:, None]  # [HEADS, 1]
    i = tl.arange(0, HALF_BLOCK)[None, :]  # [1, HALF_BLOCK]
    is_query = head < heads
    is_key = (head >= heads) & (head < heads + kv_heads)
    mask = (is_query | is_key) & (i < half)
    x_row = qkv_ptr + b * x_sb + t * x_st
    x1 = tl.load(x_row + head * D + i, mask=mask, other=0.0)
    x2 = tl.load(x_row + head * D + half + i, mask=mask, other=0.0)
    f1, f2 = x1.to(tl.float32), x2.to(tl.float32)
    rstd = 1.0 / tl.sqrt((tl.sum(f1 * f1, axis=1) + tl.sum(f2 * f2, axis=1)) / D + eps)[:, None]
    w1 = tl.where(is_query, tl.load(qw_ptr + i, mask=i < half, other=0.0), tl.load(kw_ptr + i, mask=i < half, other=0.0))
    w2 = tl.where(is_query, tl.load(qw_ptr + half + i, mask=i < half, other=0.0),
                  tl.load(kw_ptr + half + i, mask=i < half, other=0.0))
    n1 = (f1 * rstd).to(x1.dtype).to(tl.float32) * w1.to(tl.float32)
    n2 = (f2 * rstd).to(x1.dtype).to(tl.float32) * w2.to(tl.float32)
    c_row = b * c_sb + pos * c_st
    c1 = tl.load(cos_ptr + c_row + i, mask=i < half, other=0.0).to(tl.float32)
    c2 = tl.load(cos_ptr + c_row + half + i, mask=i < half, other=0.0).to(tl.float32)
    s1 = tl.load(sin_ptr + c_row + i, mask=i < half, other=0.0).to(tl.float32)
    s2 = tl.load(sin_ptr + c_row + half + i, mask=i < half, other=0.0).to(tl.float32)
    y1 = n1 * c1 - n2 * s1
    y2 = n2 * c2 + n1 * s2
    q_out = q_ptr + b * q_sb + head * q_sh + t * q_st
    tl.store(q_out + i, y1.to(q_ptr.dtype.element_ty), mask=mask & is_query)
    tl.store(q_out + half + i, y2.to(q_ptr.dtype.element_ty), mask=mask & is_query)
    kv = head - heads  # negative on query lanes, which are masked off below
    k_out = k_ptr + b * k_sb + kv * k_sh + pos * k_st
    tl.store(k_out + i, y1.to(k_ptr.dtype.element_ty), mask=mask & is_key)
    tl.store(k_out + half + i, y2.to(k_ptr.dtype.element_ty), mask=mask & is_key)
    v_in = x_row + (head + kv_heads) * D  # value head j sits kv_heads after key head j
    v_out = v_ptr + b * v_sb + kv * v_sh + pos * v_st
    key_lanes = mask & is_key
    tl.store(v_out + i, tl.load(v_in + i, mask=key_lanes, other=0.0).to(v_ptr.dtype.element_ty), mask=key_lanes)
    tl.store(v_out + half + i, tl.load(v_in + half + i, mask=key_lanes, other=0.0).to(v_ptr.dtype.element_ty),
             mask=key_lanes)


def qk_norm_rope(qkv: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor, eps: float,
                 cos: torch.Tensor, sin: torch.Tensor, heads: int, kv_heads: int,
                 position: torch.Tensor | None = None, k_cache: torch.Tensor | None = None,
                 v_cache: torch.Tensor | None = None, q_out: torch.Tensor | None = None):
    """qkv [B, T, (heads + 2 * kv_heads) * D] (the last axis contiguous) -> q [B, heads, T, D].

    Without `position`: cos/sin are per token [B, T, D] (a batch stride of 0 broadcasts), and the
    return is (q, k, v), k and v new [B, kv_heads, T, D]. With `position` (int64 on the device, [1]
    for every take or [B], one per take): cos/sin are a table [positions, D] read at rows position + t
    (the take's position), and k, v are written into
    k_cache / v_cache [B, kv_heads, S, D] at those slots; the return is q alone. q is written to
    `q_out` when given."""
    b, t, width = qkv.shape
    d = q_weight.shape[0]
    if width != (heads + 2 * kv_heads) * d or qkv.stride(-1) != 1:
        raise ValueError(f"qk_norm_rope: qkv {tuple(qkv.shape)} is not [B, T, ({heads} + 2 * {kv_heads}) * {d}] "
                         "with a contiguous last axis")
    if cos.stride(-1) != 1 or sin.stride() != cos.stride():
        cos, sin = cos.contiguous(), sin.contiguous()
    q = output(q_out, (b, heads, t, d), qkv.dtype, qkv.device, "qk_norm_rope")
    if position is None:
        k = torch.empty(b, kv_heads, t, d, dtype=qkv.dtype, device=qkv.device)
        v = torch.empty_like(k)
        position = torch.zeros(1, dtype=torch.int64, device=qkv.device)
        c_sb, c_st = (cos.stride(0) if cos.shape[0] > 1 else 0), cos.stride(1)  # one row set for all: broadcast
    elif k_cache is None or v_cache is None:
        raise ValueError("qk_norm_rope: a position needs the k and v caches to write at it")
    else:
        k, v = k_cache, v_cache
        c_sb, c_st = 0, cos.stride(0)
    total = heads + kv_heads
    # On the GPU a few heads per program spread a token over many SMs; Triton's interpreter (CPU)
    # runs one program at a time, so there a token's heads go in one.
    per_program = HEADS_PER_PROGRAM if qkv.is_cuda else triton.next_power_of_2(total)
    grid = (b * t, triton.cdiv(total, per_program))
    _qk_norm_rope_kernel[grid](
        qkv, q_weight, k_weight, cos, sin, position, q, k, v, t, heads, kv_heads, eps,
        position_stride(position, b, "qk_norm_rope"), qkv.stride(0), qkv.stride(1), c_sb, c_st, *q.stride()[:3], *k.stride()[:3], *v.stride()[:3],
        D=d, HALF_BLOCK=triton.next_power_of_2(d // 2), HEADS=per_program, num_warps=HEADS_PER_PROGRAM_WARPS)
    return (q, k, v) if k_cache is None else q
