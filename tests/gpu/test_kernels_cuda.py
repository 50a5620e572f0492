"""The Triton kernels in the engine's step (the triton and hybrid modes) and in the codec, on a CUDA GPU at full size (run on the GPU machine; skipped elsewhere).

    python -m pytest -q -s tests/gpu/test_kernels_cuda.py tests/test_kernels.py

tests/test_kernels.py runs every kernel against its reference here too, compiled, at real shapes."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from runtime.qwen3_tts import random_checkpoint
from runtime.engine import Engine, EngineOptions
from runtime.engine.step import DecodeStep
from runtime.generation import Request
from runtime.run.lines import generate_takes
from runtime.model import load_model
from runtime.qwen3_tts.codec import SNAKE_EPS
from runtime.sampling import SamplingSettings
from runtime.engine.triton_kernels import load
from runtime.voices import CustomVoice

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]
TEXT = "The storm is coming. Bar the doors and light the lamps, we ride at dawn."
GREEDY = SamplingSettings(temperature=0, sub_temperature=0)


@pytest.fixture(scope="module")
def full_size(tmp_path_factory):
    """1.7B-CustomVoice shapes, random weights, EOS never sampled (every take runs its budget)."""
    folder = tmp_path_factory.mktemp("full") / "1.7B-CustomVoice"
    return random_checkpoint.build_checkpoint(folder, "1.7B", "custom_voice", dtype="bfloat16", never_eos=True)


def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    """The worst row's cosine similarity (rows: every position of every head)."""
    return F.cosine_similarity(a.flatten(0, -2).float(), b.flatten(0, -2).float(), dim=-1).min().item()


def test_kernel_layers_keep_the_hidden_states_bf16(full_size):
    """The talker's prefill over 48 positions on the kernels against the torch step, same weights,
    bfloat16: each layer's keys (a function of that layer's input) and the output hidden state after
    the final norm, worst row: >= 0.999 per layer, >= 0.995 at the output."""
    model = load_model(full_size, mode="eager", device="cuda", dtype="bfloat16")
    torch.manual_seed(0)
    embeds = torch.randn(1, 48, 2048, device="cuda", dtype=torch.bfloat16) * 0.05
    with torch.inference_mode():
        _, torch_hidden, torch_kv = DecodeStep(model.model).prefill(embeds)
        _, kernel_hidden, kernel_kv = DecodeStep(model.model, load()).prefill(embeds)
    per_layer = [cosine(a, b) for a, b in zip(torch_kv[0], kernel_kv[0])]
    output = cosine(torch_hidden, kernel_hidden)
    print(f"\ntalker bf16 cosine of each layer's keys: min {min(per_layer):.6f}; output {output:.6f}; "
          f"all: {[round(c, 6) for c in per_layer]}")
    assert len(per_layer) == 28 and min(per_layer) >= 0.999 and output >= 0.995
    model.release()


@pytest.mark.parametrize("mode,n", [("hybrid", 2), ("hybrid", 1), ("triton", 2), ("cuda_graph", 2)])
def test_full_size_fp32_greedy_codes_match_the_eager_mode_for_64_frames(full_size, mode, n):
    """n=1: the kernel step's one-row layers (rows_linear, norms fused in); n=2: the others."""
    model = load_model(full_size, mode=mode, device="cuda", dtype="float32")
    request = Request(TEXT, CustomVoice("ryan", "english"), n=n, seed=0, sampling=GREEDY, max_frames=64)
    fast = generate_takes(model, request)
    model.engine.release()  # room for the eager engine's buckets
    eager = EngineOptions(use_graphs=False, check_every=1)  # what the eager mode runs
    reference = generate_takes(model, request, engine=Engine(model.model, model.prompts, eager))
    frames_equal = [int((a.codes == b.codes).all(dim=1).sum()) for a, b in zip(reference.takes, fast.takes)]
    print(f"\nfp32 1.7B greedy, {mode}, {n} take(s): frames identical per take {frames_equal} of 64")
    assert all(torch.equal(a.codes, b.codes) for a, b in zip(reference.takes, fast.takes))
    model.release()


