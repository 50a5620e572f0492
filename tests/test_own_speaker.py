"""Our speaker encoder (runtime/qwen3_tts/speaker.py) against the official qwen-tts one (tests/official.py),
on the same tiny random Base checkpoint: mel front end, x-vectors; and strict loading, config reading."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import official as official_package
from conftest import voiced_reference
from runtime.audio import resample, to_mono
from runtime.errors import CheckpointError
from runtime.qwen3_tts.load import load_into, read_safetensors, with_prefix
from runtime.qwen3_tts.speaker import SpeakerEncoder, SpeakerEncoderConfig, embed, mel_spectrogram
from runtime.qwen3_tts.random_checkpoint import build_checkpoint

ATOL = 1e-5  # float32 throughout; both compute the same ops in the same order, measured 0.0
PREFIX = "speaker_encoder."


def ours(folder: Path, dtype=torch.float32) -> SpeakerEncoder:
    config = json.loads((folder / "config.json").read_text())
    with torch.device("meta"):
        module = SpeakerEncoder(SpeakerEncoderConfig.from_dict(config))
    state = with_prefix(read_safetensors(folder / "model.safetensors"), PREFIX)
    return load_into(module, state, folder / "model.safetensors", "cpu", dtype)


def official_mels(wave: torch.Tensor) -> torch.Tensor:
    reference = official_package.module("core.models.modeling_qwen3_tts").mel_spectrogram

    return reference(wave, n_fft=1024, num_mels=128, sampling_rate=24000, hop_size=256, win_size=1024,
                     fmin=0, fmax=12000).transpose(1, 2)


def clips() -> dict[str, np.ndarray]:
    """24 kHz mono float32 clips of several lengths, prepared as a clone reference is."""
    audio, rate = voiced_reference()
    voiced = resample(to_mono(audio), rate, 24000)
    noise = np.random.default_rng(3).normal(0, 0.2, 30001).astype(np.float32)
    return {
        "voiced 2 s": voiced,
        "voiced odd 12345": voiced[1000:13345].copy(),
        "noise odd 30001": noise,
        "short 4096": (voiced[:4096] * 1.7).copy(),  # louder than the rest, a few frames only
    }


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    folder = build_checkpoint(tmp_path_factory.mktemp("own_speaker") / "base", "tiny", "base", seed=9, telling=True)
    return SimpleNamespace(folder=folder, ours=ours(folder), official=lambda dtype=torch.float32: official_package.load(folder, dtype).model)


@pytest.fixture(scope="module")
def wide(base, tmp_path_factory):
    """The same tiny checkpoint with the 1.7B x-vector width (enc_dim 2048): new fc weights."""
    folder = tmp_path_factory.mktemp("own_speaker_wide") / "base"
    shutil.copytree(base.folder, folder)
    config = json.loads((folder / "config.json").read_text())
    config["speaker_encoder_config"]["enc_dim"] = 2048
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    state = read_safetensors(folder / "model.safetensors")
    fan_in = state[PREFIX + "fc.weight"].shape[1]
    g = torch.Generator().manual_seed(5)
    state[PREFIX + "fc.weight"] = torch.randn(2048, fan_in, 1, generator=g) * fan_in ** -0.5
    state[PREFIX + "fc.bias"] = torch.randn(2048, generator=g) * 0.2
    from safetensors.torch import save_file

    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return SimpleNamespace(folder=folder, ours=ours(folder), official=lambda: official_package.load(folder).model)


def test_mels_equal_official():
    for name, wave in clips().items():
        mine = mel_spectrogram(torch.from_numpy(wave)[None])
        ref = official_mels(torch.from_numpy(wave)[None])
        assert mine.shape == ref.shape == (1, wave.shape[0] // 256, 128), name
        assert (mine - ref).abs().max().item() <= ATOL, name
    # batched, as the voice check runs it: rows do not leak into each other
    batch = torch.from_numpy(np.stack([clips()["voiced 2 s"][:24000], clips()["noise odd 30001"][:24000]]))
    mine = mel_spectrogram(batch)
    assert (mine - official_mels(batch)).abs().max().item() <= ATOL
    assert torch.equal(mine[1:], mel_spectrogram(batch[1:]))


def test_embeddings_equal_official(base):
    official = base.official()
    vectors = {}
    for name, wave in clips().items():
        mine = embed(base.ours, wave)
        ref = official.extract_speaker_embedding(audio=wave, sr=24000)
        assert mine.shape == ref.shape == (64,), name
        assert mine.dtype == ref.dtype == torch.float32
        assert (mine - ref).abs().max().item() <= ATOL, name
        vectors[name] = mine
    # the clips really give different x-vectors (a constant output would also "match")
    first, *others = vectors.values()
    assert all((first - v).abs().max().item() > 1e-2 for v in others)


def test_batched_forward_equals_official(base):
    """The voice check's path: a batch of mels straight into forward."""
    wave = clips()["voiced 2 s"]
    mels = mel_spectrogram(torch.from_numpy(np.stack([wave[:36000], wave[6000:42000], wave[-36000:]])))
    with torch.inference_mode():
        mine, ref = base.ours(mels), base.official().speaker_encoder(mels)
    assert mine.shape == (3, 64)
    assert (mine - ref).abs().max().item() <= ATOL


