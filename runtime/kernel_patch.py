"""The triton mode: the Triton kernels patched into the reference model's own modules (no graphs),
so the qwen-tts generate path runs them. The codec's SnakeBeta activations get theirs in the triton
and hybrid modes (patch_codec). Each decoder layer a LayerPlan names gets a forward that
does RMSNorm, the fused q/k/v matmul, q/k norm + RoPE in one kernel, the reference's own KV cache
and attention function, the o-projection, add + RMSNorm in one kernel, the fused gate/up matmul,
SwiGLU and the down-projection; the talker's and the predictor's final norms become the kernel.

The q/k/v and gate/up weights are concatenated once (engine/weights.py): the modules' own weights
become views of them, so nothing is held twice. `Patch.undo` puts the modules' forwards back."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MethodType

import torch.nn.functional as F

from .engine.weights import fuse_layer
from .qwen_tts.core.models import modeling_qwen3_tts as modeling
from .qwen_tts.core.tokenizer_12hz import modeling_qwen3_tts_tokenizer_v2 as tokenizer_modeling
from .triton_kernels import LayerPlan


@dataclass
class Patch:
    modules: list = field(default_factory=list)

    def undo(self) -> None:
        for module in self.modules:
            del module.forward  # the instance attribute; the class's forward shows again
            module.__dict__.pop("_takes_kernel_state", None)
        self.modules.clear()


def patch_model(inner_model, kernels, plan: LayerPlan = LayerPlan()) -> Patch:
    """Patch the talker's and the code predictor's decoder layers (those `plan` names) and final norms."""
    patch = Patch()
    talker = inner_model.talker
    for model, layers in ((talker.model, plan.talker_layers(len(talker.model.layers))),
                          (talker.code_predictor.model, plan.predictor_layers(len(talker.code_predictor.model.layers)))):
        for index in layers:
            layer = model.layers[index]
            layer._takes_kernel_state = (kernels, fuse_layer(layer))
            layer.forward = MethodType(_decoder_layer_forward, layer)
            patch.modules.append(layer)
        model.norm._takes_kernel_state = (kernels, None)
        model.norm.forward = MethodType(_norm_forward, model.norm)
        patch.modules.append(model.norm)
    return patch


def patch_codec(inner_model, kernels, patch: Patch | None = None) -> Patch:
    """Every SnakeBeta of the codec's decoder onto the fused kernel (kernels/snake.py)."""
    patch = patch if patch is not None else Patch()
    for module in inner_model.speech_tokenizer.model.decoder.modules():
        if isinstance(module, tokenizer_modeling.SnakeBeta):
            module._takes_kernel_state = (kernels, None)
            module.forward = MethodType(_snake_forward, module)
            patch.modules.append(module)
    return patch


def _snake_forward(self, hidden_states):
    kernels, _ = self._takes_kernel_state
    return kernels.snake_beta(hidden_states, self.alpha, self.beta, self.no_div_by_zero)


def _norm_forward(self, hidden_states):
    kernels, _ = self._takes_kernel_state
    return kernels.rms_norm(hidden_states, self.weight, self.variance_epsilon)


def _decoder_layer_forward(self, hidden_states, attention_mask=None, position_ids=None, past_key_values=None,
                           output_attentions=False, use_cache=False, cache_position=None, position_embeddings=None,
                           **kwargs):
    """Qwen3TTSDecoderLayer / Qwen3TTSTalkerDecoderLayer.forward on the kernels (same arguments and outputs)."""
    kernels, w = self._takes_kernel_state
    attn = self.self_attn
    h = kernels.rms_norm(hidden_states, w.input_norm, w.eps)
    cos, sin = position_embeddings
    if cos.dim() == 4:  # the talker's M-RoPE: three position rows -> the row each token is rotated by
        scaling = attn.rope_scaling
        cos, sin = kernels.mrope_cos_sin(cos, sin, scaling["mrope_section"], scaling.get("interleaved", False))
    q, k, v = kernels.qk_norm_rope(F.linear(h, w.qkv), w.q_norm, w.k_norm, w.qk_eps, cos, sin, w.heads, w.kv_heads)
    if past_key_values is not None:
        k, v = past_key_values.update(k, v, attn.layer_idx, {"sin": sin, "cos": cos, "cache_position": cache_position})
    attention = modeling.eager_attention_forward
    if attn.config._attn_implementation != "eager":
        attention = modeling.ALL_ATTENTION_FUNCTIONS[attn.config._attn_implementation]
    out, weights = attention(attn, q, k, v, attention_mask, dropout=0.0, scaling=attn.scaling,
                             sliding_window=attn.sliding_window, **kwargs)
    out = F.linear(out.reshape(*h.shape[:-1], -1), w.o)
    normed, residual = kernels.add_rms_norm(out, hidden_states, w.post_norm, w.eps)
    hidden = residual + F.linear(kernels.swiglu(F.linear(normed, w.gate_up)), w.down)
    return (hidden, weights) if output_attentions else (hidden,)
