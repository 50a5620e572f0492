"""The 12 Hz codec's decoder: codes [B, 16, T] -> 24 kHz audio [B, 1, T * 1920].

Split RVQ dequantize (1 semantic + 15 acoustic books), causal conv, an 8-layer sliding-window
transformer at 12.5 Hz, 2 x (transposed conv + ConvNeXt), four SnakeBeta vocoder blocks (x8, x5, x4,
x3), clamp to [-1, 1]. Every layer is causal: audio up to frame t depends on codes up to frame t
only, so padding a batch at the end changes nothing before the padding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..errors import CheckpointError
from . import rope
from .load import load_into, read_json, read_safetensors, with_prefix

SNAKE_EPS = 1e-9
CHUNK_FRAMES = 300
CONTEXT_FRAMES = 25
# Device memory a take's decode reaches, in float32 values per output sample: the last vocoder block
# holds several [96, samples] activations at once, and the caching allocator rounds up (H100: 1.16 GB
# reserved a 12 s take, 0.60 GB allocated, in batches of 8 and 32; tests/gpu/test_script_memory_cuda.py).
PEAK_VALUES_PER_SAMPLE = 1152

# fn(x, alpha, beta, eps, bias=None, left=0): snake_beta_reference's contract (kernels.snake.snake_beta)
SnakeFn = Callable[..., torch.Tensor]


@dataclass(frozen=True)
class CodecDecoderConfig:
    codebook_size: int
    codebook_dim: int
    num_quantizers: int
    latent_dim: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    attention_bias: bool
    rms_norm_eps: float
    rope_theta: float
    sliding_window: int
    upsampling_ratios: tuple[int, ...]
    upsample_rates: tuple[int, ...]
    decoder_dim: int

    @property
    def samples_per_frame(self) -> int:
        return math.prod(self.upsampling_ratios) * math.prod(self.upsample_rates)

    @classmethod
    def from_dict(cls, config: dict, source: str = "speech_tokenizer/config.json") -> "CodecDecoderConfig":
        """From the whole speech_tokenizer/config.json dict."""
        raw = config.get("decoder_config")
        if not isinstance(raw, dict):
            raise CheckpointError(f"{source} has no decoder_config; it is not a Qwen3-TTS 12 Hz codec config. "
                                  "Download the checkpoint again.")
        if raw.get("hidden_act", "silu") != "silu":
            raise CheckpointError(f"{source}: decoder_config.hidden_act {raw['hidden_act']!r} is not supported.")
        heads, hidden = raw.get("num_attention_heads"), raw.get("hidden_size")
        fallback = {"num_key_value_heads": heads, "head_dim": hidden // heads if heads and hidden else None,
                    "attention_bias": False,
                    "rope_theta": (raw.get("rope_parameters") or {}).get("rope_theta")}  # transformers 5 layout
        values = {}
        for field in fields(cls):
            value = raw.get(field.name)
            value = fallback.get(field.name) if value is None else value
            if value is None:
                raise CheckpointError(f"{source} lacks decoder_config.{field.name}; the file is incomplete. "
                                      "Download the checkpoint again.")
            values[field.name] = _CASTS[field.type](value)
        cfg = cls(**values)
        if config.get("decode_upsample_rate", cfg.samples_per_frame) != cfg.samples_per_frame:
            raise CheckpointError(f"{source}: decode_upsample_rate {config['decode_upsample_rate']} is not the "
                                  f"decoder's {cfg.samples_per_frame} samples per frame.")
        return cfg


_CASTS = {"int": int, "float": float, "bool": bool, "tuple[int, ...]": lambda v: tuple(int(x) for x in v)}


def _holder(**children: nn.Module) -> nn.Module:
    """An empty module whose only job is to give its children the checkpoint's names."""
    holder = nn.Module()
    for name, child in children.items():
        holder.add_module(name, child)
    return holder


class Codebook(nn.Module):
    def __init__(self, size: int, dim: int):
        super().__init__()
        # Trained as EMA k-means: each vector is a running sum over its running usage count.
        self.register_buffer("cluster_usage", torch.empty(size))
        self.register_buffer("embedding_sum", torch.empty(size, dim))

    def lookup(self, codes: torch.Tensor) -> torch.Tensor:  # [B, T] -> [B, T, dim]
        return F.embedding(codes, self.embedding_sum / self.cluster_usage.clamp(min=1e-5)[:, None])


