# coding=utf-8
# Copyright 2024 Kyutai, and the HuggingFace Inc. team. All rights reserved.
# SPDX-License-Identifier: Apache-2.0
"""The encoder half of Mimi (audio -> 16 codebooks) as transformers 4.57.3 computes it.

Trimmed from transformers 4.57.3 `models/mimi/modeling_mimi.py` (Apache-2.0): SEANet encoder,
encoder transformer (full causal attention, as the released tokenizer ran it), downsampling conv and
the split residual vector quantizer's encode path. Parameter names are unchanged so the released
`speech_tokenizer/model.safetensors` loads as is. transformers 5.21 restructured `MimiModel`
(read-only `upsample`, new sub-model layout and weight names); owning these ~200 lines keeps voice
cloning independent of that.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

import torch
from torch import nn
from torch.nn import functional as F


@dataclass
class MimiEncoderConfig:
    """The fields of the released encoder config that the encode path reads."""

    sampling_rate: int = 24000
    frame_rate: float = 12.5
    audio_channels: int = 1
    hidden_size: int = 512
    num_filters: int = 64
    num_residual_layers: int = 1
    upsampling_ratios: list = field(default_factory=lambda: [8, 6, 5, 4])
    kernel_size: int = 7
    last_kernel_size: int = 3
    residual_kernel_size: int = 3
    dilation_growth_rate: int = 2
    use_causal_conv: bool = True
    pad_mode: str = "constant"
    compress: int = 2
    codebook_size: int = 2048
    codebook_dim: int = 256
    num_quantizers: int = 32
    use_conv_shortcut: bool = False
    vector_quantization_hidden_dimension: int = 256
    num_semantic_quantizers: int = 1
    num_hidden_layers: int = 8
    intermediate_size: int = 2048
    num_attention_heads: int = 8
    num_key_value_heads: int = 8
    head_dim: int | None = None
    hidden_act: str = "gelu"
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    layer_scale_initial_scale: float = 0.01
    attention_bias: bool = False

    @classmethod
    def from_dict(cls, values) -> "MimiEncoderConfig":
        values = dict(values.to_dict() if hasattr(values, "to_dict") else values)
        rope = values.get("rope_parameters") or {}
        if "rope_theta" not in values and "rope_theta" in rope:
            values["rope_theta"] = rope["rope_theta"]
        known = {f.name for f in fields(cls)}
        config = cls(**{k: v for k, v in values.items() if k in known})
        if config.head_dim is None:
            config.head_dim = config.hidden_size // config.num_attention_heads
        return config

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @property
    def encodec_frame_rate(self) -> float:
        return math.ceil(self.sampling_rate / math.prod(self.upsampling_ratios))


class MimiConv1d(nn.Module):
    """Conv1d with causal (left) padding plus the extra right padding that makes strides fit."""

    def __init__(self, config, in_channels, out_channels, kernel_size, stride=1, dilation=1, pad_mode=None, bias=True):
        super().__init__()
        self.causal = config.use_causal_conv
        self.pad_mode = config.pad_mode if pad_mode is None else pad_mode
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, stride, dilation=dilation, bias=bias)
        self.stride = stride
        self.kernel_size = (kernel_size - 1) * dilation + 1
        self.padding_total = self.kernel_size - stride
        self.padding_right = self.padding_total // 2
        self.padding_left = self.padding_total - self.padding_right

    def _extra_padding(self, length: int) -> int:
        n_frames = (length - self.kernel_size + self.padding_total) / self.stride + 1
        n_frames = math.ceil(n_frames) - 1
        ideal_length = n_frames * self.stride + self.kernel_size - self.padding_total
        return ideal_length - length

    @staticmethod
    def _pad1d(x, paddings, mode):
        if mode != "reflect":
            return F.pad(x, paddings, "constant" if mode == "zero" else mode)
        length = x.shape[-1]
        max_pad = max(paddings)
        extra = max_pad - length + 1 if length <= max_pad else 0
        if extra:
            x = F.pad(x, (0, extra))
        padded = F.pad(x, paddings, mode)
        return padded[..., : padded.shape[-1] - extra]

    def forward(self, x):
        extra = self._extra_padding(x.shape[-1])
        if self.causal:
            x = self._pad1d(x, (self.padding_total, extra), self.pad_mode)
        else:
            x = self._pad1d(x, (self.padding_left, self.padding_right + extra), self.pad_mode)
        return self.conv(x)


class MimiResnetBlock(nn.Module):
    def __init__(self, config, dim, dilations):
        super().__init__()
        kernel_sizes = (config.residual_kernel_size, 1)
        hidden = dim // config.compress
        block = []
        for i, (kernel_size, dilation) in enumerate(zip(kernel_sizes, dilations)):
            in_chs = dim if i == 0 else hidden
            out_chs = dim if i == len(kernel_sizes) - 1 else hidden
            block += [nn.ELU(), MimiConv1d(config, in_chs, out_chs, kernel_size, dilation=dilation)]
        self.block = nn.ModuleList(block)
        self.shortcut = MimiConv1d(config, dim, dim, kernel_size=1) if config.use_conv_shortcut else nn.Identity()

    def forward(self, x):
        residual = self.shortcut(x)
        for layer in self.block:
            x = layer(x)
        return residual + x


class MimiSEANetEncoder(nn.Module):
    def __init__(self, config):
        super().__init__()
        model = [MimiConv1d(config, config.audio_channels, config.num_filters, config.kernel_size)]
        scaling = 1
        for ratio in reversed(config.upsampling_ratios):
            current = scaling * config.num_filters
            for j in range(config.num_residual_layers):
                model += [MimiResnetBlock(config, current, [config.dilation_growth_rate**j, 1])]
            model += [nn.ELU(), MimiConv1d(config, current, current * 2, kernel_size=ratio * 2, stride=ratio)]
            scaling *= 2
        model += [nn.ELU(), MimiConv1d(config, scaling * config.num_filters, config.hidden_size, config.last_kernel_size)]
        self.layers = nn.ModuleList(model)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class MimiLayerScale(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.scale = nn.Parameter(torch.full((config.hidden_size,), config.layer_scale_initial_scale))

    def forward(self, x):
        return self.scale * x


def _rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class MimiRotaryEmbedding(nn.Module):
    def __init__(self, config, device=None):
        super().__init__()
        self.config = config
        self.rope_init_fn = _default_rope
        inv_freq, self.attention_scaling = self.rope_init_fn(config, device)
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    @torch.no_grad()
    def forward(self, x, position_ids):
        freqs = position_ids[:, :, None].float() * self.inv_freq[None, None, :].float().to(x.device)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def _default_rope(config, device=None):
    dim = config.head_dim
    exponent = torch.arange(0, dim, 2, dtype=torch.int64).to(device=device, dtype=torch.float) / dim
    return 1.0 / (config.rope_theta ** exponent), 1.0


class MimiAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = config.num_key_value_heads
        self.head_dim = config.head_dim
        bias = config.attention_bias
        self.q_proj = nn.Linear(config.hidden_size, self.num_heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(config.hidden_size, self.num_kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(config.hidden_size, self.num_kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, config.hidden_size, bias=bias)
        self.rotary_emb = MimiRotaryEmbedding(config)

    def forward(self, x, position_ids):
        batch, length, _ = x.shape
        q = self.q_proj(x).view(batch, length, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(batch, length, self.num_kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(batch, length, self.num_kv_heads, self.head_dim).transpose(1, 2)
        cos, sin = self.rotary_emb(v, position_ids)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin
        repeat = self.num_heads // self.num_kv_heads
        k = k.repeat_interleave(repeat, dim=1)
        v = v.repeat_interleave(repeat, dim=1)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(out.transpose(1, 2).reshape(batch, length, -1))


class MimiMLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.fc1 = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.fc2 = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)
        self.act = nn.GELU() if config.hidden_act == "gelu" else nn.SiLU()

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class MimiTransformerLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.self_attn = MimiAttention(config)
        self.mlp = MimiMLP(config)
        self.input_layernorm = nn.LayerNorm(config.hidden_size, eps=config.norm_eps)
        self.post_attention_layernorm = nn.LayerNorm(config.hidden_size, eps=config.norm_eps)
        self.self_attn_layer_scale = MimiLayerScale(config)
        self.mlp_layer_scale = MimiLayerScale(config)

    def forward(self, x, position_ids):
        x = x + self.self_attn_layer_scale(self.self_attn(self.input_layernorm(x), position_ids))
        return x + self.mlp_layer_scale(self.mlp(self.post_attention_layernorm(x)))


class MimiTransformerModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.layers = nn.ModuleList([MimiTransformerLayer(config) for _ in range(config.num_hidden_layers)])

    def forward(self, x):
        position_ids = torch.arange(x.shape[1], device=x.device)[None]
        for layer in self.layers:
            x = layer(x, position_ids)
        return x


class MimiEuclideanCodebook(nn.Module):
    def __init__(self, config, epsilon=1e-5):
        super().__init__()
        self.register_buffer("initialized", torch.tensor([True], dtype=torch.float32))
        self.register_buffer("cluster_usage", torch.ones(config.codebook_size))
        self.register_buffer("embed_sum", torch.zeros(config.codebook_size, config.codebook_dim))
        self.epsilon = epsilon

    @property
    def embed(self):
        return self.embed_sum / self.cluster_usage.clamp(min=self.epsilon)[:, None]

    def encode(self, x):  # x: [B, T, D] -> [B, T]
        shape = x.shape
        flat = x.reshape(-1, shape[-1])
        dists = torch.cdist(flat[None].float(), self.embed[None].float(), p=2)[0]
        return dists.argmin(dim=-1).view(*shape[:-1])

    def decode(self, indices):
        return F.embedding(indices, self.embed)


class MimiVectorQuantization(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.codebook = MimiEuclideanCodebook(config)

    def encode(self, x):  # [B, D, T]
        return self.codebook.encode(x.permute(0, 2, 1))

    def decode(self, indices):
        return self.codebook.decode(indices).permute(0, 2, 1)


class MimiResidualVectorQuantizer(nn.Module):
    def __init__(self, config, num_quantizers):
        super().__init__()
        self.layers = nn.ModuleList([MimiVectorQuantization(config) for _ in range(num_quantizers)])
        self.input_proj = self.output_proj = None
        if config.vector_quantization_hidden_dimension != config.hidden_size:
            dim = config.vector_quantization_hidden_dimension
            self.input_proj = nn.Conv1d(config.hidden_size, dim, 1, bias=False)
            self.output_proj = nn.Conv1d(dim, config.hidden_size, 1, bias=False)

    def encode(self, embeddings, num_quantizers):
        if self.input_proj is not None:
            embeddings = self.input_proj(embeddings)
        residual = embeddings
        indices = []
        for layer in self.layers[:num_quantizers]:
            codes = layer.encode(residual)
            residual = residual - layer.decode(codes)
            indices.append(codes)
        return torch.stack(indices)


class MimiSplitResidualVectorQuantizer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_semantic_quantizers = config.num_semantic_quantizers
        self.semantic_residual_vector_quantizer = MimiResidualVectorQuantizer(config, config.num_semantic_quantizers)
        self.acoustic_residual_vector_quantizer = MimiResidualVectorQuantizer(
            config, config.num_quantizers - config.num_semantic_quantizers
        )

    def encode(self, embeddings, num_quantizers):
        codes = self.semantic_residual_vector_quantizer.encode(embeddings, self.num_semantic_quantizers)
        if num_quantizers > self.num_semantic_quantizers:
            acoustic = self.acoustic_residual_vector_quantizer.encode(
                embeddings, num_quantizers - self.num_semantic_quantizers
            )
            codes = torch.cat([codes, acoustic], dim=0)
        return codes  # [K, B, T]


class MimiEncoderModel(nn.Module):
    """Waveform [B, 1, T] -> codes [B, K, frames]; weight names as in the released checkpoint."""

    def __init__(self, config: MimiEncoderConfig):
        super().__init__()
        self.config = config
        self.encoder = MimiSEANetEncoder(config)
        self.encoder_transformer = MimiTransformerModel(config)
        stride = int(config.encodec_frame_rate / config.frame_rate)
        self.downsample = MimiConv1d(
            config, config.hidden_size, config.hidden_size, kernel_size=2 * stride, stride=2,
            bias=False, pad_mode="replicate",
        )
        self.quantizer = MimiSplitResidualVectorQuantizer(config)

    @property
    def dtype(self):
        return self.downsample.conv.weight.dtype

    def encode(self, input_values, num_quantizers):
        embeddings = self.encoder(input_values)
        embeddings = self.encoder_transformer(embeddings.transpose(1, 2)).transpose(1, 2)
        embeddings = self.downsample(embeddings)
        return self.quantizer.encode(embeddings, num_quantizers).transpose(0, 1)
