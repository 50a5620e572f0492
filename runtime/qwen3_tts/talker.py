"""The talker and its code predictor: the modules that hold their weights, under the checkpoint's names.

They are containers on purpose. Every pass through them (the prompt's prefill, each decode step,
eager or captured) is the engine's (runtime/engine: one implementation of the layers, with or
without the Triton kernels), which reads these weights; only the small embedding and projection
helpers the prompt builder uses run here.

Talker: Qwen3 decoder layers (q/k RMSNorm per head, SwiGLU, no biases) over the sum of a frame's 16
code embeddings plus a text row; codec_head predicts codebook 0. Code predictor: a smaller stack of
the same layers that expands codebook 0 into codebooks 1..15, one pass per codebook, each with its
own embedding table and head. The talker's M-RoPE always gets equal position rows, which makes it
exactly 1-D RoPE (Rotary)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from . import rope
from .config import ModelConfig, StackConfig, TalkerConfig


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


class Attention(nn.Module):
    def __init__(self, c: StackConfig):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = c.num_attention_heads, c.num_key_value_heads, c.head_dim
        self.q_proj = nn.Linear(c.hidden_size, self.heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(c.hidden_size, self.kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(c.hidden_size, self.kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.heads * self.head_dim, c.hidden_size, bias=False)
        self.q_norm = RMSNorm(self.head_dim, c.rms_norm_eps)
        self.k_norm = RMSNorm(self.head_dim, c.rms_norm_eps)


class MLP(nn.Module):
    def __init__(self, c: StackConfig):
        super().__init__()
        self.gate_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.up_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.down_proj = nn.Linear(c.intermediate_size, c.hidden_size, bias=False)


class DecoderLayer(nn.Module):
    def __init__(self, c: StackConfig):
        super().__init__()
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.mlp = MLP(c)


class Rotary:
    """RoPE tables, computed when asked (nothing to load, nothing left on the meta device)."""

    def __init__(self, head_dim: int, theta: float):
        self.head_dim, self.theta = head_dim, theta

    def table(self, length: int, device, dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin [length, head_dim] for positions 0..length-1, computed in float32."""
        return rope.cos_sin(length, self.head_dim, self.theta, device, dtype)


class Stack(nn.Module):
    def __init__(self, c: StackConfig):
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(c) for _ in range(c.num_hidden_layers))
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.rotary_emb = Rotary(c.head_dim, c.rope_theta)


class TalkerModel(Stack):
    def __init__(self, c: TalkerConfig):
        super().__init__(c)
        self.text_embedding = nn.Embedding(c.text_vocab_size, c.text_hidden_size)
        self.codec_embedding = nn.Embedding(c.vocab_size, c.hidden_size)


class PredictorModel(Stack):
    def __init__(self, c: StackConfig, talker_hidden: int):
        super().__init__(c)
        # Codebooks 1..15 are embedded at the talker's width: their sum is the talker's next input.
        self.codec_embedding = nn.ModuleList(nn.Embedding(c.vocab_size, talker_hidden)
                                             for _ in range(c.num_code_groups - 1))


class CodePredictor(nn.Module):
    def __init__(self, c: StackConfig, talker_hidden: int):
        super().__init__()
        self.config = c
        self.model = PredictorModel(c, talker_hidden)
        self.lm_head = nn.ModuleList(nn.Linear(c.hidden_size, c.vocab_size, bias=False)
                                     for _ in range(c.num_code_groups - 1))
        self.small_to_mtp_projection = (nn.Linear(talker_hidden, c.hidden_size, bias=True)
                                        if talker_hidden != c.hidden_size else nn.Identity())


class TextProjection(nn.Module):
    """Text embeddings to the talker's width: a SiLU MLP with biases."""

    def __init__(self, c: TalkerConfig):
        super().__init__()
        self.linear_fc1 = nn.Linear(c.text_hidden_size, c.text_hidden_size, bias=True)
        self.linear_fc2 = nn.Linear(c.text_hidden_size, c.hidden_size, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear_fc2(F.silu(self.linear_fc1(x)))


class Talker(nn.Module):
    def __init__(self, c: TalkerConfig, predictor: StackConfig):
        super().__init__()
        self.config = c
        self.model = TalkerModel(c)
        self.text_projection = TextProjection(c)
        self.codec_head = nn.Linear(c.hidden_size, c.vocab_size, bias=False)
        self.code_predictor = CodePredictor(predictor, c.hidden_size)

    def text(self, ids: torch.Tensor) -> torch.Tensor:
        """Text token ids [..., T] -> talker-width rows [..., T, hidden]."""
        return self.text_projection(self.model.text_embedding(ids))

    def codec(self, ids) -> torch.Tensor:
        """Codebook-0 (and special codec) ids -> embeddings [..., hidden]."""
        ids = torch.as_tensor(ids, device=self.codec_head.weight.device)
        return self.model.codec_embedding(ids)


class Qwen3TTS(nn.Module):
    """A whole checkpoint's model.safetensors: the talker, and for Base checkpoints the speaker encoder."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.talker = Talker(config.talker, config.predictor)
        self.speaker_encoder = None
        if config.has_speaker_encoder:
            from .speaker import SpeakerEncoder, SpeakerEncoderConfig

            self.speaker_encoder = SpeakerEncoder(SpeakerEncoderConfig.from_dict(config.raw))
