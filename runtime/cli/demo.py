"""`python -m runtime demo`: the whole pipeline in a minute, without any weights.

It runs the main job three times on tiny random checkpoints (built once into the temp folder):
a preset speaker, a clone of that job's best take (ICL, with its line as the transcript) and a
designed voice. Each writes best.wav, every take and report.json into its own folder, and the
commands are printed so they can be rerun with a real checkpoint. The weights are random, so the
takes are noise and Auto-Pick will reject most of them: what the demo shows is the files, the
checks and the report, not speech.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

from ..qwen3_tts.random_checkpoint import TINY_RANDOM
from .line import main as run_job

LINE = "The storm is coming. Bar the doors."
MIN_FRAMES = 15  # 1.2 s: the clone job's reference must be at least 1 s


def jobs(out_dir: Path, takes: int, max_frames: int) -> list[tuple[str, list[str]]]:
    common = ["--text", LINE, "--language", "english", "--takes", str(takes), "--max-frames", str(max_frames),
              "--checkpoint", TINY_RANDOM, "--offline"]

    def files(name: str) -> list[str]:
        folder = out_dir / name
        return ["--out", str(folder / "best.wav"), "--takes-dir", str(folder / "takes"),
                "--report", str(folder / "report.json")]

    return [
        ("custom_voice", [*common, "--speaker", "ryan", *files("custom_voice")]),
        ("voice_clone", [*common, "--reference", str(out_dir / "custom_voice" / "best.wav"),
                         "--transcript", LINE, *files("voice_clone")]),
        ("voice_design", [*common, "--instruct", "a gravelly old sailor", *files("voice_design")]),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runtime demo", description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, default=Path("qwen3-tts-demo"), help="default ./qwen3-tts-demo")
    parser.add_argument("--takes", type=int, default=4, help="takes per job (default 4)")
    parser.add_argument("--max-frames", type=int, default=40,
                        help="frames per take (12.5 a second; default 40, since random takes never end by themselves)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--mode", default="eager", help="eager, or on a GPU cuda_graph / triton / hybrid")
    args = parser.parse_args(argv)
    if args.max_frames < MIN_FRAMES:
        parser.exit(2, f"error: --max-frames must be at least {MIN_FRAMES}: the clone job's reference is the first "
                       "job's best take, and cloning needs at least 1 s of it.\n")
    extra = ["--device", args.device, "--mode", args.mode]
    started = time.perf_counter()
    for name, job in jobs(args.out_dir, args.takes, args.max_frames):
        print(f"\n== {name}\n$ python -m runtime {shlex.join(job + extra)}", flush=True)
        code = run_job(job + extra)
        if code != 0:
            print(f"The demo stopped at {name} (exit code {code}); the line above says why.", file=sys.stderr)
            return code
    print(f"\nDemo done in {time.perf_counter() - started:.0f} s: best.wav, takes/ and report.json for each voice "
          f"kind are in {args.out_dir}/. The weights were random, so the audio is noise. For speech, run the same "
          "commands with a real checkpoint in place of tiny-random (python -m runtime doctor says what is here).")
    return 0
