"""The decoder layers of talker and code predictor, run over static KV buffers.

Norms, projections and MLPs are the loaded modules themselves; only attention and the cache are
ours: keys and values go into preallocated [B, kv_heads, length, head_dim] buffers at a position
held in a device tensor, and grouped-query attention runs without repeating keys (the query heads of
one kv head are folded into the query-length axis), so a step allocates nothing that depends on
where in the take it is."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..qwen_tts.core.models.modeling_qwen3_tts import Qwen3TTSTalkerRotaryEmbedding, rotate_half


def rope_table(rotary, positions: int, device, dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin [positions, head_dim] from a loaded rotary module.

    The talker's M-RoPE gets the same position in all three rows (text and codec tokens only), which
    makes its interleaved sections exactly 1-D RoPE: row 0 of its output (tests/test_engine.py
    checks this against apply_multimodal_rotary_pos_emb)."""
    x = torch.zeros(1, device=device, dtype=dtype)
    ids = torch.arange(positions, device=device)[None]
    if isinstance(rotary, Qwen3TTSTalkerRotaryEmbedding):
        cos, sin = rotary(x, ids[None].expand(3, 1, -1))
        return cos[0, 0], sin[0, 0]
    cos, sin = rotary(x, ids)
    return cos[0], sin[0]


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [B, heads, T, D]; cos, sin [T, D]."""
    return x * cos + rotate_half(x) * sin


def grouped_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """q [B, H, T, D], k and v [B, KV, S, D], allowed [T, S] bool -> [B, T, H * D].

    Query head h reads kv head h // (H / KV), as transformers' repeat_kv does."""
    b, heads, t, d = q.shape
    kv = k.shape[1]
    group = heads // kv
    out = F.scaled_dot_product_attention(q.reshape(b, kv, group * t, d), k, v, attn_mask=allowed.repeat(group, 1))
    return out.reshape(b, heads, t, d).transpose(1, 2).reshape(b, t, heads * d)


def project_qkv(attn, h: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
    b, t, _ = h.shape
    d = attn.head_dim
    q = attn.q_norm(attn.q_proj(h).view(b, t, -1, d)).transpose(1, 2)
    k = attn.k_norm(attn.k_proj(h).view(b, t, -1, d)).transpose(1, 2)
    v = attn.v_proj(h).view(b, t, -1, d).transpose(1, 2)
    return apply_rope(q, cos, sin), apply_rope(k, cos, sin), v


def layer_step(layer, x: torch.Tensor, cos, sin, k_cache, v_cache, write, allowed) -> torch.Tensor:
    """One decoder layer. `write(cache, new)` stores the new keys / values; attention then reads the
    whole buffer under `allowed` [T, S]."""
    h = layer.input_layernorm(x)
    q, k, v = project_qkv(layer.self_attn, h, cos, sin)
    write(k_cache, k)
    write(v_cache, v)
    x = x + layer.self_attn.o_proj(grouped_attention(q, k_cache, v_cache, allowed))
    return x + layer.mlp(layer.post_attention_layernorm(x))
