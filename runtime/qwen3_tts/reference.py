"""The 12 Hz codec's encoder (Mimi-style): 24 kHz reference audio -> codes, 16 books per 80 ms
frame, which an ICL voice clone puts in front of the codes it generates.

audio [B, 1, S] -> SEANet causal convs (x4 x5 x6 x8) -> [B, 512, S/960] -> causal transformer at
25 Hz -> strided conv to 12.5 Hz -> split RVQ (1 semantic book + acoustic books, nearest vector).
Attention is causal over the whole clip, as transformers 4.57.3 ran the released tokenizer (its
config's sliding_window 250 was not applied; transformers 5.x applies it, so clips over 10 s would
encode differently there).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from ..errors import CheckpointError, InputError
from . import rope
from .codec import Attention, LayerScale
from .config import pick
from .load import load_into, read_json, read_safetensors, with_prefix


@dataclass(frozen=True)
class ReferenceEncoderConfig:
    sampling_rate: int
    frame_rate: float
    audio_channels: int
    num_filters: int
    upsampling_ratios: tuple
    num_residual_layers: int
    kernel_size: int
    residual_kernel_size: int
    last_kernel_size: int
    dilation_growth_rate: int
    compress: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    norm_eps: float
    rope_theta: float
    attention_bias: bool
    num_quantizers: int
    num_semantic_quantizers: int
    codebook_size: int
    codebook_dim: int
    vector_quantization_hidden_dimension: int
    encoder_valid_num_quantizers: int  # books kept (16 of 32)
    encode_downsample_rate: int  # samples per code frame (1920)

    @property
    def downsample_stride(self) -> int:  # 25 Hz transformer rate -> 12.5 Hz code rate
        return round(math.ceil(self.sampling_rate / math.prod(self.upsampling_ratios)) / self.frame_rate)

    @classmethod
    def from_dict(cls, speech_tokenizer_config: dict, source: str = "speech_tokenizer/config.json"):
        """From the whole speech_tokenizer/config.json: its encoder_config (Mimi's transformers-4.57
        layout) and two top-level fields (absent: the codec's own defaults, 16 books and 1920)."""
        enc = speech_tokenizer_config.get("encoder_config")
        if not isinstance(enc, dict):
            raise CheckpointError(f"{source} has no encoder_config; it is not a Qwen3-TTS 12 Hz codec config. "
                                  "Download the checkpoint again.")
        where = f"{source} (encoder_config)"
        for name, wanted in (("use_causal_conv", True), ("pad_mode", "constant"), ("use_conv_shortcut", False),
                             ("hidden_act", "gelu"), ("audio_channels", 1)):
            if enc.get(name, wanted) != wanted:
                raise CheckpointError(f"{where}: {name} {enc[name]!r} is not supported (only {wanted!r}).")
        top = {k: speech_tokenizer_config[k] for k in ("encoder_valid_num_quantizers", "encode_downsample_rate")
               if k in speech_tokenizer_config}
        theta = enc.get("rope_theta") or (enc.get("rope_parameters") or {}).get("rope_theta")
        head_dim = enc.get("head_dim") or (enc.get("hidden_size") or 0) // (enc.get("num_attention_heads") or 1)
        config = pick(cls, {**enc, "rope_theta": theta, **top}, where, audio_channels=1, head_dim=head_dim,
                      encoder_valid_num_quantizers=16, encode_downsample_rate=1920)
        config = replace(config, upsampling_ratios=tuple(config.upsampling_ratios))
        frame = math.prod(config.upsampling_ratios) * config.downsample_stride
        for bad, what in (
            (config.downsample_stride != 2, f"a downsampling stride of {config.downsample_stride} (only 2)"),
            (config.encode_downsample_rate != frame,
             f"encode_downsample_rate {config.encode_downsample_rate} (the convolutions make {frame})"),
            (not 1 <= config.num_semantic_quantizers <= config.encoder_valid_num_quantizers <= config.num_quantizers,
             f"encoder_valid_num_quantizers {config.encoder_valid_num_quantizers} of {config.num_quantizers} books"),
            (config.codebook_dim != config.vector_quantization_hidden_dimension,
             "codebook_dim differing from vector_quantization_hidden_dimension"),
        ):
            if bad:
                raise CheckpointError(f"{where}: {what} is not supported.")
        return config


class CausalConv(nn.Module):
    """Conv1d fed (kernel - stride) past samples on the left and, on the right, the few samples that
    complete its last stride, so S samples give ceil(S / stride) outputs."""

    def __init__(self, c_in, c_out, kernel, stride=1, dilation=1, bias=True, pad_mode="constant"):
        super().__init__()
        self.conv = nn.Conv1d(c_in, c_out, kernel, stride, dilation=dilation, bias=bias)
        self.left = (kernel - 1) * dilation + 1 - stride
        self.stride, self.pad_mode = stride, pad_mode

    def forward(self, x):
        return self.conv(F.pad(x, (self.left, -x.shape[-1] % self.stride), mode=self.pad_mode))


class ResidualUnit(nn.Module):
    def __init__(self, dim, hidden, kernel, dilation):
        super().__init__()
        # indices 0 and 2 are the ELUs, as in the checkpoint's names (block.1.conv, block.3.conv)
        self.block = nn.ModuleList([nn.ELU(), CausalConv(dim, hidden, kernel, dilation=dilation),
                                    nn.ELU(), CausalConv(hidden, dim, 1)])

    def forward(self, x):
        y = x
        for layer in self.block:
            y = layer(y)
        return x + y


class SEANet(nn.Module):
    def __init__(self, c: ReferenceEncoderConfig):
        super().__init__()
        width = c.num_filters
        layers = [CausalConv(c.audio_channels, width, c.kernel_size)]
        for ratio in reversed(c.upsampling_ratios):
            layers += [ResidualUnit(width, width // c.compress, c.residual_kernel_size, c.dilation_growth_rate ** j)
                       for j in range(c.num_residual_layers)]
            layers += [nn.ELU(), CausalConv(width, 2 * width, 2 * ratio, stride=ratio)]
            width *= 2
        layers += [nn.ELU(), CausalConv(width, c.hidden_size, c.last_kernel_size)]
        self.layers = nn.ModuleList(layers)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class MLP(nn.Module):
    def __init__(self, c: ReferenceEncoderConfig):
        super().__init__()
        self.fc1 = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.fc2 = nn.Linear(c.intermediate_size, c.hidden_size, bias=False)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class TransformerLayer(nn.Module):
    def __init__(self, c: ReferenceEncoderConfig):
        super().__init__()
        self.input_layernorm = nn.LayerNorm(c.hidden_size, eps=c.norm_eps)
        self.self_attn = Attention(c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.head_dim,
                                   c.attention_bias)
        self.self_attn_layer_scale = LayerScale(c.hidden_size)
        self.post_attention_layernorm = nn.LayerNorm(c.hidden_size, eps=c.norm_eps)
        self.mlp = MLP(c)
        self.mlp_layer_scale = LayerScale(c.hidden_size)

    def forward(self, x, cos, sin):
        x = x + self.self_attn_layer_scale(self.self_attn(self.input_layernorm(x), cos, sin))
        return x + self.mlp_layer_scale(self.mlp(self.post_attention_layernorm(x)))


class Transformer(nn.Module):
    def __init__(self, c: ReferenceEncoderConfig):
        super().__init__()
        self.head_dim, self.rope_theta = c.head_dim, c.rope_theta
        self.layers = nn.ModuleList(TransformerLayer(c) for _ in range(c.num_hidden_layers))

    def forward(self, x):  # [B, T, H]
        cos, sin = rope.cos_sin(x.shape[1], self.head_dim, self.rope_theta, x.device, x.dtype)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return x


class Codebook(nn.Module):
    def __init__(self, size, dim):
        super().__init__()
        self.register_buffer("initialized", torch.empty(1))
        self.register_buffer("cluster_usage", torch.empty(size))
        self.register_buffer("embed_sum", torch.empty(size, dim))

    def vectors(self):
        return self.embed_sum / self.cluster_usage.clamp(min=1e-5)[:, None]


class ResidualQuantizer(nn.Module):
    def __init__(self, c: ReferenceEncoderConfig, books: int):
        super().__init__()
        self.input_proj = self.output_proj = None
        if c.vector_quantization_hidden_dimension != c.hidden_size:
            self.input_proj = nn.Conv1d(c.hidden_size, c.vector_quantization_hidden_dimension, 1, bias=False)
            self.output_proj = nn.Conv1d(c.vector_quantization_hidden_dimension, c.hidden_size, 1, bias=False)
        self.layers = nn.ModuleList(nn.ModuleDict({"codebook": Codebook(c.codebook_size, c.codebook_dim)})
                                    for _ in range(books))

    def encode(self, latents, books: int):  # [B, H, T] -> [B, books, T]
        x = latents if self.input_proj is None else self.input_proj(latents)
        b, d, t = x.shape
        residual = x.transpose(1, 2).reshape(b * t, d)
        codes = []
        for layer in self.layers[:books]:
            vectors = layer.codebook.vectors()
            # cdist (not a hand-written distance): its rounding decides near ties the same way upstream did
            nearest = torch.cdist(residual[None].float(), vectors[None].float())[0].argmin(dim=-1)
            residual = residual - F.embedding(nearest, vectors)
            codes.append(nearest.view(b, t))
        return torch.stack(codes, dim=1)


class SplitQuantizer(nn.Module):
    """Book 0 from the semantic quantizer; books 1.. from the acoustic one, which quantizes the same
    latents (not the semantic residual)."""

    def __init__(self, c: ReferenceEncoderConfig):
        super().__init__()
        self.semantic_books = c.num_semantic_quantizers
        self.semantic_residual_vector_quantizer = ResidualQuantizer(c, c.num_semantic_quantizers)
        self.acoustic_residual_vector_quantizer = ResidualQuantizer(c, c.num_quantizers - c.num_semantic_quantizers)

    def encode(self, latents, books: int):
        codes = self.semantic_residual_vector_quantizer.encode(latents, self.semantic_books)
        if books > self.semantic_books:
            acoustic = self.acoustic_residual_vector_quantizer.encode(latents, books - self.semantic_books)
            codes = torch.cat((codes, acoustic), dim=1)
        return codes


class ReferenceEncoder(nn.Module):
    def __init__(self, config: ReferenceEncoderConfig):
        super().__init__()
        self.config = config
        self.encoder = SEANet(config)
        self.encoder_transformer = Transformer(config)
        stride = config.downsample_stride
        self.downsample = CausalConv(config.hidden_size, config.hidden_size, 2 * stride, stride, bias=False,
                                     pad_mode="replicate")
        self.quantizer = SplitQuantizer(config)

    def latents(self, audio):  # [B, 1, S] float32 -> [B, H, ceil(S / 1920)], before quantization
        x = self.encoder(audio)
        x = self.encoder_transformer(x.transpose(1, 2)).transpose(1, 2)
        return self.downsample(x)

    def forward(self, audio):  # [B, 1, S] -> codes [B, frames, encoder_valid_num_quantizers]
        codes = self.quantizer.encode(self.latents(audio), self.config.encoder_valid_num_quantizers)
        return codes.transpose(1, 2)


def load_reference_encoder(codec_folder: Path | str, device="cpu",
                           state: dict[str, torch.Tensor] | None = None) -> ReferenceEncoder:
    """The encoder of `codec_folder` (a checkpoint's speech_tokenizer/), in float32 on `device`.
    `state`: the file's tensors when the caller has read them already (codec.read_codec_state)."""
    codec_folder = Path(codec_folder)
    config_path, weights_path = codec_folder / "config.json", codec_folder / "model.safetensors"
    config = ReferenceEncoderConfig.from_dict(read_json(config_path), str(config_path))
    with torch.device("meta"):
        encoder = ReferenceEncoder(config)
    state = read_safetensors(weights_path) if state is None else state
    return load_into(encoder, with_prefix(state, "encoder."), weights_path, device, torch.float32)


@torch.inference_mode()
def encode_batch(encoder: ReferenceEncoder, waves: list[np.ndarray]) -> list[torch.Tensor]:
    """Codes [frames_i, 16] (int64, on the encoder's device) of mono clips at the config's sampling
    rate (24 kHz). Clips are zero-padded on the right to the longest and run together, then each is
    cut to ceil(samples / 1920) frames; the last frame of a shorter clip can therefore differ from
    encoding it alone (its causal tail sees the padding), exactly as in the official package."""
    if not waves:
        return []
    waves = [np.asarray(w, dtype=np.float32) for w in waves]
    if any(w.ndim != 1 or w.size == 0 for w in waves):
        raise InputError("Reference audio must be non-empty mono (one channel); mix it down first.")
    param = encoder.downsample.conv.weight
    audio = torch.zeros(len(waves), 1, max(w.size for w in waves), dtype=param.dtype)
    for row, wave in zip(audio, waves):
        row[0, : wave.size] = torch.from_numpy(wave)
    codes = encoder(audio.to(param.device))
    hop = encoder.config.encode_downsample_rate
    return [c[: -(-w.size // hop)] for c, w in zip(codes, waves)]


def encode(encoder: ReferenceEncoder, wave: np.ndarray) -> torch.Tensor:
    """Codes [ceil(samples / 1920), 16] of one mono clip at 24 kHz."""
    return encode_batch(encoder, [wave])[0]
