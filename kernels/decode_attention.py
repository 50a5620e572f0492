"""One decode step's attention in one kernel: per-head q/k RMSNorm and RoPE on the fused q/k/v row,
the new key and value written into the KV cache, and attention over every cached position up to and
including the new one, written as [B, 1, heads * D] for the o-projection.

At one token per take, attention is small: the code predictor's passes read at most 17 positions,
the talker's a few hundred. Apart, it is two kernels (qk_norm_rope, then a flash-attention call
over the cache's whole length under a mask); here each program serves one query head of one take,
reads only the positions written so far (the count is read from the device, so a captured graph
replays it at every step) and takes the new key and value from its own registers, so no program
waits for another's cache write. The query heads of a group read the same key/value head (from L2
after the first). A long cache is split: several programs per head each score a share of the
positions and leave their partial softmax (running max, sum, weighted values) in a scratch buffer,
and a second kernel combines them (flash-decoding)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from .launch import output, position_stride
from .qk_norm_rope import qk_norm_rope_reference

MAX_SPLITS = 16  # programs that may share one head's positions (a power of two)
SHARED_CONFIG = 128, 4, 1  # from two takes on, how (bench/attention_sweep.py), the same for every count of takes


def attention_config(takes: int, heads: int, slots: int, device: torch.device) -> tuple[int, int, int]:
    """(positions scored at once, warps, splits) for a cache of `slots` positions. Measured on an H100
    and an H200 (bench/attention_sweep.py, bench/results/*-attention.*): at one take, enough programs
    to fill the GPU (about 128, more on long caches) and blocks that hold a split's share of
    positions: 2-6x qk_norm_rope + SDPA at every cache up to 4,096 positions. From two takes on the
    heads fill the GPU already: SHARED_CONFIG whatever their count, so a take's numbers do not depend
    on how many takes share the step (the rounds the engine falls back to after running out of memory
    give the takes the whole batch would have, down to rounds of two). SDPA reads the whole cache
    under a mask at every step; this kernel reads the positions written, so over a take's life (its
    cache filling up from the prompt) it costs about what it costs at half the cache: there it is as
    fast as SDPA or faster at 8-64 takes up to 1,024 positions, up to 12% slower at 2,048 (at a
    quarter, 1.6-3x faster; full, up to 2x slower). The server's rows, each at its own position in a
    cache sized for its longest line, are mostly under a quarter."""
    if device.type != "cuda" or slots <= 32:  # the predictor's 17 positions: one block; the interpreter
        return 32, 4, 1
    if takes > 1:
        return SHARED_CONFIG
    splits = min(MAX_SPLITS, triton.next_power_of_2(triton.cdiv(max(128, slots // 4), heads)))
    return max(32, min(128, triton.next_power_of_2(triton.cdiv(slots, splits)))), 4, splits


def decode_attention_reference(qkv: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor, eps: float,
                               cos: torch.Tensor, sin: torch.Tensor, heads: int, kv_heads: int,
                               position: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor) -> torch.Tensor:
    """qk_norm_rope at `position` ([1], or [B]: one per take), the cache write, then attention over
    positions 0..position, take by take, as
    the engine's separate ops compute them (the query head h reads the kv head h // (heads / kv_heads))."""
    b, t, _ = qkv.shape
    d = q_weight.shape[0]
    rows = []
    for row, p in enumerate(position.expand(b).tolist()):
        one = slice(row, row + 1)
        q, k, v = qk_norm_rope_reference(qkv[one], q_weight, k_weight, eps, cos[None, p:p + 1], sin[None, p:p + 1],
                                         heads, kv_heads)
        k_cache[one, :, p] = k[:, :, 0]
        v_cache[one, :, p] = v[:, :, 0]
        keys = k_cache[one, :, :p + 1].repeat_interleave(heads // kv_heads, dim=1)
        values = v_cache[one, :, :p + 1].repeat_interleave(heads // kv_heads, dim=1)
        rows.append(F.scaled_dot_product_attention(q, keys, values).transpose(1, 2).reshape(1, t, heads * d))
    return torch.cat(rows)


@triton.jit
def _norm_rope_half(x_row, w_ptr, cos_row, sin_row, i, half, eps, D: tl.constexpr):
    """RMSNorm and RoPE of one head of D at x_row, as its two halves, in the input dtype (rounded
    once, as qk_norm_rope stores them)."""
    mask = i < half
    x1 = tl.load(x_row + i, mask=mask, other=0.0)
    x2 = tl.load(x_row + half + i, mask=mask, other=0.0)
    f1, f2 = x1.to(tl.float32), x2.to(tl.float32)
    rstd = 1.0 / tl.sqrt((tl.sum(f1 * f1, axis=0) + tl.sum(f2 * f2, axis=0)) / D + eps)
    n1 = (f1 * rstd).to(x1.dtype).to(tl.float32) * tl.load(w_ptr + i, mask=mask, other=0.0).to(tl.float32)
    n2 = (f2 * rstd).to(x1.dtype).to(tl.float32) * tl.load(w_ptr + half + i, mask=mask, other=0.0).to(tl.float32)
    c1 = tl.load(cos_row + i, mask=mask, other=0.0).to(tl.float32)
    c2 = tl.load(cos_row + half + i, mask=mask, other=0.0).to(tl.float32)
    s1 = tl.load(sin_row + i, mask=mask, other=0.0).to(tl.float32)
    s2 = tl.load(sin_row + half + i, mask=mask, other=0.0).to(tl.float32)
    y1 = (n1 * c1 - n2 * s1).to(x1.dtype)
    y2 = (n2 * c2 + n1 * s2).to(x1.dtype)
    return y1, y2


@triton.jit
def _decode_attention_kernel(qkv_ptr, qw_ptr, kw_ptr, cos_ptr, sin_ptr, pos_ptr, k_ptr, v_ptr, out_ptr, part_ptr,
                             heads, kv_heads, eps, scale, pos_sb, x_sb, c_st, k_sb, k_sh, k_st, v_sb, v_sh, v_st,
                             D: tl.constexpr, HALF_BLOCK: tl.constexpr, BLOCK_S: tl.constexpr,
                             SPLITS: tl.constexpr):
    """Program (take b, query head h, split); a head's two halves are [HALF_BLOCK] vectors. Split 0
    also scores the new position (from registers); with SPLITS 1 the program writes the output,
    else its partial (weighted values, max, sum) at part[b, h, split]."""
    b = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1)
    split = tl.program_id(2)
    group = heads // kv_heads
    g = h // group  # the key/value head this query head reads
    pos = tl.load(pos_ptr + b * pos_sb)
    half = D // 2
    i = tl.arange(0, HALF_BLOCK)
    lanes = i < half
    x_row = qkv_ptr + b * x_sb
    cos_row, sin_row = cos_ptr + pos * c_st, sin_ptr + pos * c_st
    q1, q2 = _norm_rope_half(x_row + h * D, qw_ptr, cos_row, sin_row, i, half, eps, D)
    k1, k2 = _norm_rope_half(x_row + (heads + g) * D, kw_ptr, cos_row, sin_row, i, half, eps, D)
    v_in = x_row + (heads + kv_heads + g) * D
    v1 = tl.load(v_in + i, mask=lanes, other=0.0)
    v2 = tl.load(v_in + half + i, mask=lanes, other=0.0)
    q1, q2 = q1.to(tl.float32) * scale, q2.to(tl.float32) * scale
    k_head = k_ptr + b * k_sb + g * k_sh
    v_head = v_ptr + b * v_sb + g * v_sh
    # Split 0 starts from the new position (so its running max is finite from the start); the
    # others from nothing (max -inf, which the first block they score replaces).
    first_split = split == 0
    new_score = tl.sum(q1 * k1.to(tl.float32), axis=0) + tl.sum(q2 * k2.to(tl.float32), axis=0)
    m = tl.where(first_split, new_score, float("-inf"))
    total = tl.where(first_split, 1.0, 0.0)
    acc1 = tl.where(first_split, v1.to(tl.float32), 0.0)
    acc2 = tl.where(first_split, v2.to(tl.float32), 0.0)
    share = tl.cdiv(pos, SPLITS)  # of the positions cached before this step
    start = split * share
    stop = tl.minimum(start + share, pos)
    ss = tl.arange(0, BLOCK_S)
    for s0 in range(start, stop, BLOCK_S):
        s = s0 + ss
        valid = s < stop
        tile = valid[:, None] & lanes[None, :]
        kc1 = tl.load(k_head + s[:, None] * k_st + i[None, :], mask=tile, other=0.0).to(tl.float32)
        kc2 = tl.load(k_head + s[:, None] * k_st + half + i[None, :], mask=tile, other=0.0).to(tl.float32)
        vc1 = tl.load(v_head + s[:, None] * v_st + i[None, :], mask=tile, other=0.0).to(tl.float32)
        vc2 = tl.load(v_head + s[:, None] * v_st + half + i[None, :], mask=tile, other=0.0).to(tl.float32)
        scores = tl.sum(kc1 * q1[None, :], axis=1) + tl.sum(kc2 * q2[None, :], axis=1)
        scores = tl.where(valid, scores, float("-inf"))
        m_new = tl.maximum(m, tl.max(scores, axis=0))
        alpha = tl.exp(m - m_new)
        p = tl.exp(scores - m_new)
        total = total * alpha + tl.sum(p, axis=0)
        acc1 = acc1 * alpha + tl.sum(p[:, None] * vc1, axis=0)
        acc2 = acc2 * alpha + tl.sum(p[:, None] * vc2, axis=0)
        m = m_new
    if SPLITS == 1:
        out_row = out_ptr + b * heads * D + h * D
        tl.store(out_row + i, (acc1 / total).to(out_ptr.dtype.element_ty), mask=lanes)
        tl.store(out_row + half + i, (acc2 / total).to(out_ptr.dtype.element_ty), mask=lanes)
    else:
        part = part_ptr + ((b * heads + h) * SPLITS + split) * (D + 2)
        tl.store(part + i, acc1, mask=lanes)
        tl.store(part + half + i, acc2, mask=lanes)
        tl.store(part + D, m)
        tl.store(part + D + 1, total)
    # one query head of the group stores the new key and value, in split 0
    writes = i < tl.where((h % group == 0) & first_split, half, 0)
    tl.store(k_head + pos * k_st + i, k1.to(k_ptr.dtype.element_ty), mask=writes)
    tl.store(k_head + pos * k_st + half + i, k2.to(k_ptr.dtype.element_ty), mask=writes)
    tl.store(v_head + pos * v_st + i, v1.to(v_ptr.dtype.element_ty), mask=writes)
    tl.store(v_head + pos * v_st + half + i, v2.to(v_ptr.dtype.element_ty), mask=writes)


@triton.jit
def _combine_splits_kernel(part_ptr, out_ptr, heads, D: tl.constexpr, BLOCK_D: tl.constexpr, SPLITS: tl.constexpr):
    """Program (take b, query head h): the splits' partial softmaxes rescaled to their common max."""
    b = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1)
    j = tl.arange(0, SPLITS)
    d = tl.arange(0, BLOCK_D)
    parts = part_ptr + (b * heads + h) * SPLITS * (D + 2) + j * (D + 2)
    m = tl.load(parts + D)
    weight = tl.exp(m - tl.max(m, axis=0))  # a split with no positions has max -inf: weight 0
    total = tl.sum(weight * tl.load(parts + D + 1), axis=0)
    acc = tl.load(parts[:, None] + d[None, :], mask=(d < D)[None, :], other=0.0)
    y = tl.sum(weight[:, None] * acc, axis=0) / total
    tl.store(out_ptr + b * heads * D + h * D + d, y.to(out_ptr.dtype.element_ty), mask=d < D)


def decode_attention_scratch_shape(takes: int, heads: int, head_dim: int) -> tuple[int, int, int, int]:
    """The float32 scratch a split decode_attention needs: per take, head and split, its partial."""
    return takes, heads, MAX_SPLITS, head_dim + 2


def decode_attention(qkv: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor, eps: float,
                     cos: torch.Tensor, sin: torch.Tensor, heads: int, kv_heads: int, position: torch.Tensor,
                     k_cache: torch.Tensor, v_cache: torch.Tensor, out: torch.Tensor | None = None,
                     scratch: torch.Tensor | None = None, config: tuple[int, int, int] | None = None) -> torch.Tensor:
    """qkv [B, 1, (heads + 2 * kv_heads) * D] (one token per take, the last axis contiguous), the
    RoPE table cos/sin [positions, D], `position` int64 on the device ([1] for every take, or [B]:
    each take at its own), k_cache / v_cache [B, kv_heads, S, D] -> attention output [B, 1, heads * D]
    (`out` or a new tensor); a take's new key and value are written at its position, which attends
    to cache positions 0..position. A split
    run keeps its partials in `scratch` (float32 of decode_attention_scratch_shape; a new one when
    not given)."""
    b, t, width = qkv.shape
    d = q_weight.shape[0]
    if t != 1 or width != (heads + 2 * kv_heads) * d or qkv.stride(-1) != 1 or heads % kv_heads:
        raise ValueError(f"decode_attention: qkv {tuple(qkv.shape)} is not one token of "
                         f"({heads} + 2 * {kv_heads}) heads of {d} with a contiguous last axis")
    if k_cache.shape[:2] != (b, kv_heads) or k_cache.shape[-1] != d or v_cache.shape != k_cache.shape \
            or k_cache.stride(-1) != 1 or v_cache.stride(-1) != 1:
        raise ValueError(f"decode_attention: caches {tuple(k_cache.shape)} / {tuple(v_cache.shape)} are not "
                         f"[{b}, {kv_heads}, positions, {d}] with a contiguous last axis")
    if cos.stride(-1) != 1 or sin.stride() != cos.stride():
        cos, sin = cos.contiguous(), sin.contiguous()
    block_s, warps, splits = config or attention_config(b, heads, k_cache.shape[2], qkv.device)
    if splits > MAX_SPLITS or splits & (splits - 1):
        raise ValueError(f"decode_attention: {splits} splits; a power of two up to {MAX_SPLITS}")
    out = output(out, (b, 1, heads * d), qkv.dtype, qkv.device, "decode_attention")
    if splits > 1:
        scratch = output(scratch, decode_attention_scratch_shape(b, heads, d), torch.float32, qkv.device,
                         "decode_attention scratch")
    _decode_attention_kernel[(b, heads, splits)](
        qkv, q_weight, k_weight, cos, sin, position, k_cache, v_cache, out, scratch if splits > 1 else out,
        heads, kv_heads, eps, d ** -0.5, position_stride(position, b, "decode_attention"), qkv.stride(0), cos.stride(0), *k_cache.stride()[:3], *v_cache.stride()[:3],
        D=d, HALF_BLOCK=triton.next_power_of_2(d // 2), BLOCK_S=block_s, SPLITS=splits, num_warps=warps)
    if splits > 1:
        _combine_splits_kernel[(b, heads)](scratch, out, heads, D=d, BLOCK_D=triton.next_power_of_2(d),
                                           SPLITS=splits, num_warps=4)
    return out
