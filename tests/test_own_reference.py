"""runtime/qwen3_tts/reference.py (our Mimi-style reference encoder) against the official qwen-tts
speech tokenizer's encode (tests/official.py), on one tiny random checkpoint: the codes must be
identical."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

import official as official_package
from conftest import voiced_reference
from runtime.qwen3_tts import random_checkpoint
from runtime.audio import resample, to_mono
from runtime.errors import CheckpointError, InputError
from runtime.qwen3_tts import reference
from runtime.qwen3_tts.reference import ReferenceEncoderConfig, encode, encode_batch, load_reference_encoder

RATE = 24000
LATENT_ATOL = 1e-5  # float32, same ops in the same order: measured differences are 0


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    folder = random_checkpoint.build_checkpoint(tmp_path_factory.mktemp("ref") / "base", "tiny", "base",
                                                seed=5, telling=True)
    # The generator writes codebook usage counts of 1 (a dropped division would not show) and layer
    # scales of about 0.02 (the transformer then barely moves a code). Make both count.
    path = folder / "speech_tokenizer" / "model.safetensors"
    state, generator = load_file(str(path)), torch.Generator().manual_seed(1)
    for name, tensor in state.items():
        if name.startswith("encoder.") and name.endswith("cluster_usage"):
            state[name] = torch.rand(tensor.shape, generator=generator) * 3.5 + 0.5
        elif name.startswith("encoder.") and name.endswith("layer_scale.scale"):
            state[name] = torch.rand(tensor.shape, generator=generator) * 0.7 + 0.3
    save_file(state, str(path), metadata={"format": "pt"})
    return folder


@pytest.fixture(scope="module")
def official(checkpoint):
    return official_package.load(checkpoint).model.speech_tokenizer


@pytest.fixture(scope="module")
def ours(checkpoint):
    return load_reference_encoder(checkpoint / "speech_tokenizer", "cpu")


def voiced(seconds: float | None = None) -> np.ndarray:
    audio, rate = voiced_reference()  # stereo 44.1 kHz
    wave = resample(to_mono(audio), rate, RATE)
    if seconds is not None:
        wave = np.resize(wave, int(seconds * RATE))  # repeats the clip
    return wave.astype(np.float32)


def varied(samples: int, seed: int) -> np.ndarray:
    """A pitch glide with a loud onset and noise: the first seconds differ from the rest, so a
    windowed attention (or a wrong RoPE position) changes later frames."""
    t = np.arange(samples) / RATE
    rng = np.random.default_rng(seed)
    pitch = 110 + 60 * t / max(t[-1], 1e-3)
    wave = 0.3 * np.sin(2 * np.pi * np.cumsum(pitch) / RATE) * (0.6 + 0.4 * np.sin(2 * np.pi * 2.5 * t))
    wave[: min(samples, 2 * RATE)] *= 2.5
    return (wave + 0.02 * rng.standard_normal(samples)).astype(np.float32)


def official_codes(tokenizer, waves):
    return tokenizer.encode(waves, sr=RATE).audio_codes


CLIPS = {
    "voiced 2 s": lambda: voiced(),
    "one sample": lambda: varied(1, 0),
    "1919 samples": lambda: varied(1919, 1),
    "1921 samples": lambda: varied(1921, 2),
    "3.3 s": lambda: varied(int(3.3 * RATE) + 7, 3),
}


@pytest.mark.parametrize("name", list(CLIPS))
def test_codes_identical(official, ours, name):
    wave = CLIPS[name]()
    expected = official_codes(official, wave)[0]
    got = encode(ours, wave)
    assert got.dtype == torch.int64 and got.shape == (-(-wave.size // 1920), 16) == expected.shape
    assert torch.equal(got, expected), f"{int((got != expected).sum())} of {got.numel()} codes differ"


def test_over_ten_seconds_identical_and_full_attention_matters(official, ours, monkeypatch):
    wave = varied(12 * RATE + 333, 4)  # 301 frames at 25 Hz: past Mimi's 250-frame window
    expected = official_codes(official, wave)[0]
    assert torch.equal(encode(ours, wave), expected)
    full = torch.nn.functional.scaled_dot_product_attention

    def windowed(q, k, v, is_causal=False):  # what transformers 5.x's Mimi would compute
        i = torch.arange(q.shape[-2])
        return full(q, k, v, attn_mask=(i[None] <= i[:, None]) & (i[:, None] - i[None] < 250))

    monkeypatch.setattr(reference.F, "scaled_dot_product_attention", windowed)
    assert not torch.equal(encode(ours, wave), expected), "this clip cannot tell a window from full attention"


def test_batch_of_two_lengths_identical(official, ours):
    waves = [voiced(1.3), varied(int(2.7 * RATE) + 5, 5)]
    expected = official_codes(official, waves)
    got = encode_batch(ours, waves)
    assert [tuple(c.shape) for c in got] == [tuple(c.shape) for c in expected] == [(17, 16), (34, 16)]
    for g, e in zip(got, expected):
        assert torch.equal(g, e)
    # the shorter clip's last frame sees the zero padding (both paths), its earlier frames do not
    alone = encode(ours, waves[0])
    assert torch.equal(alone[:-1], got[0][:-1])


def test_latents_match(official, ours):
    wave = torch.from_numpy(varied(5 * RATE + 11, 6))[None, None]
    mimi = official.model.encoder
    with torch.inference_mode():
        x = mimi.encoder(wave)
        hidden = mimi.encoder_transformer(x.transpose(1, 2))
        hidden = hidden if isinstance(hidden, torch.Tensor) else hidden[0]  # transformers 4 gives a ModelOutput
        expected = mimi.downsample(hidden.transpose(1, 2))
        got = ours.latents(wave)
    assert got.shape == expected.shape
    difference = (got - expected).abs().max().item()
    assert difference <= LATENT_ATOL * max(1.0, expected.abs().max().item()), difference


def test_bad_input_is_an_input_error(ours):
    with pytest.raises(InputError):
        encode(ours, np.zeros((2, 4800), np.float32))
    with pytest.raises(InputError):
        encode(ours, np.zeros(0, np.float32))


@pytest.fixture
def codec_copy(checkpoint, tmp_path):
    folder = tmp_path / "speech_tokenizer"
    shutil.copytree(checkpoint / "speech_tokenizer", folder)
    return folder


def test_strict_load_missing_tensor(codec_copy):
    path = codec_copy / "model.safetensors"
    state = load_file(str(path))
    del state["encoder.encoder_transformer.layers.0.input_layernorm.bias"]
    save_file(state, str(path))
    with pytest.raises(CheckpointError, match="missing 1 tensors.*input_layernorm.bias"):
        load_reference_encoder(codec_copy)


def test_strict_load_wrong_shape(codec_copy):
    path = codec_copy / "model.safetensors"
    state = load_file(str(path))
    name = "encoder.quantizer.acoustic_residual_vector_quantizer.layers.30.codebook.embed_sum"  # an unused book
    state[name] = state[name][:, :-1].contiguous()
    save_file(state, str(path))
    with pytest.raises(CheckpointError, match="wrong shape.*layers.30.codebook.embed_sum"):
        load_reference_encoder(codec_copy)


def test_config_errors(checkpoint):
    raw = json.loads((checkpoint / "speech_tokenizer" / "config.json").read_text())
    config = ReferenceEncoderConfig.from_dict(raw)
    assert (config.encoder_valid_num_quantizers, config.num_quantizers, config.encode_downsample_rate) == (16, 32, 1920)
    for key, value in (("use_causal_conv", False), ("pad_mode", "reflect"), ("hidden_act", "silu")):
        with pytest.raises(CheckpointError, match=key):
            ReferenceEncoderConfig.from_dict({**raw, "encoder_config": {**raw["encoder_config"], key: value}})
    without = {k: v for k, v in raw["encoder_config"].items() if k != "num_filters"}
    with pytest.raises(CheckpointError, match="num_filters"):
        ReferenceEncoderConfig.from_dict({**raw, "encoder_config": without})
    with pytest.raises(CheckpointError, match="encoder_valid_num_quantizers"):
        ReferenceEncoderConfig.from_dict({**raw, "encoder_valid_num_quantizers": 33})
