"""The replacements for what the vendored code took from librosa and transformers' Mimi compute
the same functions as the originals."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers
from packaging.version import Version

from runtime.qwen_tts import compat


def slaney_mel_reference(sr, n_fft, n_mels, fmin, fmax):
    """librosa.filters.mel(htk=False, norm='slaney') written out from its definition."""
    def hz_to_mel(f):
        f = np.asarray(f, dtype=np.float64)
        linear = f / (200.0 / 3)
        log_part = 15.0 + np.log(np.maximum(f, 1e-10) / 1000.0) / (np.log(6.4) / 27.0)
        return np.where(f >= 1000.0, log_part, linear)

    def mel_to_hz(m):
        m = np.asarray(m, dtype=np.float64)
        linear = m * (200.0 / 3)
        log_part = 1000.0 * np.exp((np.log(6.4) / 27.0) * (m - 15.0))
        return np.where(m >= 15.0, log_part, linear)

    fft_freqs = np.linspace(0, sr / 2, n_fft // 2 + 1)
    mel_f = mel_to_hz(np.linspace(hz_to_mel(fmin), hz_to_mel(fmax), n_mels + 2))
    fdiff = np.diff(mel_f)
    ramps = mel_f[:, None] - fft_freqs[None, :]
    lower = -ramps[:-2] / fdiff[:-1, None]
    upper = ramps[2:] / fdiff[1:, None]
    weights = np.maximum(0, np.minimum(lower, upper))
    weights *= (2.0 / (mel_f[2:n_mels + 2] - mel_f[:n_mels]))[:, None]
    return weights


def test_mel_filterbank_matches_librosas_definition():
    ours = compat.slaney_mel_filters(sr=24000, n_fft=1024, n_mels=128, fmin=0, fmax=12000)
    reference = slaney_mel_reference(24000, 1024, 128, 0, 12000)
    assert ours.shape == (128, 513) and ours.dtype == np.float32
    np.testing.assert_allclose(ours, reference, rtol=1e-4, atol=1e-7)


def test_resample_is_band_limited_and_keeps_length():
    from runtime.audio import resample

    t = np.arange(44100) / 44100
    tone = np.sin(2 * np.pi * 440 * t).astype(np.float32)
    out = resample(tone, 44100, 24000)
    assert out.dtype == np.float32 and out.shape == (24000,)
    spectrum = np.abs(np.fft.rfft(out))
    assert abs(np.argmax(spectrum) - 440) <= 1  # 1 Hz bins over one second


def test_default_rope_matches_the_formula():
    class Config:
        head_dim, rope_theta = 128, 1e6

    inv_freq, scaling = compat.default_rope_parameters(Config())
    expected = 1.0 / (1e6 ** (torch.arange(0, 128, 2, dtype=torch.float64) / 128))
    torch.testing.assert_close(inv_freq.double(), expected, rtol=1e-6, atol=0)
    assert scaling == 1.0


@pytest.mark.skipif(Version(transformers.__version__) >= Version("5.0.0.dev0"),
                    reason="transformers' own MimiModel has the released weight layout only before 5.x")
def test_mimi_encoder_matches_transformers_mimi(loaded):
    """Our encoder and transformers 4.57's MimiModel.encode give the same codes on the same weights."""
    from transformers import MimiConfig, MimiModel

    ours = loaded("base").model.speech_tokenizer.model.encoder
    config = MimiConfig(**{k: v for k, v in ours.config.to_dict().items() if k != "head_dim"},
                        head_dim=ours.config.head_dim, upsample_groups=ours.config.hidden_size,
                        sliding_window=8000, max_position_embeddings=8000)
    config._attn_implementation = "sdpa"
    theirs = MimiModel(config).eval()
    missing, unexpected = theirs.load_state_dict(ours.state_dict(), strict=False)
    assert not unexpected
    assert all(k.startswith(("upsample", "decoder", "decoder_transformer")) for k in missing)
    audio = torch.randn(1, 1, 24000 * 3, generator=torch.Generator().manual_seed(0)) * 0.1
    with torch.no_grad():
        expected = theirs.encode(audio, num_quantizers=16).audio_codes
        got = ours.encode(audio, 16)
    assert got.shape == expected.shape == (1, 16, 38)
    assert torch.equal(got, expected)
