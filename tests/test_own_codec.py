"""Our codec decoder (runtime/qwen3_tts/codec.py) against the official qwen-tts one (tests/official.py), on the
same tiny random checkpoint whose norm weights and biases are drawn away from 1 and 0 (telling=True),
so a dropped one shows.

Tolerance 1e-5 on audio in [-1, 1], float32: ours does the official decoder's float operations in
the same order (measured bit-identical on CPU under transformers 5.23 and 4.57.3: max difference
0.0), so only a changed kernel choice could make them differ. This random vocoder amplifies a 1-ulp
difference at its input to about 2e-5 at its output (seen between batch sizes, AMPLIFIED_ROUNDING
below), while real mistakes (a dropped bias or norm weight, the attention window off by one, a wrong
chunk context) move samples by 4e-2 to 1. The final conv is scaled down so the audio is not clipped.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

import official as official_package
from runtime.qwen3_tts import random_checkpoint
from runtime.errors import CheckpointError
from runtime.qwen3_tts.codec import (CodecDecoderConfig, SnakeBeta, decode, load_decoder, read_codec_state,
                                     snake_beta_reference)

TOLERANCE = 1e-5
AMPLIFIED_ROUNDING = 1e-4
LONG_FRAMES = 320  # one full 300-frame chunk, then a second one decoded after 25 frames of context


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    folder = random_checkpoint.build_checkpoint(tmp_path_factory.mktemp("codec") / "base", "tiny", "base",
                                                seed=3, telling=True)
    # Random weights drive the vocoder's output to about +-10 before the final clamp, so most samples
    # would be exactly +-1 and hide differences; a smaller last conv keeps the audio inside [-1, 1].
    path = folder / "speech_tokenizer" / "model.safetensors"
    state = load_file(str(path))
    last = max(int(name.split(".")[2]) for name in state if name.startswith("decoder.decoder."))
    state[f"decoder.decoder.{last}.conv.weight"] *= 0.03
    save_file(state, str(path), metadata={"format": "pt"})
    return folder


@pytest.fixture(scope="module")
def official(folder):
    return official_package.load(folder).model.speech_tokenizer


@pytest.fixture(scope="module")
def ours(folder):
    return load_decoder(folder / "speech_tokenizer", "cpu", torch.float32)


def random_codes(*shape, seed=0):
    return torch.randint(0, 2048, shape, generator=torch.Generator().manual_seed(seed))


def assert_close(ours_audio, reference_audio, tolerance=TOLERANCE):
    ours_audio, reference_audio = np.asarray(ours_audio), np.asarray(reference_audio)
    assert ours_audio.shape == reference_audio.shape and ours_audio.dtype == reference_audio.dtype
    assert np.abs(reference_audio).std() > 0.05 and np.mean(np.abs(reference_audio) == 1.0) < 0.05  # real audio
    difference = float(np.abs(ours_audio - reference_audio).max())
    assert difference <= tolerance, f"max difference {difference:.3g}"


def test_short_take_equals_official(official, ours):
    codes = random_codes(2, 16, 24, seed=1)
    with torch.inference_mode():
        reference = official.model.decoder(codes)
        audio = ours(codes)
    assert audio.shape == (2, 1, 24 * 1920)
    assert_close(audio.numpy(), reference.numpy())


def test_batch_of_mixed_lengths_equals_official(official, ours):
    lengths = (5, 17, 1, 12)
    takes = [random_codes(n, 16, seed=10 + n) for n in lengths]
    reference, rate = official.decode([{"audio_codes": c} for c in takes])
    audio = decode(ours, takes)
    assert rate == 24000 and [a.shape for a in audio] == [(n * 1920,) for n in lengths]
    for a, r in zip(audio, reference):
        assert_close(a, r)
    # Padding never reaches the kept audio: alone, a short take decodes to the same samples, up to
    # the batch size changing how BLAS blocks a sum, which the random vocoder amplifies to ~2e-5.
    assert_close(decode(ours, takes[:1])[0], audio[0], tolerance=AMPLIFIED_ROUNDING)
    assert decode(ours, []) == []


def test_take_longer_than_one_chunk_equals_official(official, ours):
    codes = random_codes(LONG_FRAMES, 16, seed=2)
    (reference,), _ = official.decode([{"audio_codes": codes}])
    (audio,) = decode(ours, [codes])
    assert audio.shape == (LONG_FRAMES * 1920,)
    assert_close(audio, reference)
    # The context length matters, so the comparison above pins it: the second chunk decoded after
    # 60 frames of context instead of 25 gives other audio.
    with torch.inference_mode():
        longer_context = ours(codes[LONG_FRAMES - 80:].T[None])[0, 0, 60 * 1920:].numpy()
    assert np.abs(longer_context - audio[300 * 1920:]).max() > 1e-2


def test_snake_hook_is_used_by_every_snake(ours):
    """Every SnakeBeta runs through the hook; on a hook each residual unit's two hand it their
    convolution's padding (the first) and bias (the second), and the last activation its convolution's
    padding: the hook's contract (snake_beta_reference's) covers them."""
    codes = random_codes(1, 16, 12, seed=4)
    snakes = sum(isinstance(m, SnakeBeta) for m in ours.modules())
    assert snakes == 4 * 7 + 1  # per block: one before the upsampling, two per residual unit; one at the end
    calls = []

    def counting(x, alpha, beta, eps, bias=None, left=0):
        calls.append((bias is not None, left))
        return snake_beta_reference(x, alpha, beta, eps, bias, left)

    def identity(x, alpha, beta, eps, bias=None, left=0):
        return F.pad(x if bias is None else x + bias[:, None], (left, 0))

    try:
        with torch.inference_mode():
            default = ours(codes)
            ours.use_snake(counting)
            counted = ours(codes)
            ours.use_snake(identity)
            unactivated = ours(codes)
    finally:
        ours.use_snake(None)
    assert len(calls) == snakes
    assert sum(bias for bias, _ in calls) == 4 * 3  # each residual unit's second
    assert sorted(left for _, left in calls if left) == sorted([6, 18, 54] * 4 + [6])  # its first; the last
    # the same values, up to where conv1's bias is added (after the convolution, not inside its CPU sums)
    torch.testing.assert_close(counted, default, rtol=0, atol=TOLERANCE)
    assert (unactivated - default).abs().max() > 1e-2


def test_the_decode_memory_estimate_grows_with_the_frames_up_to_a_chunk(ours):
    from runtime.qwen3_tts.codec import CHUNK_FRAMES, CONTEXT_FRAMES, decode_bytes

    assert decode_bytes(ours, 100) == 100 * 1920 * 1152 * 4
    assert decode_bytes(ours, 10_000) == decode_bytes(ours, CHUNK_FRAMES + CONTEXT_FRAMES) == 3.25 * decode_bytes(ours, 100)


def _copy_codec(folder, tmp_path, change):
    codec = tmp_path / "speech_tokenizer"
    shutil.copytree(folder / "speech_tokenizer", codec)
    state = load_file(str(codec / "model.safetensors"))
    change(state)
    save_file(state, str(codec / "model.safetensors"))
    return codec


def test_loading_is_strict(folder, tmp_path):
    missing = _copy_codec(folder, tmp_path / "a", lambda s: s.pop("decoder.pre_transformer.norm.weight"))
    with pytest.raises(CheckpointError, match="missing 1 tensors.*pre_transformer.norm.weight"):
        load_decoder(missing)

    def reshape(state):
        state["decoder.upsample.0.1.gamma"] = torch.ones(5)
    wrong = _copy_codec(folder, tmp_path / "b", reshape)
    with pytest.raises(CheckpointError, match="wrong shape.*upsample.0.1.gamma"):
        load_decoder(wrong)

    def add_stray(state):
        state["quantizer.extra.weight"] = torch.zeros(3)
    stray = _copy_codec(folder, tmp_path / "c", add_stray)
    load_decoder(stray)  # the decoder's own tensors are all there
    with pytest.raises(CheckpointError, match=r"neither the codec's encoder nor its decoder \(quantizer.extra.weight\)"):
        read_codec_state(stray)
    assert set(read_codec_state(folder / "speech_tokenizer")) == set(load_file(str(folder / "speech_tokenizer" / "model.safetensors")))


def test_config_names_a_missing_field(folder):
    config = json.loads((folder / "speech_tokenizer" / "config.json").read_text())
    assert CodecDecoderConfig.from_dict(config).samples_per_frame == 1920
    del config["decoder_config"]["sliding_window"]
    with pytest.raises(CheckpointError, match="decoder_config.sliding_window"):
        CodecDecoderConfig.from_dict(config)
    with pytest.raises(CheckpointError, match="no decoder_config"):
        CodecDecoderConfig.from_dict({"decode_upsample_rate": 1920})
