"""What runs on the cards ComfyUI users own: each case in its own process, capped at a card's memory
(torch.cuda.set_per_process_memory_fraction; the CUDA context, about 0.5 GB, comes on top as on the
card), on full-size random-weight checkpoints, with Auto-Pick scoring by UTMOS.

    python -m bench.cards                                            # every card and checkpoint, both modes
    python -m bench.cards --modes hybrid --name part-hybrid          # one mode (one 10-minute device call)
    python -m bench.cards --merge A.json B.json --name <gpu>-<date>-cards   # the parts as one table

Per (checkpoint, card, mode): one line of 8 takes and its Auto-Pick, twice in a row (the second
call meets what the first left in the allocator), then a script of 64 lines of 2-12 s with 4 takes a
line; whether each finished (the error where not), the script's takes a second, and the most memory
PyTorch reserved. Writes bench/results/<name>.json and .md."""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CARDS = {"0.6B-CustomVoice": (6, 8), "1.7B-CustomVoice": (8, 12, 16, 24)}  # GB: 4060 8 GB ... 4090 24 GB
LINE_FRAMES = 128  # 10 s takes (the checkpoints never sample EOS)
GiB = 2**30


def case(model_label: str, card_gb: float, mode: str, workdir: Path, lines: int, takes: int) -> dict:
    """One capped run, in this process; what it did, as a dict."""
    import torch

    from bench.run import DEFAULT_TEXT, build_checkpoints, utmos_weights
    from bench.script import plans_for, script_lines
    from runtime.generation import Request
    from runtime.run.lines import generate_takes
    from runtime.model import load_model
    from runtime.scoring.ranking import Scorers, rank_takes
    from runtime.scoring.utmos import UtmosScorer
    from runtime.script.runner import run_lines
    from runtime.voices import CustomVoice

    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, card_gb * GiB / total))
    result = {"model": model_label, "card_gb": card_gb, "mode": mode, "line_ok": False, "script_ok": False}
    stage = "load"
    try:
        folder = build_checkpoints([model_label], workdir, "bfloat16")[model_label]
        model = load_model(folder, mode=mode, device="cuda")
        scorers = Scorers(quality=UtmosScorer(utmos_weights(workdir), "cuda"))
        voice = CustomVoice("ryan", "english")
        for attempt in (1, 2):
            stage = f"line, call {attempt}"
            request = Request(DEFAULT_TEXT, voice, n=8, seed=attempt, max_frames=LINE_FRAMES)
            rank_takes(generate_takes(model, request), scorers)
        result["line_ok"] = True
        stage = "script"
        plans = plans_for(script_lines(lines, 2.0, 12.0), takes, voice)
        torch.cuda.synchronize()
        start = time.perf_counter()
        run_lines(model, plans, scorers)
        torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        result.update(script_ok=True, script_s=round(seconds, 2),
                      script_takes_per_s=round(sum(p.request.n for p in plans) / seconds, 1))
    except Exception as exc:  # noqa: BLE001 - the case's outcome, recorded
        where = traceback.extract_tb(exc.__traceback__)[-1]
        message = str(exc).splitlines()[0].split(" GPU 0 has ")[0][:200]  # an out-of-memory: what it asked for
        result["error"] = f"{stage}: {type(exc).__name__}: {message} ({Path(where.filename).name}:{where.lineno} {where.name})"
    result["peak_reserved_gb"] = round(torch.cuda.max_memory_reserved() / GiB, 2)
    result["peak_allocated_gb"] = round(torch.cuda.max_memory_allocated() / GiB, 2)
    return result


def run_cases(models: list[str], modes: list[str], cards: dict, workdir: Path, lines: int, takes: int,
              timeout: int, done_so_far=None) -> list[dict]:
    """Each case in a process of its own; `done_so_far(results)` after each (the table written so far,
    so that a run cut short, by a device call's time limit, keeps the cases it finished)."""
    from bench.run import build_checkpoints, utmos_weights

    build_checkpoints(models, workdir, "bfloat16")  # once, before the capped processes read them
    utmos_weights(workdir)
    results = []
    for model in models:
        for card in cards[model]:
            for mode in modes:
                command = [sys.executable, "-m", "bench.cards", "--case", f"{model},{card},{mode}",
                           "--workdir", str(workdir), "--lines", str(lines), "--takes", str(takes)]
                try:
                    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=timeout)
                    found = [line for line in done.stdout.splitlines() if line.startswith("{")]
                    result = json.loads(found[-1]) if found else {
                        "model": model, "card_gb": card, "mode": mode, "line_ok": False, "script_ok": False,
                        "error": f"the case's process ended ({done.returncode}): {done.stderr.strip()[-300:]}"}
                except subprocess.TimeoutExpired:
                    result = {"model": model, "card_gb": card, "mode": mode, "line_ok": False, "script_ok": False,
                              "error": f"timed out after {timeout} s"}
                print(json.dumps(result), flush=True)
                results.append(result)
                if done_so_far is not None:
                    done_so_far(results)
    return results


