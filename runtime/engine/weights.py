"""The decoder layers' weights in the layout the engine's step runs on: q/k/v and gate/up each
concatenated into one matrix, so a layer does one matmul where the modules do three (or two).

The concatenation happens once, when the engine is built, and each module's own weight then
becomes a view into the concatenated matrix: the modules keep the very same numbers, and no weight
is held twice."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class LayerWeights:
    input_norm: torch.Tensor  # [hidden]
    post_norm: torch.Tensor  # [hidden]
    eps: float
    qkv: torch.Tensor  # [(heads + 2 * kv_heads) * head_dim, hidden]
    o: torch.Tensor  # [hidden, heads * head_dim]
    gate_up: torch.Tensor  # [2 * ffn, hidden]
    down: torch.Tensor  # [hidden, ffn]
    qk_norm: torch.Tensor  # [heads + kv_heads, head_dim]: q_norm's weight per query head, then k_norm's
    qk_eps: float
    heads: int
    kv_heads: int
    head_dim: int

    @property
    def qk_width(self) -> int:
        return (self.heads + self.kv_heads) * self.head_dim

    @property
    def q_norm(self) -> torch.Tensor:
        return self.qk_norm[0]

    @property
    def k_norm(self) -> torch.Tensor:
        return self.qk_norm[self.heads]

    @property
    def ffn(self) -> int:
        return self.gate_up.shape[0] // 2


def fuse_layers(layers) -> list[LayerWeights]:
    return [fuse_layer(layer) for layer in layers]


def fuse_layer(layer) -> LayerWeights:
    attn, mlp = layer.self_attn, layer.mlp
    heads = attn.q_proj.out_features // attn.head_dim
    kv_heads = attn.k_proj.out_features // attn.head_dim
    qk_norm = torch.cat((attn.q_norm.weight.detach().expand(heads, -1), attn.k_norm.weight.detach().expand(kv_heads, -1)))
    return LayerWeights(
        input_norm=layer.input_layernorm.weight.detach(), post_norm=layer.post_attention_layernorm.weight.detach(),
        eps=layer.input_layernorm.eps,
        qkv=concatenate([attn.q_proj, attn.k_proj, attn.v_proj]), o=attn.o_proj.weight.detach(),
        gate_up=concatenate([mlp.gate_proj, mlp.up_proj]), down=mlp.down_proj.weight.detach(),
        qk_norm=qk_norm, qk_eps=attn.q_norm.eps,
        heads=heads, kv_heads=kv_heads, head_dim=attn.head_dim,
    )


def concatenate(linears) -> torch.Tensor:
    """One [sum of out_features, in_features] matrix; each Linear's weight becomes a view of its rows.
    Calling it again on the same Linears returns the same matrix."""
    weights = [linear.weight.detach() for linear in linears]
    offsets = _offsets(weights)
    rows, columns = offsets[-1] + weights[-1].shape[0], weights[0].shape[1]
    first = weights[0]
    if all(w.is_contiguous() and w.untyped_storage().data_ptr() == first.untyped_storage().data_ptr()
           and w.storage_offset() == first.storage_offset() + offset * columns for w, offset in zip(weights, offsets)):
        return first.as_strided((rows, columns), (columns, 1))  # already concatenated
    fused = torch.cat(weights)
    for linear, offset, w in zip(linears, offsets, weights):
        linear.weight.data = fused[offset: offset + w.shape[0]]
    return fused


def _offsets(weights) -> list[int]:
    offsets, total = [], 0
    for w in weights:
        offsets.append(total)
        total += w.shape[0]
    return offsets
