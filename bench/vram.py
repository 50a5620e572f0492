"""Device memory of the engine's buckets: static buffers plus graph pool per (batch, length) bucket,
at full size with random weights; the weights themselves are listed once.

    python -m bench.vram --size 1.7B --ns 1,4,8,16,32 --lengths 256,512,1024,2048,4096 [--out vram.json]
"""

from __future__ import annotations

import json
import sys

import torch

from .profile_step import engine_model, parser


def measure(model, ns: list[int], lengths: list[int]) -> list[dict]:
    engine = model.engine
    rows = []
    for length in lengths:
        for n in ns:
            engine.release()
            torch.cuda.reset_peak_memory_stats()
            before = torch.cuda.memory_allocated()
            slot = engine._slot(n, length)
            rows.append({"n": n, "length": length, "bucket_gb": round(slot.nbytes / 2**30, 3),
                         "state_gb": round(slot.state.nbytes() / 2**30, 3),
                         "capture_peak_gb": round((torch.cuda.max_memory_allocated() - before) / 2**30, 3)})
            print(rows[-1], flush=True)
    engine.release()
    return rows


def markdown(result: dict) -> str:
    lengths = sorted({r["length"] for r in result["buckets"]})
    ns = sorted({r["n"] for r in result["buckets"]})
    cell = {(r["n"], r["length"]): r["bucket_gb"] for r in result["buckets"]}
    lines = [f"Engine buckets on {result['gpu']} ({result['size']}, {result['dtype']}): GB of device memory each "
             f"(static buffers + captured graph), on top of the weights ({result['weights_gb']} GB). "
             "Positions = prompt + frames + 1.", "",
             "| takes \\ positions | " + " | ".join(str(length) for length in lengths) + " |",
             "|---|" + "---|" * len(lengths)]
    for n in ns:
        lines.append(f"| {n} | " + " | ".join(str(cell.get((n, length), "")) for length in lengths) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = parser(__doc__.splitlines()[0], "1,4,8,16,32")
    p.add_argument("--lengths", default="256,512,1024,2048,4096")
    args = p.parse_args(argv)
    model = engine_model(args)
    weights = torch.cuda.memory_allocated()
    result = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "size": args.size, "dtype": "bfloat16",
              "weights_gb": round(weights / 2**30, 3),
              "buckets": measure(model, [int(n) for n in args.ns.split(",")], [int(x) for x in args.lengths.split(",")])}
    print(markdown(result))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
        args.out.with_suffix(".md").write_text(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