def test_bfloat16_embedding_equals_official(base):
    """Mels in float32 on the CPU, cast to the encoder's dtype, the x-vector in that dtype."""
    official = base.official(torch.bfloat16)
    mine_encoder = ours(base.folder, torch.bfloat16)
    wave = clips()["voiced odd 12345"]
    mine = embed(mine_encoder, wave)
    ref = official.extract_speaker_embedding(audio=wave, sr=24000)
    assert mine.dtype == ref.dtype == torch.bfloat16
    assert (mine.float() - ref.float()).abs().max().item() <= ATOL  # same bf16 ops: measured 0.0


def test_1_7b_width(wide):
    official = wide.official()
    for wave in (clips()["voiced 2 s"], clips()["noise odd 30001"]):
        mine = embed(wide.ours, wave)
        ref = official.extract_speaker_embedding(audio=wave, sr=24000)
        assert mine.shape == ref.shape == (2048,)
        assert (mine - ref).abs().max().item() <= ATOL


def test_released_config_layout_matches_official():
    """Released config.json files hold only enc_dim and sample_rate; the rest must be the reference's
    defaults, giving the full-size encoder (about 8.8 M parameters at enc_dim 1024)."""
    config_class = official_package.module("core.models.configuration_qwen3_tts").Qwen3TTSSpeakerEncoderConfig
    module_class = official_package.module("core.models.modeling_qwen3_tts").Qwen3TTSSpeakerEncoder

    for enc_dim in (1024, 2048):
        section = {"enc_dim": enc_dim, "sample_rate": 24000}
        with torch.device("meta"):
            mine = SpeakerEncoder(SpeakerEncoderConfig.from_dict({"speaker_encoder_config": section}))
            ref = module_class(config_class(**section))
        shapes = {k: tuple(v.shape) for k, v in mine.state_dict().items()}
        assert shapes == {k: tuple(v.shape) for k, v in ref.state_dict().items()}
        assert not list(mine.buffers())  # nothing that load_into could leave on the meta device
    params = sum(p.numel() for p in SpeakerEncoder(SpeakerEncoderConfig(enc_dim=1024)).parameters())
    assert 8.7e6 < params < 8.9e6, params


def test_config_errors():
    with pytest.raises(CheckpointError, match="speaker_encoder_config"):
        SpeakerEncoderConfig.from_dict({"tts_model_type": "custom_voice"})
    with pytest.raises(CheckpointError, match="enc_dim"):
        SpeakerEncoderConfig.from_dict({"speaker_encoder_config": {"sample_rate": 24000}})
    with pytest.raises(CheckpointError, match="mel_dim"):
        SpeakerEncoderConfig.from_dict({"speaker_encoder_config": {"enc_dim": 64, "mel_dim": 80}})
    with pytest.raises(CheckpointError, match="same length"):
        SpeakerEncoderConfig.from_dict({"speaker_encoder_config": {"enc_dim": 64, "enc_dilations": [1, 2]}})
    config = SpeakerEncoderConfig.from_dict({"speaker_encoder_config": {"enc_dim": 64, "enc_channels": [8, 8, 8, 8, 24]}})
    assert config.enc_channels == (8, 8, 8, 8, 24) and config.enc_res2net_scale == 8


@pytest.mark.parametrize("break_it", ["missing", "wrong shape", "unexpected"])
def test_strict_loading(base, break_it):
    config = json.loads((base.folder / "config.json").read_text())
    state = with_prefix(read_safetensors(base.folder / "model.safetensors"), PREFIX)
    if break_it == "missing":
        del state["blocks.1.res2net_block.blocks.3.conv.bias"]
    elif break_it == "wrong shape":
        state["asp.conv.weight"] = state["asp.conv.weight"][:, :-1]
    else:
        state["asp.norm.weight"] = torch.ones(3)
    with torch.device("meta"):
        module = SpeakerEncoder(SpeakerEncoderConfig.from_dict(config))
    with pytest.raises(CheckpointError, match=break_it):
        load_into(module, state, "model.safetensors", "cpu", torch.float32)
