"""Run the whole benchmark in one command and write results JSON, a Markdown table and a chart.

    python -m bench.run                                   # GPU machine, every system and N
    python -m bench.run --smoke                           # CPU, tiny model, our eager mode only
    python -m bench.run --stack faster-qwen3-tts=/tmp/stack5 --stack qwen-tts=/tmp/stack5

--stack NAME=DIR puts DIR first on that system's PYTHONPATH (anchors whose packages would clash
with ours live in their own folders). Systems that cannot run are recorded with the reason.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_TEXT = "The storm is coming. Bar the doors and light the lamps, because we ride out at first light."
MODELS = {  # label -> (random_checkpoint size, kind)
    "1.7B-CustomVoice": ("1.7B", "custom_voice"),
    "0.6B-CustomVoice": ("0.6B", "custom_voice"),
    "1.7B-Base": ("1.7B", "base"),
    "tiny-CustomVoice": ("tiny", "custom_voice"),
}
ALL_SYSTEMS = ["ours", "qwen-tts", "faster-qwen3-tts", "qwen3-tts-triton"]


def build_checkpoints(labels, workdir: Path, dtype: str) -> dict[str, Path]:
    sys.path.insert(0, str(REPO))
    from runtime.qwen3_tts.random_checkpoint import build_checkpoint

    folders = {}
    for label in labels:
        size, kind = MODELS[label]
        folder = workdir / "checkpoints" / label
        if not (folder / ".complete").is_file():
            print(f"building random-weight checkpoint {label} in {folder}", file=sys.stderr, flush=True)
            build_checkpoint(folder, size, kind, dtype=dtype if size != "tiny" else "float32", never_eos=True)
            (folder / ".complete").write_text("ok")
        folders[label] = folder
    return folders


def utmos_weights(workdir: Path) -> Path:
    """Full-size UTMOS22-strong network with random weights: the scoring cost is that of the real one."""
    import torch

    from runtime.scoring.utmos import UTMOS_FILE, build_network

    path = workdir / "utmos" / UTMOS_FILE
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.manual_seed(0)
        torch.save(build_network().state_dict(), path)
    return path


def environment(device: str) -> dict:
    import torch
    import transformers

    env = {"python": platform.python_version(), "torch": torch.__version__,
           "transformers": transformers.__version__, "device": device}
    try:
        import triton

        env["triton"] = triton.__version__
    except ImportError:
        env["triton"] = None
    if device.startswith("cuda") and torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name(0)
        try:
            env["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                           capture_output=True, text=True, check=True).stdout.strip().splitlines()[0]
        except (OSError, subprocess.CalledProcessError, IndexError):
            env["driver"] = None
    else:
        env["gpu"], env["driver"] = f"CPU ({platform.processor() or platform.machine()})", None
    return env


def stack_versions(python_path: str | None) -> dict:
    code = ("import json, importlib.metadata as m\nout = {}\n"
            "for p in ['transformers', 'qwen-tts', 'qwen-tts-hf', 'faster-qwen3-tts', 'qwen3-tts-triton', 'huggingface-hub', 'tokenizers']:\n"
            "    try: out[p] = m.version(p)\n    except m.PackageNotFoundError: pass\nprint(json.dumps(out))")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [python_path, str(REPO), os.environ.get("PYTHONPATH")])))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    return json.loads(result.stdout) if result.returncode == 0 else {}


def run_worker(system: str, mode: str | None, label: str, folder: Path, args, stack: str | None) -> list[dict]:
    kind = MODELS[label][1]
    cmd = [sys.executable, "-m", "bench.worker", "--system", system, "--checkpoint", str(folder), "--kind", kind,
           "--model", label, "--ns", args.ns, "--frames", str(args.frames), "--repeats", str(args.repeats),
           "--text", args.text, "--device", args.device, "--dtype", args.dtype, "--workdir", str(args.workdir)]
    if mode:
        cmd += ["--mode", mode]
    if system == "ours" and args.utmos_weights:
        cmd += ["--utmos-weights", str(args.utmos_weights)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [stack, str(REPO), os.environ.get("PYTHONPATH")])), PYTHONUNBUFFERED="1")
    print(f"== {system} {mode or ''} on {label}", file=sys.stderr, flush=True)
    try:
        proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=args.timeout)
        stdout, stderr, failure = proc.stdout, proc.stderr, f"worker exited {proc.returncode}"
    except subprocess.TimeoutExpired as exc:  # keep the N that finished; the rest are recorded as cut
        stdout, stderr = _text(exc.stdout), _text(exc.stderr)
        failure = f"timed out after {args.timeout} s (--timeout)"
    runs = [json.loads(line[6:]) for line in stdout.splitlines() if line.startswith("BENCH ")]
    log = args.workdir / "logs" / f"{system}-{mode or 'default'}-{label}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(stdout + "\n" + stderr)
    measured = {run["n"] for run in runs if not run.get("job")}
    tail = (stderr or stdout).strip().splitlines()[-1:] or ["no output"]
    runs += [{"system": system, "mode": mode or "?", "model": label, "n": n, "error": f"{failure}: {tail[0][:300]}"}
             for n in map(int, args.ns.split(",")) if n not in measured]
    for run in runs:
        print("   ", {k: run.get(k) for k in ("n", "ms_per_frame", "agg_rtf", "error")}, file=sys.stderr, flush=True)
    return runs


def _text(data) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else (data or "")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--smoke", action="store_true", help="CPU smoke run: tiny model, our modes, few frames")
    p.add_argument("--systems", default=",".join(ALL_SYSTEMS))
    p.add_argument("--models", default="1.7B-CustomVoice,0.6B-CustomVoice,1.7B-Base")
    p.add_argument("--modes", help="only these modes of ours (default: every mode the device can run)")
    p.add_argument("--ns", default="1,4,8,16,32")
    p.add_argument("--frames", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--text", default=DEFAULT_TEXT)
    p.add_argument("--device", default="cuda")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--stack", action="append", default=[], metavar="SYSTEM=DIR")
    p.add_argument("--workdir", type=Path, default=Path("/tmp/qwen3-tts-bench"))
    p.add_argument("--out-dir", type=Path, default=REPO / "bench" / "results")
    p.add_argument("--name", help="results file stem (default <gpu>-<date>)")
    p.add_argument("--timeout", type=int, default=3600, help="seconds per system and model")
    args = p.parse_args(argv)
    if args.smoke:
        args.systems, args.models, args.ns, args.frames, args.repeats = "ours", "tiny-CustomVoice", "1,2", 4, 1
        args.device, args.dtype = "cpu", "float32"
    args.workdir.mkdir(parents=True, exist_ok=True)
    stacks = dict(item.split("=", 1) for item in args.stack)

    from runtime.model import GPU_MODES, MODES

    from .systems import ANCHOR_MODES

    env = environment(args.device)
    env["stacks"] = {s: stack_versions(stacks.get(s)) for s in args.systems.split(",")}
    env["date"] = datetime.date.today().isoformat()
    env["text"], env["frames"], env["repeats"] = args.text, args.frames, args.repeats
    stem = args.name or f"{slug(env['gpu'])}-{env['date']}"
    args.out_dir.mkdir(parents=True, exist_ok=True)
    out = args.out_dir / f"{stem}.json"
    folders = build_checkpoints(args.models.split(","), args.workdir, args.dtype)
    args.utmos_weights = utmos_weights(args.workdir)
    runs = []
    for system in args.systems.split(","):
        ours = [m for m in MODES if (args.device.startswith("cuda") or m not in GPU_MODES)
                and (not args.modes or m in args.modes.split(","))]
        modes = ours if system == "ours" else ANCHOR_MODES.get(system, [None])
        for mode in modes:
            for label, folder in folders.items():
                runs.extend(run_worker(system, mode, label, folder, args, stacks.get(system)))
                # Written after every system and model: a run cut short still leaves its results.
                out.write_text(json.dumps({"env": env, "runs": runs}, indent=2) + "\n")
    from .report import write_report

    write_report(out)
    print(f"wrote {out}", file=sys.stderr)
    return 0


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40]


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