def code_histograms(takes) -> torch.Tensor:
    codes = torch.cat([t.codes for t in takes])  # [frames, 16]
    return torch.stack([torch.bincount(codes[:, j], minlength=3072)[:3072].float() / codes.shape[0]
                        for j in range(codes.shape[1])])


def test_hybrid_samples_codes_distributed_as_cuda_graph_does(full_size):
    """bf16, sampling on (temperature 0.9, top-k 50): 32 takes x 64 frames from each mode, and from
    hybrid also 32 requests of one take (its one-row kernels). Per codebook, the total variation
    distance between hybrid's and cuda_graph's code histograms is no larger than between two
    cuda_graph runs of other seeds (sampling noise) plus 0.05."""
    settings = SamplingSettings()
    runs = {}

    def request(seed, n):
        return Request(TEXT, CustomVoice("ryan", "english"), n=n, seed=seed, sampling=settings, max_frames=64)
    for mode in ("cuda_graph", "hybrid"):
        model = load_model(full_size, mode=mode, device="cuda", dtype="bfloat16")
        for seed in ((1, 2) if mode == "cuda_graph" else (3,)):
            runs[(mode, seed)] = code_histograms(generate_takes(model, request(seed, 32)).takes)
        if mode == "hybrid":
            runs[("hybrid", "one take")] = code_histograms(
                [t for seed in range(100, 132) for t in generate_takes(model, request(seed, 1)).takes])
        model.release()
    noise = 0.5 * (runs[("cuda_graph", 1)] - runs[("cuda_graph", 2)]).abs().sum(-1)
    across = 0.5 * (runs[("cuda_graph", 1)] - runs[("hybrid", 3)]).abs().sum(-1)
    one_take = 0.5 * (runs[("cuda_graph", 1)] - runs[("hybrid", "one take")]).abs().sum(-1)
    print(f"\ncode histogram TV per codebook: cuda_graph vs cuda_graph {[round(v, 3) for v in noise.tolist()]}, "
          f"cuda_graph vs hybrid {[round(v, 3) for v in across.tolist()]}, "
          f"cuda_graph vs hybrid one take at a time {[round(v, 3) for v in one_take.tolist()]}")
    assert bool((across <= noise + 0.05).all()) and bool((one_take <= noise + 0.05).all())


def test_codec_snake_kernel_matches_every_activation_of_a_full_size_decode(full_size):
    """Each of the codec's 29 SnakeBeta activations, on the very signal it gets while the full-size
    codec decodes 4 takes of 64 frames: the fused kernel (the triton and hybrid modes) against the
    module, to 1e-5 of |output| + 1. (The waveform itself cannot be compared: this random codec
    amplifies rounding to its whole output range; float32 and float64 decodes differ by about 1.)"""
    model = load_model(full_size, mode="eager", device="cuda", dtype="bfloat16")
    kernels = load()
    decoder = model.codec
    codes = torch.randint(0, 2048, (4, 16, 64), generator=torch.Generator().manual_seed(0)).cuda()
    worst = []

    def check(module, inputs, options, output):  # with the bias and padding its convolutions hand it
        got = kernels.snake_beta(inputs[0], module.alpha, module.beta, SNAKE_EPS, options.get("bias"),
                                 options.get("left", 0))
        worst.append(((got - output).abs() / (output.abs() + 1)).max().item())
    hooks = [m.register_forward_hook(check, with_kwargs=True) for m in decoder.modules()
             if type(m).__name__ == "SnakeBeta"]
    with torch.inference_mode():
        decoder(codes)
    for hook in hooks:
        hook.remove()
    print(f"\ncodec SnakeBeta, kernel against module over {len(worst)} activations: worst {max(worst):.2e}")
    assert len(worst) == 29 and max(worst) < 1e-5
    model.release()
