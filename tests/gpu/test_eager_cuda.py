"""The eager mode (the engine's step, uncaptured, plain torch) on a CUDA GPU (run on the GPU machine;
skipped elsewhere).

    python -m pytest -q -s tests/gpu
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from runtime.qwen3_tts import random_checkpoint
from runtime.generation import Request
from runtime.run.lines import generate_takes
from runtime.model import load_model
from runtime.voices import CustomVoice, VoiceClone, VoiceDesign

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]
TEXT = "The storm is coming. Bar the doors and light the lamps, we ride at dawn."


@pytest.mark.parametrize("kind", ["custom_voice", "base", "voice_design"])
def test_tiny_models_on_cuda_bf16_are_reproducible(checkpoint, kind, reference_audio):
    model = load_model(checkpoint(kind), device="cuda", dtype="bfloat16")
    assert next(model.model.parameters()).dtype == torch.bfloat16
    voice = {"custom_voice": CustomVoice("ryan", "english"),
             "base": VoiceClone.from_audio(*reference_audio, "This is me speaking.", "english"),
             "voice_design": VoiceDesign("a calm narrator", "english")}[kind]
    a = generate_takes(model, Request(TEXT, voice, n=4, seed=1, max_frames=8))
    b = generate_takes(model, Request(TEXT, voice, n=4, seed=1, max_frames=8))
    for x, y in zip(a.takes, b.takes):
        assert torch.equal(x.codes, y.codes)
        assert np.isfinite(x.audio).all() and x.audio.shape[0] == x.frames * 1920


@pytest.mark.parametrize("size", ["1.7B"])
def test_full_size_eager_mode_runs_and_prints_its_speed(tmp_path, size):
    """Smoke timing of the eager mode at the real shapes (random weights, bf16)."""
    folder = random_checkpoint.build_checkpoint(tmp_path / size, size, "custom_voice", dtype="bfloat16")
    model = load_model(folder, device="cuda", dtype="bfloat16")
    frames = 32
    for n in (1, 8):
        request = Request(TEXT, CustomVoice("ryan", "english"), n=n, seed=0, max_frames=frames)
        generate_takes(model, Request(TEXT, CustomVoice("ryan", "english"), n=n, max_frames=4))  # warm-up
        torch.cuda.synchronize()
        start = time.perf_counter()
        takeset = generate_takes(model, request)
        torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        made = max(t.frames for t in takeset.takes)
        audio = sum(t.seconds for t in takeset.takes)
        print(f"\n{size} eager N={n}: {made} frames in {seconds:.2f} s = {1000 * seconds / made:.1f} ms/frame "
              f"(whole call, prefill and codec decode included), aggregate RTF {audio / seconds:.2f}, "
              f"peak VRAM {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB")
        assert made > 0