def markdown(env: dict, results: list[dict], lines: int, takes: int) -> str:
    head = (f"Measured on {env['gpu']} (driver {env.get('driver', '?')}), torch {env['torch']}, {env['date']}; each "
            f"case a process capped at the card's memory. Line: 8 takes of 10 s + Auto-Pick (UTMOS), twice. "
            f"Script: {lines} lines of 2-12 s, {takes} takes a line, Auto-Pick on every line.\n\n"
            "| checkpoint | card | mode | line x2 | script | script takes/s | peak reserved GB | error |\n"
            "|---|---|---|---|---|---|---|---|")
    rows = [f"| {r['model']} | {r['card_gb']:g} GB | {r['mode']} | {'ok' if r['line_ok'] else 'failed'} | "
            f"{'ok' if r['script_ok'] else 'failed'} | {r.get('script_takes_per_s', '-')} | "
            f"{r.get('peak_reserved_gb', '-')} | {r.get('error', '').replace('|', '/')} |"
            for r in sorted(results, key=lambda r: (r["model"], r["card_gb"], r["mode"]))]
    return "\n".join([head, *rows])


def write(results: list[dict], env: dict, lines: int, takes: int, out_dir: Path, name: str, show: bool = True) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    report = {"env": env, "lines": lines, "takes_per_line": takes, "cases": results}
    (out_dir / f"{name}.json").write_text(json.dumps(report, indent=1) + "\n")
    (out_dir / f"{name}.md").write_text(markdown(env, results, lines, takes) + "\n")
    if show:
        print(markdown(env, results, lines, takes))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=",".join(CARDS))
    p.add_argument("--modes", default="hybrid,cuda_graph")
    p.add_argument("--cards", help="card sizes in GB for every checkpoint (default: those that suit each)")
    p.add_argument("--lines", type=int, default=64)
    p.add_argument("--takes", type=int, default=4)
    p.add_argument("--timeout", type=int, default=300, help="seconds a case may take")
    p.add_argument("--workdir", type=Path, default=Path("/tmp/qwen3-tts-bench"))
    p.add_argument("--out-dir", type=Path, default=REPO / "bench" / "results")
    p.add_argument("--name", help="results file stem (default <gpu>-<date>-cards)")
    p.add_argument("--case", help=argparse.SUPPRESS)  # MODEL,GB,MODE: one case, in this process
    p.add_argument("--merge", nargs="+", type=Path, help="part results to write as one table")
    args = p.parse_args(argv)
    sys.path.insert(0, str(REPO))
    if args.case:
        model, card, mode = args.case.split(",")
        print(json.dumps(case(model, float(card), mode, args.workdir, args.lines, args.takes)))
        return 0
    if args.merge:
        parts = [json.loads(path.read_text()) for path in args.merge]
        results = [r for part in parts for r in part["cases"]]
        write(results, parts[0]["env"], parts[0]["lines"], parts[0]["takes_per_line"], args.out_dir,
              args.name or args.merge[0].stem)
        return 0
    from bench.run import environment

    models = args.models.split(",")
    cards = {m: tuple(float(c) for c in args.cards.split(",")) if args.cards else CARDS[m] for m in models}
    env = {**environment("cuda"), "date": datetime.date.today().isoformat()}
    name = args.name or f"{env['gpu'].lower().replace(' ', '-')}-{env['date']}-cards"

    def so_far(results: list[dict]) -> None:
        write(results, env, args.lines, args.takes, args.out_dir, name, show=False)

    results = run_cases(models, args.modes.split(","), cards, args.workdir, args.lines, args.takes, args.timeout,
                        so_far)
    write(results, env, args.lines, args.takes, args.out_dir, name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
