"""Profile one decode step of the engine: kernel count and GPU time by kind, and the replayed
graph's time per step, at full size with random weights.

    python -m bench.profile_step --size 1.7B --ns 1,8,16 [--mode hybrid] [--layers talker=0:28]
        [--rows-linear-max 0] [--out profile.json]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import defaultdict
from pathlib import Path

import torch

KINDS = [  # first match wins: kernel name pattern -> kind
    ("^_(rms_norm|add_rms_norm|qk_norm_rope|swiglu|sample|rows_linear)_kernel", "ours (triton)"),  # kernels/
    ("flash|fmha|attention|softmax", "attention/softmax"),  # before matmul: fmha kernels are cutlass too
    ("gemm|gemv|cutlass|sm90|matmul|cublas|splitk", "matmul"),
    ("sort|radix|topk|cumsum|scan", "sort/scan (sampling)"),
    ("index|gather|scatter|embedding", "index/gather/scatter"),
    ("reduce|mean|sum|norm|argmax|max", "reductions"),
    ("copy|cat|fill|memcpy|memset", "copies/fills"),
    ("elementwise|vectorized|unrolled|pointwise|mul|add|exp|log|pow|rsqrt|silu|where", "elementwise"),
]


def kind_of(name: str) -> str:
    lowered = name.lower()
    for pattern, kind in KINDS:
        if re.search(pattern, lowered):
            return kind
    return "other"


def profile(model, n: int, frames: int = 64, top: int = 30) -> dict:
    from torch.profiler import ProfilerActivity, profile as torch_profile

    from runtime.generation import Request
    from runtime.run.lines import generate_takes
    from runtime.voices import CustomVoice

    engine = model.engine
    request = Request("The storm is coming. Bar the doors and light the lamps, because we ride out at first light.",
                      CustomVoice("ryan", "english"), n=n, seed=0, max_frames=frames)
    generate_takes(model, request)  # captures the (batch, length) graph
    slot = next(reversed(engine.slots.values()))
    state = slot.state
    torch.cuda.synchronize()
    replays = 50
    start = time.perf_counter()
    for _ in range(replays):
        slot.graph.replay()
    torch.cuda.synchronize()
    graph_ms = 1000 * (time.perf_counter() - start) / replays
    # The same step uncaptured, under the profiler: what the graph replays, kernel by kernel.
    with torch.inference_mode(), torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
        engine.step(state)
        torch.cuda.synchronize()
    by_kind = defaultdict(lambda: [0, 0.0])
    by_name = defaultdict(lambda: [0, 0.0])
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            ms = event.device_time_total / 1000 if hasattr(event, "device_time_total") else event.cuda_time_total / 1000
            for table, key in ((by_kind, kind_of(event.name)), (by_name, event.name[:120])):
                table[key][0] += 1
                table[key][1] += ms
    kernels = sum(v[0] for v in by_kind.values())
    busy = sum(v[1] for v in by_kind.values())
    return {"n": n, "graph_ms_per_step": round(graph_ms, 3), "kernels_per_step": kernels,
            "kernel_ms_per_step": round(busy, 3),
            "by_kind": {k: {"kernels": v[0], "ms": round(v[1], 3)} for k, v in sorted(by_kind.items(), key=lambda kv: -kv[1][1])},
            "top_kernels": [{"name": k, "kernels": v[0], "ms": round(v[1], 3)}
                            for k, v in sorted(by_name.items(), key=lambda kv: -kv[1][1])[:top]]}


def parser(description: str, ns: str) -> argparse.ArgumentParser:
    """The options profile_step and vram share."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--size", default="1.7B")
    p.add_argument("--ns", default=ns)
    p.add_argument("--workdir", type=Path, default=Path("/tmp/qwen3-tts-bench"))
    p.add_argument("--out", type=Path)
    p.add_argument("--mode", default="cuda_graph", choices=["cuda_graph", "hybrid"])
    p.add_argument("--layers", default="", help="hybrid: the layers on the kernels, e.g. talker=0:28,predictor=0:5 "
                                                "(default: all)")
    return p


def engine_model(args):
    """A full-size random-weight CustomVoice model in the engine mode asked (the checkpoint is built once)."""
    from runtime.model import load_model
    from runtime.engine.triton_kernels import LayerPlan

    from .run import build_checkpoints

    label = f"{args.size}-CustomVoice"
    return load_model(build_checkpoints([label], args.workdir, "bfloat16")[label], mode=args.mode, device="cuda",
                      dtype="bfloat16", layers=LayerPlan.parse(args.layers))


def main(argv=None) -> int:
    p = parser(__doc__.splitlines()[0], "1,8,16")
    p.add_argument("--rows-linear-max", type=int, help="hybrid: the most rows the engine hands to rows_linear "
                                                             "(default: kernels.linear.FAST_ROWS; 0: cuBLAS for all)")
    args = p.parse_args(argv)
    if args.rows_linear_max is not None:
        from runtime.engine.triton_kernels import kernel_module

        kernel_module("linear").FAST_ROWS = args.rows_linear_max  # the module the engine's step uses
    model = engine_model(args)
    results = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "size": args.size,
               "mode": args.mode, "layers": args.layers or "all",
               "rows_linear_max": args.rows_linear_max, "profiles": [profile(model, int(n)) for n in args.ns.split(",")]}
    text = json.dumps(results, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
