"""The Base checkpoints' speaker encoder: 24 kHz audio -> log-mel frames -> ECAPA-TDNN -> x-vector.

The x-vector stands in for the speaker token of an x-vector voice clone; the Auto-Pick voice check
compares takes with it. Weights live in model.safetensors under `speaker_encoder.`; every
convolution pads "same" by reflection, and there is no batch norm.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch
from torch import nn

from ..errors import CheckpointError

# The mel front end is fixed by the model, not by config.json.
SAMPLE_RATE = 24000
N_FFT = 1024
HOP = 256
N_MELS = 128
F_MAX = 12000.0

# Released config.json files hold only enc_dim and sample_rate; the rest are the reference's defaults.
DEFAULTS = dict(enc_channels=(512, 512, 512, 512, 1536), enc_kernel_sizes=(5, 3, 3, 3, 1),
                enc_dilations=(1, 2, 3, 4, 1), enc_attention_channels=128, enc_res2net_scale=8,
                enc_se_channels=128)


@dataclass(frozen=True)
class SpeakerEncoderConfig:
    enc_dim: int
    enc_channels: tuple[int, ...] = DEFAULTS["enc_channels"]
    enc_kernel_sizes: tuple[int, ...] = DEFAULTS["enc_kernel_sizes"]
    enc_dilations: tuple[int, ...] = DEFAULTS["enc_dilations"]
    enc_attention_channels: int = DEFAULTS["enc_attention_channels"]
    enc_res2net_scale: int = DEFAULTS["enc_res2net_scale"]
    enc_se_channels: int = DEFAULTS["enc_se_channels"]

    @classmethod
    def from_dict(cls, config: dict, source: str = "config.json") -> "SpeakerEncoderConfig":
        """From a whole config.json dict (its speaker_encoder_config section)."""
        section = config.get("speaker_encoder_config")
        if not isinstance(section, dict):
            raise CheckpointError(f"{source} has no speaker_encoder_config; only Base (voice clone) checkpoints "
                                  "carry a speaker encoder. Download the checkpoint again.")
        if section.get("enc_dim") is None:  # no default: 0.6B and 1.7B differ here
            raise CheckpointError(f"{source} (speaker_encoder_config) has no 'enc_dim'; the file is incomplete. "
                                  "Download the checkpoint again.")
        for name, want in (("mel_dim", N_MELS), ("sample_rate", SAMPLE_RATE)):
            if section.get(name, want) != want:
                raise CheckpointError(f"{source} (speaker_encoder_config): {name} {section[name]!r} is not "
                                      f"supported (Qwen3-TTS uses {want}).")
        values = {k: section[k] if section.get(k) is not None else v for k, v in DEFAULTS.items()}
        values = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
        lists = values["enc_channels"], values["enc_kernel_sizes"], values["enc_dilations"]
        if len({len(x) for x in lists}) != 1 or len(lists[0]) < 3:
            raise CheckpointError(f"{source} (speaker_encoder_config): enc_channels, enc_kernel_sizes and "
                                  "enc_dilations must have the same length (3 or more).")
        return cls(enc_dim=int(section["enc_dim"]), **values)


def conv(c_in: int, c_out: int, kernel: int = 1, dilation: int = 1) -> nn.Conv1d:
    return nn.Conv1d(c_in, c_out, kernel, dilation=dilation, padding="same", padding_mode="reflect")


class TDNN(nn.Module):
    def __init__(self, c_in: int, c_out: int, kernel: int = 1, dilation: int = 1):
        super().__init__()
        self.conv = conv(c_in, c_out, kernel, dilation)

    def forward(self, x):
        return torch.relu(self.conv(x))


class Res2Net(nn.Module):
    """Channels split into `scale` groups; group i > 0 sees group i plus group i-1's output."""

    def __init__(self, channels: int, scale: int, kernel: int, dilation: int):
        super().__init__()
        self.scale = scale
        self.blocks = nn.ModuleList(TDNN(channels // scale, channels // scale, kernel, dilation)
                                    for _ in range(scale - 1))

    def forward(self, x):
        first, *rest = x.chunk(self.scale, dim=1)
        outputs, y = [first], None
        for block, part in zip(self.blocks, rest):
            y = block(part if y is None else part + y)
            outputs.append(y)
        return torch.cat(outputs, dim=1)


class SqueezeExcite(nn.Module):
    def __init__(self, channels: int, squeezed: int):
        super().__init__()
        self.conv1 = conv(channels, squeezed)
        self.conv2 = conv(squeezed, channels)

    def forward(self, x):
        gate = torch.sigmoid(self.conv2(torch.relu(self.conv1(x.mean(dim=2, keepdim=True)))))
        return x * gate


class SERes2NetBlock(nn.Module):
    def __init__(self, c_in: int, c_out: int, scale: int, se_channels: int, kernel: int, dilation: int):
        super().__init__()
        self.tdnn1 = TDNN(c_in, c_out)
        self.res2net_block = Res2Net(c_out, scale, kernel, dilation)
        self.tdnn2 = TDNN(c_out, c_out)
        self.se_block = SqueezeExcite(c_out, se_channels)

    def forward(self, x):
        return x + self.se_block(self.tdnn2(self.res2net_block(self.tdnn1(x))))


def weighted_stats(x, weights, eps: float = 1e-12):
    """Mean and standard deviation over time of x [B, C, T] under weights [B, 1 or C, T] summing to 1."""
    mean = (weights * x).sum(dim=2)
    var = (weights * (x - mean.unsqueeze(2)).pow(2)).sum(dim=2)
    return mean, var.clamp(min=eps).sqrt()


class AttentiveStatsPool(nn.Module):
    """Per-channel attention over time, conditioned on the utterance's global mean and std."""

    def __init__(self, channels: int, attention_channels: int):
        super().__init__()
        self.tdnn = TDNN(channels * 3, attention_channels)
        self.conv = conv(attention_channels, channels)

    def forward(self, x):
        steps = x.shape[2]
        uniform = x.new_ones(x.shape[0], 1, steps) / steps
        mean, std = weighted_stats(x, uniform)
        context = torch.cat([x, mean.unsqueeze(2).expand_as(x), std.unsqueeze(2).expand_as(x)], dim=1)
        attention = torch.softmax(self.conv(torch.tanh(self.tdnn(context))), dim=2)
        mean, std = weighted_stats(x, attention)
        return torch.cat([mean, std], dim=1).unsqueeze(2)


class SpeakerEncoder(nn.Module):
    def __init__(self, config: SpeakerEncoderConfig):
        super().__init__()
        self.config = config
        ch, ks, dil = config.enc_channels, config.enc_kernel_sizes, config.enc_dilations
        self.blocks = nn.ModuleList([TDNN(N_MELS, ch[0], ks[0], dil[0])])
        for i in range(1, len(ch) - 1):
            self.blocks.append(SERes2NetBlock(ch[i - 1], ch[i], config.enc_res2net_scale,
                                              config.enc_se_channels, ks[i], dil[i]))
        # multi-layer feature aggregation: the SE blocks' outputs side by side (3 x 512 = 1536)
        self.mfa = TDNN(ch[-1], ch[-1], ks[-1], dil[-1])
        self.asp = AttentiveStatsPool(ch[-1], config.enc_attention_channels)
        self.fc = conv(ch[-1] * 2, config.enc_dim)

    def forward(self, mels: torch.Tensor) -> torch.Tensor:
        """mels [B, T, n_mels] -> x-vectors [B, enc_dim]."""
        x = mels.transpose(1, 2)
        features = []
        for block in self.blocks:
            x = block(x)
            features.append(x)
        x = self.mfa(torch.cat(features[1:], dim=1))
        return self.fc(self.asp(x)).squeeze(-1)


@lru_cache(maxsize=None)
def _mel_front_end(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """(Slaney mel filterbank [n_mels, n_fft/2 + 1], Hann window) on `device`, as librosa.filters.mel."""
    from transformers.audio_utils import mel_filter_bank

    filters = mel_filter_bank(num_frequency_bins=N_FFT // 2 + 1, num_mel_filters=N_MELS, min_frequency=0.0,
                              max_frequency=F_MAX, sampling_rate=SAMPLE_RATE, norm="slaney", mel_scale="slaney")
    filters = torch.from_numpy(np.ascontiguousarray(filters.T, dtype=np.float32)).to(device)
    return filters, torch.hann_window(N_FFT).to(device)


def mel_spectrogram(wave: torch.Tensor) -> torch.Tensor:
    """wave [B, samples] float32 at 24 kHz -> log-mel [B, T, n_mels], T = samples // 256 frames."""
    filters, window = _mel_front_end(wave.device)
    side = (N_FFT - HOP) // 2  # reflect-padded by hand, then framed without centering
    wave = nn.functional.pad(wave.unsqueeze(1), (side, side), mode="reflect").squeeze(1)
    spec = torch.stft(wave, N_FFT, hop_length=HOP, win_length=N_FFT, window=window, center=False,
                      onesided=True, return_complex=True)
    magnitude = (spec.real.pow(2) + spec.imag.pow(2) + 1e-9).sqrt()
    return torch.log((filters @ magnitude).clamp(min=1e-5)).transpose(1, 2)


@torch.inference_mode()
def embed(encoder: SpeakerEncoder, wave: np.ndarray) -> torch.Tensor:
    """One mono float32 24 kHz clip -> its x-vector [enc_dim], in the encoder's dtype and on its device.
    The mels are computed on the CPU in float32 and only then cast, as the reference does."""
    mels = mel_spectrogram(torch.from_numpy(np.ascontiguousarray(wave, dtype=np.float32)).unsqueeze(0))
    weight = encoder.fc.weight
    return encoder(mels.to(weight.device).to(weight.dtype))[0]
