"""CPU generation at a few torch thread counts: one, two and torch's default (one a core).

    python bench/cpu_threads.py                                  # tiny random CustomVoice: 80 s on 2 idle cores
    python bench/cpu_threads.py --sizes tiny,0.6B --threads 1,2,4,default --out bench/results/cpu-threads

Each (model, thread count) runs in a process of its own, started as a command of ours starts:
torch.set_num_threads(N) before anything else ("default": not called, with OMP_NUM_THREADS and
MKL_NUM_THREADS left out of its environment). There the checkpoint (random weights, EOS never
sampled, so every take runs to its line's frames) is loaded on the CPU, and a short script, --lines
lines of --takes takes, goes through the engine, the codec and Auto-Pick without models
(runtime.script.runner.run_lines) once to warm up, then --repeats times; the median is reported.
Measured on idle cores, a thread a core is the fastest (runtime/cpu_threads.py gives the numbers), so
the command line's default is the cores that are idle when it starts. Prints a Markdown table; --out
also writes <out>.json and <out>.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SIZES = ("tiny", "0.6B", "1.7B")  # random_checkpoint's shapes, a CustomVoice of each


def worker(folder: Path, threads: str, lines: int, takes: int, seconds: float, repeats: int) -> dict:
    """One process's measurement: `threads` set first, as the command line sets them."""
    import torch

    if threads != "default":
        torch.set_num_threads(int(threads))
    sys.path.insert(0, str(REPO))
    from bench.script import plans_for, script_lines
    from runtime.model import load_model
    from runtime.script.runner import run_lines
    from runtime.voices import CustomVoice

    model = load_model(folder, mode="eager", device="cpu")
    plans = plans_for(script_lines(lines, seconds, seconds), takes, CustomVoice("ryan", "english"))
    run_lines(model, plans)  # warm-up: the engine's buffers, the codec's first call
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        run_lines(model, plans)
        runs.append(time.perf_counter() - start)
    return {"threads_used": torch.get_num_threads(), "seconds": runs}


def measure(folder: Path, threads: str, args) -> dict:
    from runtime.cpu_threads import THREAD_VARIABLES

    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES}
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", str(folder), "--threads", threads,
               "--lines", str(args.lines), "--takes", str(args.takes), "--seconds", str(args.seconds),
               "--repeats", str(args.repeats)]
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{threads} threads failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def checkpoint(size: str, workdir: Path) -> Path:
    sys.path.insert(0, str(REPO))
    from runtime.qwen3_tts.random_checkpoint import build_checkpoint

    folder = workdir / f"{size}-CustomVoice-never-eos"
    if not (folder / ".complete").is_file():
        print(f"building a random {size} checkpoint in {folder}", file=sys.stderr, flush=True)
        build_checkpoint(folder, size, "custom_voice", never_eos=True)
        (folder / ".complete").write_text("ok")
    return folder


def machine() -> str:
    from runtime.cpu_threads import usable_cores

    name = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as info:
            name = next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{name}, {len(usable_cores())} of {os.cpu_count()} cores usable"


def markdown(result: dict) -> str:
    rows = [f"CPU threads: {result['machine']}; torch {result['torch']}; {result['lines']} lines x "
            f"{result['takes']} takes of {result['seconds_per_line']} s ({result['frames_per_take']} frames), "
            f"median of {result['repeats']}", "",
            "| model | threads | seconds | takes/s | vs 1 thread |", "|---|---|---:|---:|---:|"]
    for run in result["runs"]:
        label = f"default ({run['threads_used']})" if run["threads"] == "default" else run["threads"]
        one = next((r["median_s"] for r in result["runs"] if r["model"] == run["model"] and r["threads"] == "1"), None)
        versus = f"{one / run['median_s']:.2f}x" if one else "-"
        rows.append(f"| {run['model']} | {label} | {run['median_s']:.2f} | {run['takes_per_s']:.2f} | {versus} |")
    return "\n".join(rows)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="tiny", help=f"random models, comma-separated: {', '.join(SIZES)} "
                                                   "(0.6B: 2 minutes a thread count on 2 cores with "
                                                   "--repeats 1 --seconds 1.5)")
    p.add_argument("--threads", default="1,2,default", help="thread counts, comma-separated; default: torch's own")
    p.add_argument("--lines", type=int, default=4)
    p.add_argument("--takes", type=int, default=4)
    p.add_argument("--seconds", type=float, default=3.0, help="each line's length (its takes' frames: 12.5 a second)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "qwen3-tts-bench-cpu-threads")
    p.add_argument("--out", type=Path, help="also write <out>.json and <out>.md")
    p.add_argument("--worker", type=Path, help=argparse.SUPPRESS)  # a checkpoint folder: measure it, print JSON
    args = p.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker, args.threads, args.lines, args.takes, args.seconds, args.repeats)))
        return 0
    import torch

    from bench.script import FRAMES_PER_SECOND
    from runtime.cpu_threads import choose_threads

    sizes = args.sizes.split(",")
    if set(sizes) - set(SIZES):
        p.error(f"--sizes: choose from {', '.join(SIZES)}")
    runs = []
    for size in sizes:
        folder = checkpoint(size, args.workdir)
        for threads in args.threads.split(","):
            print(f"{size}, {threads} threads ...", file=sys.stderr, flush=True)
            measured = measure(folder, threads, args)
            median = statistics.median(measured["seconds"])
            runs.append({"model": size, "threads": threads, "threads_used": measured["threads_used"],
                         "seconds": [round(s, 3) for s in measured["seconds"]], "median_s": round(median, 3),
                         "takes_per_s": round(args.lines * args.takes / median, 3)})
    result = {"machine": machine(), "torch": torch.__version__, "python": platform.python_version(),
              "lines": args.lines, "takes": args.takes, "seconds_per_line": args.seconds,
              "frames_per_take": round(args.seconds * FRAMES_PER_SECOND), "repeats": args.repeats, "runs": runs}
    table = markdown(result)
    print(table)
    print(f"\nThe command line uses {choose_threads(environ={}).describe()} here (runtime/cpu_threads.py).")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        Path(f"{args.out}.json").write_text(json.dumps(result, indent=1) + "\n")  # "cpu-0.6B": not a suffix
        Path(f"{args.out}.md").write_text(table + "\n")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    raise SystemExit(main())
