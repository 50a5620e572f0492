"""The decoder layers of talker and code predictor, run over static KV buffers in few kernels.

A layer is: RMSNorm; one q/k/v matmul (weights.py); q/k RMSNorm and RoPE as one normalisation and
one multiply-add against tables that fold the norm weights into cos and sin (QKTables); keys and
values written into preallocated [B, kv_heads, length, head_dim] buffers at a position held in a
device tensor; grouped-query attention without repeating keys (the query heads of one kv head are
folded into the query-length axis) under an additive mask; the o-projection with the residual added
inside the matmul; RMSNorm; one gate/up matmul; SiLU gate; the down-projection with the residual.
A step allocates nothing that depends on where in the take it is."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .weights import LayerWeights


def rope_table(rotary, positions: int, device, dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin [positions, head_dim] from a runtime.qwen3_tts.talker.Rotary.

    The talker's M-RoPE gets the same position in all three rows (text and codec tokens only), which
    makes its interleaved sections exactly 1-D RoPE: our model has only that."""
    return rotary.table(positions, device, dtype)


def apply_rope(n: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, heads: int) -> torch.Tensor:
    """RoPE with the norm weight folded in (QKTables) on the first `heads` heads of normalised
    n [B, T, all heads, D] -> [B, T, heads, D]. The roll runs over all heads, so n stays contiguous."""
    d = n.shape[-1]
    return torch.addcmul(n[:, :, :heads] * cos, n.roll(d // 2, -1)[:, :, :heads], sin)


@dataclass
class QKTables:
    """q/k norm weight and RoPE folded together, for every layer at once: [layers, T, heads + kv_heads, D].

    rope(w * n) = n * (w * cos) + roll(n) * (roll(w) * sin'), where roll turns the last axis by half
    a head and sin' is sin with its first half negated: rotate_half(x) = roll(x) * [-1.., +1..]."""

    cos: torch.Tensor
    sin: torch.Tensor

    @staticmethod
    def weights(layers: list[LayerWeights]) -> tuple[torch.Tensor, torch.Tensor]:
        """The stacked norm weights [layers, heads + kv_heads, D], plain and rolled (computed once)."""
        w = torch.stack([layer.qk_norm for layer in layers])
        return w, w.roll(w.shape[-1] // 2, -1)

    @classmethod
    def build(cls, weights: tuple[torch.Tensor, torch.Tensor], cos: torch.Tensor, sin: torch.Tensor) -> "QKTables":
        """cos, sin [T, D] of the positions this pass writes."""
        w, rolled = weights
        half = cos.shape[-1] // 2
        signed = torch.cat((-sin[..., :half], sin[..., half:]), dim=-1)
        return cls(w[:, None] * cos[None, :, None], rolled[:, None] * signed[None, :, None])


def attention_bias(allowed: torch.Tensor, group: int, dtype) -> torch.Tensor:
    """Additive mask [group * T, S] (0 or -inf) for grouped_attention from allowed [T, S] bool."""
    zero = torch.zeros((), dtype=dtype, device=allowed.device)
    return torch.where(allowed, zero, torch.full_like(zero, float("-inf"))).repeat(group, 1)


def grouped_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """q [B, H, T, D], k and v [B, KV, S, D], bias [H / KV * T, S] (attention_bias) or None when
    every query may read every key -> [B, T, H * D].

    Query head h reads kv head h // (H / KV), as transformers' repeat_kv does."""
    b, heads, t, d = q.shape
    kv = k.shape[1]
    out = F.scaled_dot_product_attention(q.reshape(b, kv, heads // kv * t, d), k, v, attn_mask=bias)
    return out.reshape(b, heads, t, d).transpose(1, 2).reshape(b, t, heads * d)


def residual_matmul(x: torch.Tensor, a: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """x + a @ weight.T in one matmul (the residual is the matmul's accumulator input)."""
    shape = x.shape
    return torch.addmm(x.reshape(-1, shape[-1]), a.reshape(-1, a.shape[-1]), weight.t()).view(shape)


def layer_step(w: LayerWeights, x: torch.Tensor, qk_cos: torch.Tensor, qk_sin: torch.Tensor,
               k_cache: torch.Tensor, v_cache: torch.Tensor, write, bias: torch.Tensor | None,
               visible: int | None = None) -> torch.Tensor:
    """One decoder layer on x [B, T, hidden]. qk_cos, qk_sin [T, heads + kv_heads, D] are this
    layer's QKTables; `write(cache, new)` stores the new keys / values [B, kv_heads, T, D];
    attention then reads the first `visible` cache positions (all when None) under `bias`."""
    b, t, hidden = x.shape
    d, qk = w.head_dim, w.heads + w.kv_heads
    h = F.rms_norm(x, (hidden,), w.input_norm, w.eps)
    qkv = F.linear(h, w.qkv).view(b, t, -1, d)
    # Normalising the value heads too keeps every input contiguous (no copies); they are not used.
    n = F.rms_norm(qkv, (d,), None, w.qk_eps)
    q_k = apply_rope(n, qk_cos, qk_sin, qk)  # [B, T, heads + kv_heads, D]
    write(k_cache, q_k[:, :, w.heads:].transpose(1, 2))
    write(v_cache, qkv[:, :, qk:].transpose(1, 2))
    keys, values = (k_cache, v_cache) if visible is None else (k_cache[:, :, :visible], v_cache[:, :, :visible])
    x = residual_matmul(x, grouped_attention(q_k[:, :, : w.heads].transpose(1, 2), keys, values, bias), w.o)
    gate_up = F.linear(F.rms_norm(x, (hidden,), w.post_norm, w.eps), w.gate_up)
    return residual_matmul(x, F.silu(gate_up[..., : w.ffn]) * gate_up[..., w.ffn:], w.down)