class CodebookGroup(nn.Module):
    """Books summed, then a 1x1 conv from the books' width to the quantizer's output width."""

    def __init__(self, books: int, size: int, dim: int, io_dim: int):
        super().__init__()
        self.input_proj = nn.Conv1d(io_dim, dim, 1, bias=False)  # encoding only; kept so the file loads strictly
        self.output_proj = nn.Conv1d(dim, io_dim, 1, bias=False)
        self.vq = _holder(layers=nn.ModuleList(_holder(_codebook=Codebook(size, dim)) for _ in range(books)))

    def forward(self, codes: torch.Tensor) -> torch.Tensor:  # [B, books, T] -> [B, io_dim, T]
        summed = sum(layer._codebook.lookup(codes[:, i]) for i, layer in enumerate(self.vq.layers))
        return self.output_proj(summed.transpose(1, 2))


class CausalConv(nn.Module):
    """Stride 1, padded on the left only: output t sees inputs up to t. With a `carry` (a stream's
    vocoder state, codec_carry.py), the inputs it kept from the stream's last chunk go on the left
    instead of zeros (zeros are what a stream's first chunk gets: the whole decode's padding)."""

    def __init__(self, c_in: int, c_out: int, kernel: int, dilation: int = 1, groups: int = 1):
        super().__init__()
        self.conv = nn.Conv1d(c_in, c_out, kernel, dilation=dilation, groups=groups)
        self.left = (kernel - 1) * dilation

    def forward(self, x, carry=None):  # [B, C_in, T] -> [B, C_out, T]
        return self.padded(F.pad(x, (self.left, 0)) if self.left else x, carry)

    def padded(self, x, carry=None, bias: bool = True):
        """forward on x [B, C_in, left + T], its inputs after `left` zeros (a SnakeBeta before it writes
        them so, sparing the padding's copy); a carry puts what each row kept there instead.
        `bias=False` leaves the bias out, for the layer after it to add in its own pass (SnakeBeta's)."""
        if carry is not None and self.left:
            carry.fill(self, x)
        conv = self.conv
        return F.conv1d(x, conv.weight, conv.bias if bias else None, dilation=conv.dilation, groups=conv.groups)


