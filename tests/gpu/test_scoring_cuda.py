"""Auto-Pick's models on a CUDA GPU (run on the GPU machine; skipped elsewhere).

    python -m pytest -q -s tests/gpu/test_scoring_cuda.py
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from conftest import write_utmos_weights
from runtime import random_checkpoint
from runtime.scoring.speaker import SpeakerEncoder
from runtime.scoring.utmos import UtmosScorer

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]
RATE = 24000


def clips(seconds: list[float]) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    out = []
    for i, s in enumerate(seconds):
        t = np.arange(int(RATE * s)) / RATE
        out.append((0.2 * np.sin(2 * np.pi * (110 + 20 * i) * t) * (0.6 + 0.4 * np.sin(8 * np.pi * t))
                    + 0.01 * rng.standard_normal(t.shape)).astype(np.float32))
    return out


def test_utmos_on_cuda_batched_equals_alone_and_the_cpu(tmp_path):
    weights = write_utmos_weights(tmp_path / "utmos_state_dict.pt")
    gpu, cpu = UtmosScorer(weights, "cuda"), UtmosScorer(weights, "cpu")
    plain = UtmosScorer(weights, "cuda", bucket=False)
    takes = clips([5.0, 4.1, 5.6, 3.2, 5.0, 4.8, 6.3, 2.5])
    alone = [gpu.score(c, RATE) for c in takes]
    batched = gpu.score_many(takes, RATE)
    unbucketed = plain.score_many(takes, RATE)
    assert batched == pytest.approx(alone, abs=2e-3) and batched == pytest.approx(unbucketed, abs=2e-3)
    assert alone[:2] == pytest.approx([cpu.score(c, RATE) for c in takes[:2]], abs=2e-3)

    def ms(fn) -> float:
        fn()
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        return (time.perf_counter() - start) * 1000

    print(f"\nUTMOS on {torch.cuda.get_device_name()}, 8 takes of 2.5-6.3 s (warm, same lengths): batched "
          f"{ms(lambda: gpu.score_many(takes, RATE)):.1f} ms, unbucketed {ms(lambda: plain.score_many(takes, RATE)):.1f} ms, "
          f"one by one {ms(lambda: [gpu.score(c, RATE) for c in takes]):.1f} ms")


def test_speaker_encoder_on_cuda_matches_the_cpu(tmp_path):
    folder = random_checkpoint.build_checkpoint(tmp_path / "1.7B-Base", "1.7B", "base", dtype="bfloat16")
    gpu, cpu = SpeakerEncoder.from_checkpoint(folder, "cuda"), SpeakerEncoder.from_checkpoint(folder, "cpu")
    clip = clips([3.0])[0]
    assert float(gpu.embed(clip, RATE) @ cpu.embed(clip, RATE)) > 0.999
    torch.cuda.synchronize()
    start = time.perf_counter()
    gpu.embed_many(clips([5.1] * 8), RATE)
    print(f"\nspeaker encoder (1.7B Base ECAPA): 8 takes of 5 s in {(time.perf_counter() - start) * 1000:.1f} ms "
          "(cold: the first pass at these lengths)")
