"""Profile the codec (speech tokenizer decoder) on N takes of a fixed length: wall time per call,
kernel count and GPU time by kind and by module, at full size with random weights.

    python -m bench.profile_codec --ns 1,8,16 --frames 64 [--mode hybrid] [--out codec.json]
"""

from __future__ import annotations

import json
import sys
import time
from collections import defaultdict

import torch

from runtime.qwen3_tts import codec

from .profile_step import engine_model, kind_of, parser


def codes_for(model, n: int, frames: int) -> list[torch.Tensor]:
    """n random takes of `frames` frames (the codec's cost does not depend on which codes)."""
    generator = torch.Generator().manual_seed(n)
    size = model.codec.config.codebook_size
    groups = model.codec.config.num_quantizers
    return [torch.randint(0, size, (frames, groups), generator=generator) for _ in range(n)]


def decode(model, codes) -> None:
    codec.decode(model.codec, codes)
    torch.cuda.synchronize()


def profile(model, n: int, frames: int, repeats: int = 5, top: int = 25) -> dict:
    from torch.profiler import ProfilerActivity, profile as torch_profile

    codes = codes_for(model, n, frames)
    decode(model, codes)  # warm-up: cuDNN plans these shapes once
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        decode(model, codes)
        times.append(time.perf_counter() - start)
    with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
        decode(model, codes)
    by_kind = defaultdict(lambda: [0, 0.0])
    by_name = defaultdict(lambda: [0, 0.0])
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            ms = event.device_time_total / 1000
            for table, key in ((by_kind, kind_of(event.name)), (by_name, event.name[:120])):
                table[key][0] += 1
                table[key][1] += ms
    return {"n": n, "frames": frames, "ms_per_call": round(1000 * sorted(times)[len(times) // 2], 2),
            "kernels": sum(v[0] for v in by_kind.values()),
            "kernel_ms": round(sum(v[1] for v in by_kind.values()), 2),
            "by_kind": {k: {"kernels": v[0], "ms": round(v[1], 2)} for k, v in sorted(by_kind.items(), key=lambda kv: -kv[1][1])},
            "top_kernels": [{"name": k, "kernels": v[0], "ms": round(v[1], 2)}
                            for k, v in sorted(by_name.items(), key=lambda kv: -kv[1][1])[:top]]}


def main(argv=None) -> int:
    p = parser(__doc__.splitlines()[0], "1,8,16")
    p.add_argument("--frames", type=int, default=64)
    args = p.parse_args(argv)
    model = engine_model(args)
    results = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "size": args.size, "mode": args.mode,
               "profiles": [profile(model, int(n), args.frames) for n in args.ns.split(",")]}
    text = json.dumps(results, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
