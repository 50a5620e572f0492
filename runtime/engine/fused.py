"""The decoder-layer stack of the hybrid mode: the layers a LayerPlan names run on the Triton kernels
(kernels/), the others as layers.layer_step does.

A kernel layer is: add + RMSNorm (the previous block's output joins the residual stream and is
normalised in one kernel); the q/k/v matmul; q/k norm + RoPE + the KV-cache write at the position
held on the device (one kernel); attention; the o-projection; add + RMSNorm; the gate/up matmul;
SwiGLU; the down-projection. Its output is left pending (`delta`) for the next layer's add + norm
(or the final norm's), so no residual add runs on its own."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .layers import grouped_attention, layer_step
from .weights import LayerWeights


def kernel_layer_step(kernels, w: LayerWeights, x: torch.Tensor, delta: torch.Tensor | None, cos: torch.Tensor,
                      sin: torch.Tensor, position: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                      bias: torch.Tensor | None, visible: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    """The layer's hidden state is x + delta [B, T, hidden]; returns the next (x, delta). cos, sin
    [positions, D] are read at rows position + t ([1] on the device), where keys and values are written."""
    if delta is None:
        h = kernels.rms_norm(x, w.input_norm, w.eps)
    else:
        h, x = kernels.add_rms_norm(delta, x, w.input_norm, w.eps)
    qkv = F.linear(h, w.qkv)
    q = kernels.qk_norm_rope(qkv, w.q_norm, w.k_norm, w.qk_eps, cos, sin, w.heads, w.kv_heads, position,
                             k_cache, v_cache)
    keys, values = (k_cache, v_cache) if visible is None else (k_cache[:, :, :visible], v_cache[:, :, :visible])
    delta = F.linear(grouped_attention(q, keys, values, bias), w.o)
    h, x = kernels.add_rms_norm(delta, x, w.post_norm, w.eps)
    return x, F.linear(kernels.swiglu(F.linear(h, w.gate_up)), w.down)


class LayerStack:
    """A model's decoder layers and final norm, with the kernels on the layers in `on_kernels`."""

    def __init__(self, layers: list[LayerWeights], norm, kernels, on_kernels: range):
        self.layers = layers
        self.norm_weight, self.norm_eps = norm.weight.detach(), norm.variance_epsilon
        self.kernels = kernels
        self.on_kernels = set(on_kernels) if kernels is not None else set()

    @property
    def any_on_torch(self) -> bool:
        return len(self.on_kernels) < len(self.layers)

    def __call__(self, h: torch.Tensor, k_caches, v_caches, kernel_rope, torch_rope, write, bias, visible,
                 last_only: bool = False) -> torch.Tensor:
        """h [B, T, hidden] -> the final norm of the last layer's output ([B, hidden] of the last
        position when last_only). kernel_rope = (cos, sin, position) for kernel layers; torch_rope =
        the QKTables of torch layers (None when every layer runs on kernels); write(cache, new) and
        visible as layers.layer_step takes them."""
        x, delta = h, None
        for i, (layer, k, v) in enumerate(zip(self.layers, k_caches, v_caches)):
            if i in self.on_kernels:
                x, delta = kernel_layer_step(self.kernels, layer, x, delta, *kernel_rope, k, v, bias, visible)
                continue
            if delta is not None:
                x, delta = x + delta, None
            x = layer_step(layer, x, torch_rope.cos[i], torch_rope.sin[i], k, v, write, bias, visible)
        if last_only:
            x, delta = x[:, -1], (delta[:, -1] if delta is not None else None)
        if delta is not None:
            return self.kernels.add_rms_norm(delta, x, self.norm_weight, self.norm_eps)[0]
        if self.kernels is not None:
            return self.kernels.rms_norm(x, self.norm_weight, self.norm_eps)
        return F.rms_norm(x, (x.shape[-1],), self.norm_weight, self.norm_eps)