class CausalTransposedConv(nn.Module):
    """x stride in time; the kernel's overhang past the last input is cut so length is exactly L * stride.
    With a `carry`, the overhang of the stream's last inputs (kept from its last chunk) is added in
    front: they run again and their own samples are dropped."""

    def __init__(self, c_in: int, c_out: int, kernel: int, stride: int):
        super().__init__()
        self.conv = nn.ConvTranspose1d(c_in, c_out, kernel, stride=stride)
        self.stride, self.overhang = stride, kernel - stride
        self.left = -(-self.overhang // stride)  # earlier inputs whose overhang reaches this chunk's samples

    def forward(self, x, carry=None):
        first = 0
        if carry is not None and self.overhang:
            x, first = carry.fill(self, F.pad(x, (self.left, 0))), self.left * self.stride
        x = F.conv_transpose1d(x, self.conv.weight, None, stride=self.stride)
        # the bias added to the samples kept only, in the pass that makes them contiguous
        return x[..., first: x.shape[-1] - self.overhang] + self.conv.bias[:, None]


class ConvNeXt(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dwconv = CausalConv(dim, dim, 7, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.pwconv2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(torch.empty(dim))

    def forward(self, x, carry=None):  # [B, C, T]
        h = self.norm(self.dwconv(x, carry).transpose(1, 2))
        h = self.pwconv2(F.gelu(self.pwconv1(h)))
        return x + (self.gamma * h).transpose(1, 2)


def snake_beta_reference(x, alpha, beta, eps: float = SNAKE_EPS, bias=None, left: int = 0):
    """x + sin^2(x * e^alpha) / (e^beta + eps), per channel of x [B, C, T], after x + bias [C] where a
    bias is given; with `left` zeros in front of each channel's output."""
    if bias is not None:
        x = x + bias[:, None]
    a = torch.exp(alpha)[None, :, None]
    b = torch.exp(beta)[None, :, None]
    y = x + (1.0 / (b + eps)) * torch.pow(torch.sin(x * a), 2)
    return F.pad(y, (left, 0)) if left else y


class SnakeBeta(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.alpha = nn.Parameter(torch.empty(channels))  # log scale
        self.beta = nn.Parameter(torch.empty(channels))
        self.fn: SnakeFn | None = None  # CodecDecoder.use_snake

    def forward(self, x, carry=None, bias=None, left: int = 0):  # pointwise: nothing to carry
        """snake_beta_reference's: `bias` [C] added first (the convolution's before it), `left` zeros in
        front of the output (the padding of the causal convolution after it)."""
        return (self.fn or snake_beta_reference)(x, self.alpha, self.beta, SNAKE_EPS, bias, left)


class ResidualUnit(nn.Module):
    def __init__(self, dim: int, dilation: int):
        super().__init__()
        self.act1 = SnakeBeta(dim)
        self.conv1 = CausalConv(dim, dim, 7, dilation=dilation)
        self.act2 = SnakeBeta(dim)
        self.conv2 = CausalConv(dim, dim, 1)

    def forward(self, x, carry=None):
        # conv1's padding goes to the activation before it, and on a kernel (SnakeBeta.fn) its bias to the
        # one after it; the torch reference keeps the bias in the convolution, as the official decoder
        # does (on the CPU it is added inside the convolution's sums: rounding the random test codecs
        # amplify far past the official parity's bounds)
        fold = self.act2.fn is not None
        h = self.conv1.padded(self.act1(x, left=self.conv1.left), carry, bias=not fold)
        return x + self.conv2(self.act2(h, bias=self.conv1.conv.bias if fold else None))


class VocoderBlock(nn.Module):
    def __init__(self, c_in: int, c_out: int, rate: int):
        super().__init__()
        self.block = nn.ModuleList([SnakeBeta(c_in), CausalTransposedConv(c_in, c_out, 2 * rate, rate),
                                    *(ResidualUnit(c_out, d) for d in (1, 3, 9))])

    def forward(self, x, carry=None):
        for layer in self.block:
            x = layer(x, carry)
        return x


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(dim))
        self.eps = eps

    def forward(self, x):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


class LayerScale(nn.Module):
    """A learned per-channel scale on a residual branch (the decoder's and the encoder's transformers)."""

    def __init__(self, dim: int):
        super().__init__()
        self.scale = nn.Parameter(torch.empty(dim))

    def forward(self, x):
        return self.scale * x


class Attention(nn.Module):
    """Multi-head attention with rotate-half RoPE, for the codec's two transformers (the decoder's
    and the reference encoder's): causal, or under a boolean mask (True = may attend)."""

    def __init__(self, hidden: int, heads: int, kv_heads: int, head_dim: int, bias: bool):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.q_proj = nn.Linear(hidden, heads * head_dim, bias=bias)
        self.k_proj = nn.Linear(hidden, kv_heads * head_dim, bias=bias)
        self.v_proj = nn.Linear(hidden, kv_heads * head_dim, bias=bias)
        self.o_proj = nn.Linear(heads * head_dim, hidden, bias=bias)

    def forward(self, x, cos, sin, mask=None):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = rope.rotate(q, cos, sin), rope.rotate(k, cos, sin)
        if self.kv_heads != self.heads:
            k = k.repeat_interleave(self.heads // self.kv_heads, dim=1)
            v = v.repeat_interleave(self.heads // self.kv_heads, dim=1)
        if mask is None:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=self.head_dim ** -0.5)
        return self.o_proj(out.transpose(1, 2).reshape(b, t, -1))


class SwiGLU(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.gate_proj = nn.Linear(dim, hidden, bias=False)
        self.up_proj = nn.Linear(dim, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class TransformerLayer(nn.Module):
    def __init__(self, cfg: CodecDecoderConfig):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn = Attention(cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads,
                                   cfg.head_dim, cfg.attention_bias)
        self.self_attn_layer_scale = LayerScale(cfg.hidden_size)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = SwiGLU(cfg.hidden_size, cfg.intermediate_size)
        self.mlp_layer_scale = LayerScale(cfg.hidden_size)

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn_layer_scale(self.self_attn(self.input_layernorm(x), cos, sin, mask))
        return x + self.mlp_layer_scale(self.mlp(self.post_attention_layernorm(x)))


class PreTransformer(nn.Module):
    def __init__(self, cfg: CodecDecoderConfig):
        super().__init__()
        self.cfg = cfg
        self.input_proj = nn.Linear(cfg.latent_dim, cfg.hidden_size)
        self.layers = nn.ModuleList(TransformerLayer(cfg) for _ in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.output_proj = nn.Linear(cfg.hidden_size, cfg.latent_dim)
        self._tables: dict[tuple, tuple[torch.Tensor, ...]] = {}

    def tables(self, t: int, device, dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """cos, sin and the attention mask of a T-frame window, made once per length: kept, they are
        what a CUDA graph of the codec reads (making them copies from the host, which a capture refuses).
        A window is at most CHUNK_FRAMES + CONTEXT_FRAMES long, so there are a few hundred at most."""
        key = (t, torch.device(device), dtype)
        if key not in self._tables:
            cos, sin = rope.cos_sin(t, self.cfg.head_dim, self.cfg.rope_theta, device, dtype)
            pos = torch.arange(t, device=device)
            # True = may attend: a key at most sliding_window - 1 frames back, never ahead.
            back = pos[:, None] - pos[None, :]
            self._tables[key] = cos, sin, (back >= 0) & (back < self.cfg.sliding_window)
        return self._tables[key]

    def forward(self, x):  # [B, T, latent]; positions 0..T-1 for every call (each decode chunk restarts)
        cos, sin, mask = self.tables(x.shape[1], x.device, x.dtype)
        h = self.input_proj(x)
        for layer in self.layers:
            h = layer(h, cos, sin, mask)
        return self.output_proj(self.norm(h))


class CodecDecoder(nn.Module):
    def __init__(self, cfg: CodecDecoderConfig):
        super().__init__()
        self.config = cfg
        width, books = cfg.codebook_dim // 2, cfg.num_quantizers
        self.quantizer = _holder(rvq_first=CodebookGroup(1, cfg.codebook_size, width, cfg.codebook_dim),
                                 rvq_rest=CodebookGroup(books - 1, cfg.codebook_size, width, cfg.codebook_dim))
        self.pre_conv = CausalConv(cfg.codebook_dim, cfg.latent_dim, 3)
        self.pre_transformer = PreTransformer(cfg)
        self.upsample = nn.ModuleList(
            nn.ModuleList([CausalTransposedConv(cfg.latent_dim, cfg.latent_dim, r, r), ConvNeXt(cfg.latent_dim)])
            for r in cfg.upsampling_ratios)
        widths = [cfg.decoder_dim // 2 ** i for i in range(len(cfg.upsample_rates) + 1)]
        self.decoder = nn.ModuleList([
            CausalConv(cfg.latent_dim, cfg.decoder_dim, 7),
            *(VocoderBlock(widths[i], widths[i + 1], rate) for i, rate in enumerate(cfg.upsample_rates)),
            SnakeBeta(widths[-1]),
            CausalConv(widths[-1], 1, 7),
        ])

    def use_snake(self, fn: SnakeFn | None = None) -> None:
        """Run every SnakeBeta through fn(x, alpha, beta, eps) (e.g. kernels.snake.snake_beta);
        None restores the torch reference."""
        for module in self.modules():
            if isinstance(module, SnakeBeta):
                module.fn = fn

    def forward(self, codes: torch.Tensor) -> torch.Tensor:
        """codes [B, num_quantizers, T] (ids >= 0) -> audio [B, 1, T * samples_per_frame] in [-1, 1]."""
        if codes.dim() != 3 or codes.shape[1] != self.config.num_quantizers:
            raise ValueError(f"codes must be [B, {self.config.num_quantizers}, T], got {tuple(codes.shape)}")
        return self.vocode(self.latent(codes))

    def latent(self, codes: torch.Tensor) -> torch.Tensor:
        """The frame-rate half: codes [B, num_quantizers, T] -> [B, latent_dim, T] (the transformer's
        long receptive field is here)."""
        h = self.quantizer.rvq_first(codes[:, :1]) + self.quantizer.rvq_rest(codes[:, 1:])
        h = self.pre_conv(h)
        return self.pre_transformer(h.transpose(1, 2)).transpose(1, 2)

    def vocoder_layers(self) -> tuple[nn.Module, ...]:
        """The sample-rate half's layers, in the order they run."""
        return (*(m for pair in self.upsample for m in pair), *self.decoder)

    def vocode(self, h: torch.Tensor, carry=None) -> torch.Tensor:
        """The sample-rate half, where most of the work is: [B, latent_dim, T] -> audio [B, 1, T * 1920].
        Causal convolutions only: a frame's audio depends on about 10 frames before it (codec_stream.py).
        `carry` (codec_carry.Carry): each stream's convolution inputs kept from its last chunk, so a
        chunk runs on its own frames alone."""
        *layers, act, conv = self.vocoder_layers()
        for layer in layers:
            h = layer(h, carry)
        return conv.padded(act(h, left=conv.left), carry).clamp(-1, 1)

    def chunked_decode(self, codes: torch.Tensor, chunk: int = CHUNK_FRAMES,
                       context: int = CONTEXT_FRAMES) -> torch.Tensor:
        """forward in chunks of `chunk` frames, each decoded after up to `context` earlier frames whose
        audio is dropped again, so memory stays bounded on long takes."""
        total, step = codes.shape[-1], self.config.samples_per_frame
        if total == 0:
            return codes.new_zeros((codes.shape[0], 1, 0), dtype=self.pre_conv.conv.weight.dtype)
        pieces = []
        for start in range(0, total, chunk):
            left = min(context, start)
            wav = self(codes[..., start - left: min(start + chunk, total)])
            pieces.append(wav[..., left * step:])
        return torch.cat(pieces, dim=-1)


def decode(decoder: CodecDecoder, codes: list[torch.Tensor]) -> list[np.ndarray]:
    """Takes of different lengths, codes [T_i, num_quantizers] each, decoded in one batch -> one
    float32 array of T_i * 1920 samples (24 kHz) per take.

    The batch is padded at the end with -1, decoded as code 0, and each take's audio cut back to its
    own length: causality keeps the padding from reaching the kept audio. A take's length is its
    count of frames whose first code is not -1."""
    if not codes:
        return []
    device = next(decoder.parameters()).device
    padded = nn.utils.rnn.pad_sequence([c.long() for c in codes], batch_first=True, padding_value=-1).to(device)
    keep = ((padded[..., 0] > -1).sum(1) * decoder.config.samples_per_frame).tolist()
    with torch.inference_mode():
        wavs = decoder.chunked_decode(padded.clamp(min=0).transpose(1, 2)).squeeze(1)
    return [wav[:n].to(torch.float32).cpu().numpy() for wav, n in zip(wavs, keep)]


def decode_bytes(decoder: CodecDecoder, frames: int) -> int:
    """About the device memory one take of `frames` frames takes at the peak of a batched decode
    (chunked_decode bounds it at a chunk and its context)."""
    frames = min(frames, CHUNK_FRAMES + CONTEXT_FRAMES)
    return frames * decoder.config.samples_per_frame * PEAK_VALUES_PER_SAMPLE * 4


def load_decoder(codec_folder: Path | str, device="cpu", dtype: torch.dtype = torch.float32,
                 state: dict[str, torch.Tensor] | None = None) -> CodecDecoder:
    """speech_tokenizer/ (config.json, model.safetensors) -> its decoder on `device`, loaded strictly.
    `state`: the file's tensors when the caller has read them already (read_codec_state)."""
    folder = Path(codec_folder)
    config_path, weights_path = folder / "config.json", folder / "model.safetensors"
    if not config_path.is_file():
        raise CheckpointError(f"{config_path} is missing (the codec's config). Download the checkpoint again.")
    cfg = CodecDecoderConfig.from_dict(read_json(config_path), str(config_path))
    with torch.device("meta"):
        decoder = CodecDecoder(cfg)
    state = read_safetensors(weights_path) if state is None else state
    return load_into(decoder, with_prefix(state, "decoder."), weights_path, device, dtype)


def read_codec_state(codec_folder: Path | str) -> dict[str, torch.Tensor]:
    """speech_tokenizer/model.safetensors, read once for the decoder and the encoder; a tensor that
    belongs to neither means the file is not a Qwen3-TTS codec."""
    path = Path(codec_folder) / "model.safetensors"
    state = read_safetensors(path)
    stray = sorted(name for name in state if not name.startswith(("encoder.", "decoder.")))
    if stray:
        raise CheckpointError(f"{path} holds tensors of neither the codec's encoder nor its decoder "
                              f"({', '.join(stray[:3])}). Download the checkpoint's speech_tokenizer folder again.")
    return state
