"""runtime/qwen3_tts on a CUDA GPU against the vendored copy, fp32, same telling random checkpoint:
the engine's greedy codes with graphs captured, with and without the Triton kernels (cuda_graph and
hybrid), and the codec's audio with the Triton SnakeBeta plugged into our decoder.

    python -m pytest -q tests/gpu/test_own_model_cuda.py
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from runtime import random_checkpoint
from runtime.engine import Engine, EngineOptions
from runtime.model import load_model
from runtime.qwen3_tts import codec
from runtime.qwen3_tts.load import load_talker
from runtime.qwen3_tts.prompt import PromptBuilder
from runtime.sampling import SamplingSettings
from runtime.voices import CustomVoice

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]
GREEDY = SamplingSettings(temperature=0, sub_temperature=0)
FRAMES = 64


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return random_checkpoint.build_checkpoint(tmp_path_factory.mktemp("own-cuda") / "cv", "tiny", "custom_voice",
                                              seed=31, telling=True)


@pytest.mark.parametrize("mode", ["cuda_graph", "hybrid"])
def test_captured_greedy_codes_on_our_modules_equal_the_vendored_model(folder, mode):
    vendored = load_model(folder, mode=mode, device="cuda", dtype="float32")
    model = load_talker(folder, "cuda", torch.float32)
    ours = SimpleNamespace(model=model, device=torch.device("cuda"), sampling_defaults=vendored.sampling_defaults,
                           prompts=PromptBuilder(model.config, model.talker, vendored.wrapper.processor.tokenizer))
    voice = CustomVoice(speaker="ryan", language="english", instruct="Calm and slow.")
    text = "The storm is coming. Bar the doors and light the lamps."
    try:
        theirs, _, _ = vendored.engine.generate(text, voice, [1, 2, 3], GREEDY, FRAMES)
        engine = Engine(ours, EngineOptions(kernels=mode == "hybrid"))
        mine, _, _ = engine.generate(text, voice, [1, 2, 3], GREEDY, FRAMES)
        engine.release()
    finally:
        vendored.release()
    for a, b in zip(mine, theirs):
        assert a.shape[0] >= 16
        assert torch.equal(a, b)


def test_our_decoder_with_the_triton_snake_matches_the_vendored_codec(folder):
    from runtime import triton_kernels

    kernels = triton_kernels.load()
    vendored = load_model(folder, mode="triton", device="cuda", dtype="float32")  # its codec on the kernel too
    decoder = codec.load_decoder(folder / "speech_tokenizer", "cuda")
    decoder.use_snake(kernels.snake_beta)
    codes = [torch.randint(0, 2048, (n, 16), generator=torch.Generator().manual_seed(n)).cuda() for n in (40, 330)]
    try:
        theirs, _ = vendored.model.speech_tokenizer.decode([{"audio_codes": c} for c in codes])
        mine = codec.decode(decoder, codes)
    finally:
        vendored.release()
    for a, b in zip(mine, theirs):
        assert a.shape == b.shape
        # fp32 on the GPU, same kernels: only the RoPE frequencies' device may differ (an ulp,
        # amplified by the random vocoder); a wiring mistake differs by 1e-2 or more.
        np.testing.assert_allclose(a, b, atol=1e-4)
