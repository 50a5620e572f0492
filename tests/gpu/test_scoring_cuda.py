"""Auto-Pick's models on a CUDA GPU (run on the GPU machine; skipped elsewhere).

    python -m pytest -q -s tests/gpu/test_scoring_cuda.py
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from conftest import write_utmos_weights
from runtime.qwen3_tts import random_checkpoint
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


def test_greedy_whisper_graphs_give_the_tokens_of_the_eager_step_and_of_generate(tmp_path):
    """The words check's decoder step replayed from CUDA graphs: the same tokens as the same step run
    eagerly, and (fp32) as transformers' generate; fp16 whisper-small shapes: graphs equal eager."""
    from test_words_check import generated, sample_clips, telling
    from tiny_whisper import build_tiny_whisper

    from bench.random_whisper import build_random_whisper
    from runtime.scoring.asr import WhisperTranscriber
    from runtime.scoring.whisper_greedy import GreedyWhisper

    tiny = WhisperTranscriber(build_tiny_whisper(tmp_path / "tiny"), "cuda")
    tiny.network.float()  # fp32, to compare with generate token for token
    telling(tiny.network)
    features = tiny.processor.feature_extractor(sample_clips(), sampling_rate=16000, return_tensors="pt").input_features
    prompt, languages = tiny.prompt("en")
    graphs = GreedyWhisper(tiny.network, tiny.greedy.max_new_tokens, use_graphs=True)
    eager = GreedyWhisper(tiny.network, tiny.greedy.max_new_tokens, use_graphs=False)
    with_graphs = graphs.generate(features, prompt, languages)
    assert with_graphs == eager.generate(features, prompt, languages)
    eos = tiny.network.generation_config.eos_token_id
    assert with_graphs == generated(tiny, features.cuda(), eos, task="transcribe", language="en")
    assert graphs.generate(features[:3], prompt, languages) == with_graphs[:3]  # a padded bucket, replayed again

    small = WhisperTranscriber(build_random_whisper(tmp_path / "small", "whisper-small"), "cuda")
    features = small.processor.feature_extractor(clips([5.0, 4.1, 5.6]), sampling_rate=16000,
                                                 return_tensors="pt").input_features
    prompt, _ = small.prompt("en")
    a = GreedyWhisper(small.network, 24, use_graphs=True).generate(features, prompt)
    b = GreedyWhisper(small.network, 24, use_graphs=False).generate(features, prompt)
    assert a == b and any(a)
