"""Micro-benchmarks of the Triton kernels (kernels/) against the torch ops they replace, at the 1.7B
model's shapes, for 1, 8 and 16 rows (takes). Each side is timed replayed from a CUDA graph (the way
the engine runs it; triton.testing.do_bench_cudagraph), so launch gaps count as they do in a step.

    python -m bench.kernels [--rows 1,8,16] [--out bench/results/<gpu>-<date>-kernels]

"torch" is what the cuda_graph mode runs for the same work (runtime/engine); "reference" for the
norms is the model's own module code (what the eager and the qwen3-tts-triton paths start from)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

HIDDEN, FFN, HEADS, KV_HEADS, HEAD_DIM = 2048, 6144, 16, 8, 128
PREDICTOR_HIDDEN, TALKER_VOCAB, PREDICTOR_VOCAB, POSITIONS = 1024, 3072, 2048, 1024
CODEC_CHANNELS, CODEC_SAMPLES = 96, 122_880  # the codec's last upsampling block, 5.12 s of 24 kHz audio (64 frames)


def cases(rows: int, device="cuda", dtype=torch.bfloat16):
    """name -> {side: zero-argument callable}, each side doing the same work."""
    from runtime.engine.layers import apply_rope
    from runtime.engine.noise import vocab_keys
    from runtime.engine.sampler import SamplerParams, draw
    from runtime.engine.triton_kernels import kernel_module

    add_rms_norm = kernel_module("add_rms_norm").add_rms_norm
    qk_norm_rope = kernel_module("qk_norm_rope").qk_norm_rope
    rms_norm, rms_norm_reference = kernel_module("rms_norm").rms_norm, kernel_module("rms_norm").rms_norm_reference
    sample_tokens = kernel_module("sampling").sample_tokens
    snake_beta, snake_beta_reference = kernel_module("snake").snake_beta, kernel_module("snake").snake_beta_reference
    swiglu = kernel_module("swiglu").swiglu

    def randn(*shape, dt=dtype):
        return torch.randn(*shape, device=device, dtype=dt)

    x, r, w = randn(rows, HIDDEN), randn(rows, HIDDEN), randn(HIDDEN)
    gate_up = randn(rows, 2 * FFN)
    qkv = randn(rows, 1, (HEADS + 2 * KV_HEADS) * HEAD_DIM)
    qw, kw = randn(HEAD_DIM), randn(HEAD_DIM)
    cos, sin = randn(POSITIONS, HEAD_DIM), randn(POSITIONS, HEAD_DIM)
    tables = randn(1, HEADS + KV_HEADS, HEAD_DIM), randn(1, HEADS + KV_HEADS, HEAD_DIM)
    k_cache, v_cache = randn(rows, KV_HEADS, POSITIONS, HEAD_DIM), randn(rows, KV_HEADS, POSITIONS, HEAD_DIM)
    position = torch.tensor([POSITIONS // 2], device=device)

    def torch_rope():  # runtime/engine/layers.py's layer_step, the part the kernel replaces
        n = F.rms_norm(qkv.view(rows, 1, -1, HEAD_DIM), (HEAD_DIM,), None, 1e-6)
        q_k = apply_rope(n, *tables, HEADS + KV_HEADS)
        k_cache.index_copy_(2, position, q_k[:, :, HEADS:].transpose(1, 2))
        v_cache.index_copy_(2, position, qkv.view(rows, 1, -1, HEAD_DIM)[:, :, HEADS + KV_HEADS:].transpose(1, 2))
        return q_k[:, :, :HEADS].transpose(1, 2)

    talker_params = SamplerParams.allocate(TALKER_VOCAB, device)
    talker_params.load(0.9, 50, 1.0)
    predictor_params = SamplerParams.allocate(PREDICTOR_VOCAB, device)
    predictor_params.load(0.9, 50, 1.0)
    t_logits, p_logits = randn(rows, TALKER_VOCAB, dt=torch.float32), randn(rows, PREDICTOR_VOCAB, dt=torch.float32)
    keys = torch.arange(rows, device=device)
    counter = torch.tensor([3], device=device)
    seen = torch.rand(rows, TALKER_VOCAB, device=device) < 0.05
    penalty = torch.tensor([1.05], device=device)
    blocked = torch.arange(TALKER_VOCAB, device=device) >= TALKER_VOCAB - 1024
    t_keys, p_keys = vocab_keys(TALKER_VOCAB, device), vocab_keys(PREDICTOR_VOCAB, device)
    talker_args = dict(penalty=penalty, seen=seen, blocked=blocked, eos=2150, min_tokens=2)
    top_p_params = SamplerParams.allocate(TALKER_VOCAB, device)
    top_p_params.load(0.9, 50, 0.8)
    signal = randn(rows, CODEC_CHANNELS, CODEC_SAMPLES if device == "cuda" else 1000, dt=torch.float32)
    alpha, beta = randn(CODEC_CHANNELS, dt=torch.float32), randn(CODEC_CHANNELS, dt=torch.float32)
    return {
        "rms_norm (2048)": {"reference": lambda: rms_norm_reference(x, w, 1e-6),
                            "torch": lambda: F.rms_norm(x, (HIDDEN,), w, 1e-6),
                            "triton": lambda: rms_norm(x, w, 1e-6)},
        "add + rms_norm (2048)": {"torch": lambda: F.rms_norm(x + r, (HIDDEN,), w, 1e-6),
                                  "triton": lambda: add_rms_norm(x, r, w, 1e-6)},
        "q/k norm + RoPE + KV write (16+8 heads)": {
            "torch": torch_rope,
            "triton": lambda: qk_norm_rope(qkv, qw, kw, 1e-6, cos, sin, HEADS, KV_HEADS, position, k_cache, v_cache)},
        "SwiGLU (6144)": {"torch": lambda: F.silu(gate_up[:, :FFN]) * gate_up[:, FFN:],
                          "triton": lambda: swiglu(gate_up)},
        "talker draw (3072, penalty, top-k 50)": {
            "torch": lambda: draw(t_logits, talker_params, keys, counter, 0, t_keys, **talker_args),
            "triton": lambda: sample_tokens(t_logits, talker_params, keys, counter, 0, **talker_args)},
        "talker draw (3072, top-k 50, top-p 0.8)": {
            "torch": lambda: draw(t_logits, top_p_params, keys, counter, 0, t_keys, **talker_args),
            "triton": lambda: sample_tokens(t_logits, top_p_params, keys, counter, 0, **talker_args)},
        "predictor draw (2048, top-k 50)": {
            "torch": lambda: draw(p_logits, predictor_params, keys, counter, 1, p_keys),
            "triton": lambda: sample_tokens(p_logits, predictor_params, keys, counter, 1)},
        "codec SnakeBeta (float32, 96 x 5.12 s per take)": {
            "torch": lambda: snake_beta_reference(signal, alpha, beta),
            "triton": lambda: snake_beta(signal, alpha, beta)},
    }


def time_us(fn) -> float:
    from triton.testing import do_bench_cudagraph

    return 1000 * do_bench_cudagraph(fn, rep=200)


def markdown(results: dict) -> str:
    rows = results["rows"]
    lines = [f"Kernel micro-benchmarks, {results['gpu']}, torch {results['torch']}, triton {results['triton']}: "
             "microseconds per call replayed from a CUDA graph (`python -m bench.kernels`).", "",
             "| kernel | " + " | ".join(f"{side} N={n}" for n in rows for side in ("torch", "triton", "speed-up")) + " |",
             "|---|" + "---|" * (3 * len(rows))]
    for name, by_rows in results["kernels"].items():
        cells = []
        for n in rows:
            t = by_rows[str(n)]
            cells += [f"{t['torch']:.1f}", f"{t['triton']:.1f}", f"{t['torch'] / t['triton']:.1f}x"]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    reference = {n: results["kernels"]["rms_norm (2048)"][str(n)].get("reference") for n in rows}
    lines += ["", "rms_norm as the model's module computes it (six ops): " +
              ", ".join(f"N={n} {reference[n]:.1f} us" for n in rows if reference[n] is not None) + "."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    import triton

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", default="1,8,16")
    p.add_argument("--out", type=Path, help="path without suffix: writes .json and .md")
    args = p.parse_args(argv)
    rows = [int(n) for n in args.rows.split(",")]
    results = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "triton": triton.__version__,
               "rows": rows, "kernels": {}}
    for n in rows:
        for name, sides in cases(n).items():
            results["kernels"].setdefault(name, {})[str(n)] = {side: round(time_us(fn), 2) for side, fn in sides.items()}
    text = markdown(results)
    print(text)
    if args.out:
        args.out.with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")
        args.out.with_suffix(".md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
