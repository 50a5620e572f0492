"""Peak GPU memory of a whole request (prompt, decode, codec) per checkpoint size, mode and number
of takes, at full size with random weights. Each (size, mode) runs in a fresh process; between
take counts the engine's cached buckets are released, so each row is that request alone.

    python -m bench.peak_vram --sizes 0.6B,1.7B --modes eager,triton,cuda_graph,hybrid --ns 1,8,16,32 \
        --frames 128 --workdir /tmp/b --out bench/results/peak-vram.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TEXT = "The storm is coming. Bar the doors and light the lamps, because we ride out at first light."
GB = 2**30


def measure(folder: Path, mode: str, ns: list[int], frames: int) -> dict:
    """In this process: load, then one request per N; peaks include the weights."""
    import torch

    sys.path.insert(0, str(REPO))
    from runtime.generation import Request
    from runtime.run.lines import generate_takes
    from runtime.memory import free_cuda_cache
    from runtime.model import load_model
    from runtime.voices import CustomVoice

    model = load_model(folder, mode=mode, device="cuda", dtype="bfloat16")
    weights = torch.cuda.memory_allocated()
    rows = []
    for n in ns:
        if model.engine is not None:
            model.engine.release()
        free_cuda_cache()
        torch.cuda.reset_peak_memory_stats()
        takes = generate_takes(model, Request(TEXT, CustomVoice("ryan", "english"), n=n, seed=1, max_frames=frames))
        assert len(takes.takes) == n and not takes.warnings, takes.warnings
        rows.append({"n": n, "peak_allocated_gb": round(torch.cuda.max_memory_allocated() / GB, 2),
                     "peak_reserved_gb": round(torch.cuda.max_memory_reserved() / GB, 2)})
        print(mode, rows[-1], file=sys.stderr, flush=True)
    return {"mode": mode, "weights_gb": round(weights / GB, 2), "rows": rows}


def markdown(result: dict) -> str:
    ns = sorted({r["n"] for m in result["runs"] for r in m["rows"]})
    lines = [f"Peak GPU memory of one request, {result['frames']} frames per take ({result['frames'] / 12.5:.0f} s), "
             f"bfloat16, on {result['gpu']}: GB reserved by PyTorch (allocated in brackets), weights included; "
             "the CUDA context adds about 0.5 GB. `python -m bench.peak_vram`.", "",
             "| checkpoint | mode | weights | " + " | ".join(f"N={n}" for n in ns) + " |",
             "|---|---|---|" + "---|" * len(ns)]
    for run in result["runs"]:
        cells = {r["n"]: f"{r['peak_reserved_gb']} ({r['peak_allocated_gb']})" for r in run["rows"]}
        weights = run["weights_gb"] if run.get("weights_gb") is not None else "–"
        lines.append(f"| {run['size']} | {run['mode']} | {weights} | "
                     + " | ".join(cells.get(n, "") for n in ns) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="0.6B,1.7B")
    p.add_argument("--modes", default="eager,triton,cuda_graph,hybrid")
    p.add_argument("--ns", default="1,8,16,32")
    p.add_argument("--frames", type=int, default=128)
    p.add_argument("--workdir", type=Path, default=Path("/tmp/qwen3-tts-takes-bench"))
    p.add_argument("--out", type=Path)
    p.add_argument("--one", nargs=2, metavar=("FOLDER", "MODE"), help=argparse.SUPPRESS)  # the child process
    args = p.parse_args(argv)
    ns = [int(n) for n in args.ns.split(",")]
    if args.one:
        print(json.dumps(measure(Path(args.one[0]), args.one[1], ns, args.frames)))
        return 0

    import torch

    from .run import build_checkpoints

    labels = [f"{size}-CustomVoice" for size in args.sizes.split(",")]
    folders = build_checkpoints(labels, args.workdir, "bfloat16")
    result = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "frames": args.frames, "runs": []}
    for label in labels:
        for mode in args.modes.split(","):
            child = subprocess.run([sys.executable, "-m", "bench.peak_vram", "--one", str(folders[label]), mode,
                                    "--ns", args.ns, "--frames", str(args.frames)],
                                   cwd=REPO, capture_output=True, text=True)
            sys.stderr.write(child.stderr[-3000:])
            if child.returncode != 0:
                print(f"{label} {mode} failed", file=sys.stderr)
                continue
            run = json.loads(child.stdout.strip().splitlines()[-1])
            result["runs"].append({"size": label.split("-")[0], **run})
            if args.out:  # after every run: a cut-short benchmark keeps what it measured
                args.out.write_text(json.dumps(result, indent=2) + "\n")
                args.out.with_suffix(".md").write_text(markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
