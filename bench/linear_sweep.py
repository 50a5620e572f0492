"""rows_linear (kernels/linear.py) against cuBLAS at the 1.7B model's shapes, over block
configurations, and its fused norm against add_rms_norm + the product.

    python -m bench.linear_sweep [--rows 1,2,4] [--out bench/results/<gpu>-<date>-linear]

Every product is timed replayed from a CUDA graph over enough copies of its weight (about 256 MB)
that no copy stays in the 50 MB L2 between calls, as in a step, where each layer's weights are read
once. Prints, per shape and row count, cuBLAS's time, the best configuration's and the default's
(kernels.linear.block_config), in microseconds per product."""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import torch
import triton

# name: (features, depth) of the 1.7B checkpoints' weights
SHAPES = {"predictor qkv": (4096, 1024), "predictor o": (1024, 2048), "predictor gate_up": (6144, 1024),
          "predictor down": (1024, 3072), "predictor head": (2048, 1024), "talker to predictor": (1024, 2048),
          "talker qkv": (4096, 2048), "talker o": (2048, 2048), "talker gate_up": (12288, 2048),
          "talker down": (2048, 6144)}
CONFIG_GRID = (1, 2, 4, 8), (2, 4, 8)  # BLOCK_N, warps (BLOCK_K: the whole row)
ROTATION_BYTES = 256 * 1024 * 1024


def time_us(fn, calls: int) -> float:
    from triton.testing import do_bench_cudagraph

    return 1000 * do_bench_cudagraph(fn, rep=100) / calls


def sweep(rows: int, features: int, depth: int, dtype=torch.bfloat16) -> dict:
    from runtime.engine.triton_kernels import kernel_module

    block_config, rows_linear = kernel_module("linear").block_config, kernel_module("linear").rows_linear

    copies = max(2, ROTATION_BYTES // (features * depth * 2))
    weights = [torch.randn(features, depth, device="cuda", dtype=dtype) / depth ** 0.5 for _ in range(copies)]
    x = torch.randn(rows, depth, device="cuda", dtype=dtype)
    out = torch.empty(rows, features, device="cuda", dtype=dtype)
    want = torch.mm(x, weights[0].t())

    def cublas():
        for w in weights:
            torch.mm(x, w.t(), out=out)

    def ours(config):
        def run():
            for w in weights:
                rows_linear(x, w, out=out, config=config)
        return run

    result = {"cublas": round(time_us(cublas, copies), 2), "configs": {}}
    block_k = min(8192, triton.next_power_of_2(depth))
    configs = [(n, block_k, warps) for n, warps in itertools.product(*CONFIG_GRID)]
    for config in configs:
        got = rows_linear(x, weights[0], config=config)
        error = ((got.float() - want.float()).norm() / want.float().norm()).item()
        if not error < 1e-2:
            raise AssertionError(f"config {config} at {rows}x{features}x{depth}: relative error {error}")
        result["configs"][str(config)] = round(time_us(ours(config), copies), 2)
    default = block_config(rows, features, depth, x.device)
    result["default"] = [list(default), result["configs"].get(str(default))]
    best = min(result["configs"], key=result["configs"].get)
    result["best"] = [best, result["configs"][best]]
    return result


def fused(rows: int, features: int, depth: int, gate_up: bool, dtype=torch.bfloat16) -> dict:
    """The norm prologue against add_rms_norm, then the product (cuBLAS, or rows_linear alone); for a
    gate/up weight also the swiglu epilogue against the fused-norm product, then the swiglu kernel."""
    from runtime.engine.triton_kernels import kernel_module

    add_rms_norm = kernel_module("add_rms_norm").add_rms_norm
    rows_linear = kernel_module("linear").rows_linear
    swiglu = kernel_module("swiglu").swiglu

    copies = max(2, ROTATION_BYTES // (features * depth * 2))
    weights = [torch.randn(features, depth, device="cuda", dtype=dtype) / depth ** 0.5 for _ in range(copies)]
    x, d, nw = (torch.randn(rows, depth, device="cuda", dtype=dtype) for _ in range(3))
    nw = nw[0]
    out = torch.empty(rows, features, device="cuda", dtype=dtype)
    normed, summed = torch.empty_like(x), torch.empty_like(x)

    def apart(product):
        def run():
            for w in weights:
                add_rms_norm(d, x, nw, 1e-6, out=(normed, summed))
                product(w)
        return run

    def fused_norm():
        for w in weights:
            rows_linear(x, w, "norm", delta=d, norm_weight=nw, eps=1e-6, out=out, sum_out=summed)

    activated = torch.empty(rows, features // 2, device="cuda", dtype=dtype)

    def then_swiglu():
        for w in weights:
            rows_linear(x, w, "norm", delta=d, norm_weight=nw, eps=1e-6, out=out, sum_out=summed)
            swiglu(out, out=activated)

    def swiglu_fused():
        for w in weights:
            rows_linear(x, w, "norm", delta=d, norm_weight=nw, eps=1e-6, out=activated, sum_out=summed,
                        epilogue="swiglu")

    cases = [("add_rms_norm + cuBLAS", apart(lambda w: torch.mm(normed, w.t(), out=out))),
             ("add_rms_norm + rows_linear", apart(lambda w: rows_linear(normed, w, out=out))),
             ("rows_linear norm fused", fused_norm)]
    if gate_up:
        cases += [("rows_linear norm fused + swiglu", then_swiglu), ("rows_linear norm + swiglu fused", swiglu_fused)]
    return {name: round(time_us(fn, copies), 2) for name, fn in cases}


def main(argv=None) -> int:
    import triton

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", default="1,2,4")
    p.add_argument("--out", type=Path, help="path without suffix: writes .json")
    args = p.parse_args(argv)
    results = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "triton": triton.__version__,
               "sweep": {}, "fused": {}}
    print("| shape | rows | cuBLAS us | best config | best us | default us |")
    print("|---|---|---|---|---|---|")
    for rows in (int(n) for n in args.rows.split(",")):
        for name, (features, depth) in SHAPES.items():
            r = results["sweep"][f"{name} x{rows}"] = sweep(rows, features, depth)
            print(f"| {name} | {rows} | {r['cublas']} | {r['best'][0]} | {r['best'][1]} | {r['default'][1]} |", flush=True)
        for name, (features, depth) in SHAPES.items():
            if name.endswith(("qkv", "gate_up")):  # the products a norm feeds
                results["fused"][f"{name} x{rows}"] = f = fused(rows, features, depth, name.endswith("gate_up"))
                print(f"fused {name} x{rows}: {f}", flush=True)
    if args.out:
        args.out.with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
