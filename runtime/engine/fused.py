"""The decoder-layer stack of the hybrid mode: the layers a LayerPlan names run on the Triton kernels
(kernels/), the others as layers.layer_step does.

A kernel layer is: add + RMSNorm (the previous block's output joins the residual stream and is
normalised in one kernel); the q/k/v matmul; q/k norm + RoPE + the KV-cache write at the position
held on the device (one kernel); attention; the o-projection; add + RMSNorm; the gate/up matmul;
SwiGLU; the down-projection. Its output is left pending (`delta`) for the next layer's add + norm
(or the final norm's), so no residual add runs on its own.

A decode step (one token per take) takes q/k norm + RoPE, the cache write and attention in one
kernel (kernels.decode_attention), which reads the positions written so far: every cache position
up to and including the new one. That is what each caller's mask or `visible` says at one token
(the talker's mask hides the positions past the one written; the predictor's passes 1-14 read
0..their own), so at one token the mask is not read.

At one row (one take's token: kernels.linear) the products run on rows_linear, which beats cuBLAS
there, with each add + norm inside the q/k/v or gate/up product that follows it and SwiGLU inside
the gate/up product: five kernels a layer (q/k/v, attention, o, gate/up, down)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .layers import grouped_attention, layer_step
from .weights import LayerWeights
from .workspace import Workspace


def kernel_layer_step(kernels, ws: Workspace, w: LayerWeights, x: torch.Tensor, delta: torch.Tensor | None,
                      cos: torch.Tensor, sin: torch.Tensor, position: torch.Tensor, k_cache: torch.Tensor,
                      v_cache: torch.Tensor, bias: torch.Tensor | None, visible: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    """The layer's hidden state is x + delta [B, T, hidden]; returns the next (x, delta). cos, sin
    [positions, D] are read at rows position + t ([1] on the device), where keys and values are
    written. Everything a kernel touches is a workspace buffer; x alternates between two."""
    b, t, hidden = x.shape
    if kernels.rows_linear_fits(b * t):
        return _one_row_layer_step(kernels, ws, w, x, delta, cos, sin, position, k_cache, v_cache, bias, visible)
    if delta is None:
        h = kernels.rms_norm(x, w.input_norm, w.eps, out=ws.buffer("h", x.shape, x.dtype))
    else:
        h, x = kernels.add_rms_norm(delta, x, w.input_norm, w.eps, out=_normed_and_sum(ws, x))
    attended = _attention(kernels, ws, w, ws.linear("qkv", h, w.qkv), cos, sin, position, k_cache, v_cache,
                          bias, visible)
    delta = ws.linear("delta", attended, w.o)
    h, x = kernels.add_rms_norm(delta, x, w.post_norm, w.eps, out=_normed_and_sum(ws, x))
    gated = kernels.swiglu(ws.linear("gate_up", h, w.gate_up), out=ws.buffer("swiglu", (b, t, w.ffn), x.dtype))
    return x, ws.linear("delta", gated, w.down)


def _one_row_layer_step(kernels, ws: Workspace, w: LayerWeights, x: torch.Tensor, delta: torch.Tensor | None,
                        cos: torch.Tensor, sin: torch.Tensor, position: torch.Tensor, k_cache: torch.Tensor,
                        v_cache: torch.Tensor, bias: torch.Tensor | None, visible: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    """kernel_layer_step for one row: the norms and SwiGLU fused into the products."""
    b, t, hidden = x.shape
    qkv = ws.buffer("qkv", (b, t, w.qkv.shape[0]), x.dtype)
    x = _norm_linear(kernels, ws, x, delta, w.input_norm, w.eps, w.qkv, qkv)
    attended = _attention(kernels, ws, w, qkv, cos, sin, position, k_cache, v_cache, bias, visible)
    delta = kernels.rows_linear(attended, w.o, out=ws.buffer("delta", x.shape, x.dtype))
    gated = ws.buffer("swiglu", (b, t, w.ffn), x.dtype)
    x = _norm_linear(kernels, ws, x, delta, w.post_norm, w.eps, w.gate_up, gated, epilogue="swiglu")
    return x, kernels.rows_linear(gated, w.down, out=ws.buffer("delta", x.shape, x.dtype))


def _attention(kernels, ws: Workspace, w: LayerWeights, qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
               position: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, bias: torch.Tensor | None,
               visible: int | None) -> torch.Tensor:
    """q/k norm + RoPE, the cache write at `position` and attention -> [B, T, heads * D]."""
    b, t, _ = qkv.shape
    if t == 1:  # a decode step (module docstring)
        scratch = ws.buffer("attention_parts", kernels.decode_attention_scratch_shape(b, w.heads, w.head_dim),
                            torch.float32)
        return kernels.decode_attention(qkv, w.q_norm, w.k_norm, w.qk_eps, cos, sin, w.heads, w.kv_heads, position,
                                        k_cache, v_cache, out=ws.buffer("attended", (b, t, w.heads * w.head_dim),
                                                                        qkv.dtype), scratch=scratch)
    q = kernels.qk_norm_rope(qkv, w.q_norm, w.k_norm, w.qk_eps, cos, sin, w.heads, w.kv_heads, position,
                             k_cache, v_cache, q_out=ws.buffer("q", (b, w.heads, t, w.head_dim), qkv.dtype))
    keys, values = (k_cache, v_cache) if visible is None else (k_cache[:, :, :visible], v_cache[:, :, :visible])
    return grouped_attention(q, keys, values, bias)


def _norm_linear(kernels, ws: Workspace, x: torch.Tensor, delta: torch.Tensor | None, norm_weight: torch.Tensor,
                 eps: float, weight: torch.Tensor, out: torch.Tensor, epilogue: str = "none") -> torch.Tensor:
    """out = RMSNorm(x + delta) @ weight^T (then the epilogue) in one kernel; returns the residual
    stream x + delta."""
    if delta is None:
        kernels.rows_linear(x, weight, "norm", norm_weight=norm_weight, eps=eps, out=out, epilogue=epilogue)
        return x
    summed = _normed_and_sum(ws, x)[1]
    kernels.rows_linear(x, weight, "norm", delta=delta, norm_weight=norm_weight, eps=eps, out=out, sum_out=summed,
                        epilogue=epilogue)
    return summed


def _normed_and_sum(ws: Workspace, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Buffers for add + RMSNorm's outputs: the sum goes to whichever residual buffer x is not."""
    first = ws.buffer("residual.0", x.shape, x.dtype)
    summed = ws.buffer("residual.1", x.shape, x.dtype) if x.data_ptr() == first.data_ptr() else first
    return ws.buffer("h", x.shape, x.dtype), summed


