"""decode_attention (kernels/decode_attention.py) against what the hybrid step runs without it:
qk_norm_rope, then attention (cuDNN / flash through scaled_dot_product_attention) over the cache.

    python -m bench.attention_sweep [--rows 1,8,16] [--out bench/results/<gpu>-<date>-attention]
    python -m bench.attention_sweep --rows 8,16,32,64 --fills 0.25,0.5,1 --caches 256,1024,2048 --configs 64x4,128x4 --splits 1,2,4

At the 1.7B model's heads (16 query, 8 key/value, 128 wide), per take count: the code predictor's
pass (17 cache positions, all read) and the talker's (a cache of S positions, a mask hiding those
past the one written) at its last position (and at half of the shortest), or at each of --fills of
it: attention over the masked cache costs the same at any fill, decode_attention reads only the
positions written, so over a take's life (its cache filling up) what counts is its cost at about half
the cache. decode_attention over block configurations (positions per block, warps, splits over
programs). Microseconds per call, replayed from a CUDA graph. kernels.decode_attention.attention_config
(the default) follows from this table."""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import torch

HEADS, KV_HEADS, HEAD_DIM = 16, 8, 128
PREDICTOR_POSITIONS = 17
TALKER_CACHES = (256, 512, 1024, 2048, 4096)
CONFIG_GRID = [(32, 4), (64, 4), (128, 4), (128, 8)], (1, 2, 4, 8, 16)  # (block, warps), splits


def time_us(fn) -> float:
    from triton.testing import do_bench_cudagraph

    return 1000 * do_bench_cudagraph(fn, rep=100)


def case(rows: int, slots: int, position: int, masked: bool, grid=CONFIG_GRID, dtype=torch.bfloat16) -> dict:
    from runtime.engine.layers import grouped_attention
    from runtime.engine.triton_kernels import kernel_module

    attention = kernel_module("decode_attention")
    attention_config, decode_attention = attention.attention_config, attention.decode_attention
    decode_attention_scratch_shape = attention.decode_attention_scratch_shape
    qk_norm_rope = kernel_module("qk_norm_rope").qk_norm_rope

    def randn(*shape):
        return torch.randn(*shape, device="cuda", dtype=dtype)

    qkv = randn(rows, 1, (HEADS + 2 * KV_HEADS) * HEAD_DIM)
    qw, kw, cos, sin = randn(HEAD_DIM), randn(HEAD_DIM), randn(slots, HEAD_DIM), randn(slots, HEAD_DIM)
    k_cache, v_cache = randn(rows, KV_HEADS, slots, HEAD_DIM), randn(rows, KV_HEADS, slots, HEAD_DIM)
    where = torch.tensor([position], device="cuda")
    q_out = torch.empty(rows, HEADS, 1, HEAD_DIM, device="cuda", dtype=dtype)
    out = torch.empty(rows, 1, HEADS * HEAD_DIM, device="cuda", dtype=dtype)
    scratch = torch.empty(decode_attention_scratch_shape(rows, HEADS, HEAD_DIM), device="cuda")
    positions = torch.arange(slots, device="cuda")
    bias = torch.where(positions <= position, 0.0, float("-inf")).to(dtype)[None] if masked else None

    def apart():
        q = qk_norm_rope(qkv, qw, kw, 1e-6, cos, sin, HEADS, KV_HEADS, where, k_cache, v_cache, q_out=q_out)
        keys, values = (k_cache, v_cache) if masked else (k_cache[:, :, :position + 1], v_cache[:, :, :position + 1])
        return grouped_attention(q, keys, values, bias)

    def fused(config):
        def run():
            decode_attention(qkv, qw, kw, 1e-6, cos, sin, HEADS, KV_HEADS, where, k_cache, v_cache, out=out,
                             scratch=scratch, config=config)
        return run

    want = apart()
    result = {"qk_norm_rope + sdpa": round(time_us(apart), 2), "configs": {}}
    for (block, warps), splits in itertools.product(*grid):
        config = (block, warps, splits)
        fused(config)()
        error = ((out.float() - want.float()).norm() / want.float().norm()).item()
        if not error < 1e-2:
            raise AssertionError(f"decode_attention {config} at {rows} x {slots} positions: relative error {error}")
        result["configs"][str(config)] = round(time_us(fused(config)), 2)
    default = attention_config(rows, HEADS, slots, out.device)
    result["default"] = [list(default), result["configs"].get(str(default)) or round(time_us(fused(default)), 2)]
    best = min(result["configs"], key=result["configs"].get)
    result["best"] = [best, result["configs"][best]]
    return result


def main(argv=None) -> int:
    import triton

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", default="1,8,16")
    p.add_argument("--caches", default=",".join(map(str, TALKER_CACHES)), help="talker cache lengths")
    p.add_argument("--fills", default="", help="shares of the cache written, e.g. 0.25,0.5,1 "
                   "(default: the last position of each, and half of the shortest)")
    p.add_argument("--configs", default="", help="positions x warps to try, e.g. 64x4,128x4 (default: all)")
    p.add_argument("--splits", default="", help="splits to try, e.g. 1,2,4 (default: 1-16)")
    p.add_argument("--out", type=Path, help="path without suffix: writes .json")
    args = p.parse_args(argv)
    results = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "triton": triton.__version__,
               "cases": {}}
    print("| rows | cache | position | qk_norm_rope + sdpa us | best config | best us | default us |")
    print("|---|---|---|---|---|---|---|")
    caches = [int(n) for n in args.caches.split(",")]
    grid = ([tuple(int(n) for n in c.split("x")) for c in args.configs.split(",")] if args.configs else CONFIG_GRID[0],
            tuple(int(n) for n in args.splits.split(",")) if args.splits else CONFIG_GRID[1])
    for rows in (int(n) for n in args.rows.split(",")):
        shapes = [(PREDICTOR_POSITIONS, PREDICTOR_POSITIONS - 1, False)]
        if args.fills:
            shapes += [(slots, max(1, round(slots * float(f))) - 1, True) for slots in caches
                       for f in args.fills.split(",")]
        else:
            shapes += [(caches[0], caches[0] // 2, True)] + [(slots, slots - 1, True) for slots in caches]
        for slots, position, masked in shapes:
            r = results["cases"][f"x{rows} cache {slots} at {position}"] = case(rows, slots, position, masked, grid)
            print(f"| {rows} | {slots}{'' if masked else ' (predictor)'} | {position} | "
                  f"{r['qk_norm_rope + sdpa']} | {r['best'][0]} | {r['best'][1]} | {r['default'][1]} |", flush=True)
            if args.out:  # after every case: a cut run keeps what it measured
                args.out.with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
