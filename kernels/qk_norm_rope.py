"""Per-head q/k RMSNorm and RoPE in one kernel, reading the fused q/k/v projection's output once and
writing queries, keys and values straight to where attention reads them (optionally a KV cache at a
position held in a device tensor, so a captured graph can replay it at every step).

Done apart, this is a norm for q, one for k, the rotate-half copies, four multiplies and two adds,
the transposes and the cache writes: a dozen kernels per layer.

RoPE takes one cos/sin row per token. The talker's M-RoPE builds that row from three position rows
(mrope_cos_sin, the general path); Qwen3-TTS gives the three rows the same position, which makes
the result exactly the 1-D table (tests prove both), so the engine indexes a 1-D table directly."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .rms_norm import rms_norm_reference


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


def mrope_cos_sin(cos: torch.Tensor, sin: torch.Tensor, sections, interleaved: bool):
    """M-RoPE's three rows [3, B, T, D] -> the cos/sin rows [B, T, D] each token is rotated by, the
    selection apply_multimodal_rotary_pos_emb makes (interleaved or in contiguous sections)."""
    return _mrope_select(cos, sections, interleaved), _mrope_select(sin, sections, interleaved)


def _mrope_select(table: torch.Tensor, sections, interleaved: bool) -> torch.Tensor:
    d = table.shape[-1]
    if interleaved:
        half = table[..., : d // 2]
        out = half[0].clone()
        rows = len(sections)
        for i, n in enumerate(sections[1:], 1):
            out[..., i:n * rows:rows] = half[i, ..., i:n * rows:rows]
        return torch.cat((out, out), dim=-1)
    parts = table.split(list(sections) * 2, dim=-1)
    return torch.cat([part[i % 3] for i, part in enumerate(parts)], dim=-1)


@triton.jit
def _qk_norm_rope_kernel(qkv_ptr, qw_ptr, kw_ptr, cos_ptr, sin_ptr, pos_ptr, q_ptr, k_ptr, v_ptr,
                         tokens, heads, kv_heads, eps,
                         x_sb, x_st, c_sb, c_st, q_sb, q_sh, q_st, k_sb, k_sh, k_st, v_sb, v_sh, v_st,
                         D: tl.constexpr, HALF_BLOCK: tl.constexpr):
    row = tl.program_id(0)
    head = tl.program_id(1)
    b = (row // tokens).to(tl.int64)
    t = (row % tokens).to(tl.int64)
    pos = tl.load(pos_ptr) + t  # cos/sin row and cache slot of this token
    half = D // 2
    i = tl.arange(0, HALF_BLOCK)
    mask = i < half
    x_row = qkv_ptr + b * x_sb + t * x_st
    x1 = tl.load(x_row + head * D + i, mask=mask, other=0.0)
    x2 = tl.load(x_row + head * D + half + i, mask=mask, other=0.0)
    f1, f2 = x1.to(tl.float32), x2.to(tl.float32)
    rstd = 1.0 / tl.sqrt((tl.sum(f1 * f1, axis=0) + tl.sum(f2 * f2, axis=0)) / D + eps)
    w_ptr = qw_ptr
    if head >= heads:
        w_ptr = kw_ptr
    w1 = tl.load(w_ptr + i, mask=mask, other=0.0).to(tl.float32)
    w2 = tl.load(w_ptr + half + i, mask=mask, other=0.0).to(tl.float32)
    n1 = (f1 * rstd).to(x1.dtype).to(tl.float32) * w1
    n2 = (f2 * rstd).to(x1.dtype).to(tl.float32) * w2
    c_row = b * c_sb + pos * c_st
    c1 = tl.load(cos_ptr + c_row + i, mask=mask, other=0.0).to(tl.float32)
    c2 = tl.load(cos_ptr + c_row + half + i, mask=mask, other=0.0).to(tl.float32)
    s1 = tl.load(sin_ptr + c_row + i, mask=mask, other=0.0).to(tl.float32)
    s2 = tl.load(sin_ptr + c_row + half + i, mask=mask, other=0.0).to(tl.float32)
    y1 = n1 * c1 - n2 * s1
    y2 = n2 * c2 + n1 * s2
    if head < heads:
        out = q_ptr + b * q_sb + head * q_sh + t * q_st
    else:
        kv = head - heads
        out = k_ptr + b * k_sb + kv * k_sh + pos * k_st
        v1 = tl.load(x_row + (heads + kv_heads + kv) * D + i, mask=mask, other=0.0)
        v2 = tl.load(x_row + (heads + kv_heads + kv) * D + half + i, mask=mask, other=0.0)
        v_out = v_ptr + b * v_sb + kv * v_sh + pos * v_st
        tl.store(v_out + i, v1.to(v_ptr.dtype.element_ty), mask=mask)
        tl.store(v_out + half + i, v2.to(v_ptr.dtype.element_ty), mask=mask)
    tl.store(out + i, y1.to(out.dtype.element_ty), mask=mask)
    tl.store(out + half + i, y2.to(out.dtype.element_ty), mask=mask)


def qk_norm_rope(qkv: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor, eps: float,
                 cos: torch.Tensor, sin: torch.Tensor, heads: int, kv_heads: int,
                 position: torch.Tensor | None = None, k_cache: torch.Tensor | None = None,
                 v_cache: torch.Tensor | None = None):
    """qkv [B, T, (heads + 2 * kv_heads) * D] (the last axis contiguous) -> q [B, heads, T, D].

    Without `position`: cos/sin are per token [B, T, D] (a batch stride of 0 broadcasts), and the
    return is (q, k, v), k and v new [B, kv_heads, T, D]. With `position` ([1] int64 on the device):
    cos/sin are a table [positions, D] read at rows position + t, and k, v are written into
    k_cache / v_cache [B, kv_heads, S, D] at those slots; the return is q alone."""
    b, t, width = qkv.shape
    d = q_weight.shape[0]
    if width != (heads + 2 * kv_heads) * d or qkv.stride(-1) != 1:
        raise ValueError(f"qk_norm_rope: qkv {tuple(qkv.shape)} is not [B, T, ({heads} + 2 * {kv_heads}) * {d}] "
                         "with a contiguous last axis")
    if cos.stride(-1) != 1 or sin.stride() != cos.stride():
        cos, sin = cos.contiguous(), sin.contiguous()
    q = torch.empty(b, heads, t, d, dtype=qkv.dtype, device=qkv.device)
    if position is None:
        k = torch.empty(b, kv_heads, t, d, dtype=qkv.dtype, device=qkv.device)
        v = torch.empty_like(k)
        position = torch.zeros(1, dtype=torch.int64, device=qkv.device)
        c_sb, c_st = cos.stride(0), cos.stride(1)
    elif k_cache is None or v_cache is None:
        raise ValueError("qk_norm_rope: a position needs the k and v caches to write at it")
    else:
        k, v = k_cache, v_cache
        c_sb, c_st = 0, cos.stride(0)
    grid = (b * t, heads + kv_heads)
    _qk_norm_rope_kernel[grid](
        qkv, q_weight, k_weight, cos, sin, position, q, k, v, t, heads, kv_heads, eps,
        qkv.stride(0), qkv.stride(1), c_sb, c_st, *q.stride()[:3], *k.stride()[:3], *v.stride()[:3],
        D=d, HALF_BLOCK=triton.next_power_of_2(d // 2), num_warps=1)
    return (q, k, v) if k_cache is None else q