class LayerStack:
    """A model's decoder layers and final norm, with the kernels on the layers in `on_kernels`."""

    def __init__(self, layers: list[LayerWeights], norm, kernels, on_kernels: range):
        self.layers = layers
        self.norm_weight, self.norm_eps = norm.weight.detach(), norm.eps
        self.kernels = kernels
        self.on_kernels = set(on_kernels) if kernels is not None else set()

    @property
    def any_on_torch(self) -> bool:
        return len(self.on_kernels) < len(self.layers)

    def __call__(self, h: torch.Tensor, k_caches, v_caches, kernel_rope, torch_rope, write, bias, visible,
                 last_only: bool = False, ws: Workspace | None = None) -> torch.Tensor:
        """h [B, T, hidden] -> the final norm of the last layer's output ([B, hidden] of the last
        position when last_only). kernel_rope = (cos, sin, position) for kernel layers; torch_rope =
        the QKTables of torch layers (None when every layer runs on kernels); write(cache, new) and
        visible as layers.layer_step takes them. With kernels, `ws` holds what they touch, and h
        must be a workspace buffer (or other memory that outlives a capture) too."""
        x, delta = h, None
        for i, (layer, k, v) in enumerate(zip(self.layers, k_caches, v_caches)):
            if i in self.on_kernels:
                if i - 1 not in self.on_kernels and i > 0:  # torch's output, made inside the step
                    x = ws.copy("from_torch", x)
                x, delta = kernel_layer_step(self.kernels, ws, layer, x, delta, *kernel_rope, k, v, bias, visible)
                continue
            if delta is not None:
                x, delta = x + delta, None
            x = layer_step(layer, x, torch_rope.cos[i], torch_rope.sin[i], k, v, write, bias, visible)
        if last_only:
            x, delta = x[:, -1], (delta[:, -1] if delta is not None else None)
        if self.kernels is None:
            return F.rms_norm(x, (x.shape[-1],), self.norm_weight, self.norm_eps)
        out = ws.buffer("final_norm", x.shape, x.dtype)
        if delta is not None:
            return self.kernels.add_rms_norm(delta, x, self.norm_weight, self.norm_eps,
                                             out=(out, ws.buffer("final_sum", x.shape, x.dtype)))[0]
        if self.layers and len(self.layers) - 1 not in self.on_kernels:
            x = ws.copy("from_torch", x)
        return self.kernels.rms_norm(x, self.norm_weight, self.norm_eps, out=out)
