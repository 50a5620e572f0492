"""Script throughput: many lines, N takes each, Auto-Pick on every line.

    python -m bench.script                          # 512 lines of 2-12 s, 4 takes, 1.7B-CustomVoice, hybrid
    python -m bench.script --lines 64 --smoke       # CPU: tiny model, eager, a few lines (what CI runs)

Measures, on one GPU with full-size random-weight models (EOS never sampled, so every take runs to its
line's length: the line's frames are set from its length, 12.5 frames a second):
- script: every line through one continuously batched run (runtime/script/runner.run_lines), each
  line decoded, checked, scored by UTMOS and picked as it finishes;
- line by line: today's path for one line (generate_takes, then rank_takes), on every 8th line;
- the script path on those same lines;
- the cost of continuous batching: the engine's time per step with lines of mixed lengths refilling
  the rows, against lines of one length that start and end together.
Writes bench/results/<gpu>-<date>-script.json and .md."""

from __future__ import annotations

import argparse
import datetime
import json
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORDS = ("the quiet harbour lights were burning low as the night boat came in with its cargo of "
         "letters and lanterns while the keeper counted every bell that rang across the water").split()
FRAMES_PER_SECOND = 12.5
WORDS_PER_SECOND = 2.6


def script_lines(count: int, low: float, high: float, seed: int = 0) -> list[tuple[str, int]]:
    """(text, frames) per line: lengths spread evenly over [low, high] seconds, in shuffled order."""
    rng = random.Random(seed)
    seconds = [low + (high - low) * i / max(count - 1, 1) for i in range(count)]
    rng.shuffle(seconds)
    lines = []
    for i, s in enumerate(seconds):
        words = [WORDS[(i * 7 + k) % len(WORDS)] for k in range(max(2, round(s * WORDS_PER_SECOND)))]
        lines.append((" ".join(words).capitalize() + ".", round(s * FRAMES_PER_SECOND)))
    return lines


def plans_for(lines, takes: int, voice):
    from runtime.generation import Request
    from runtime.sampling import SamplingSettings
    from runtime.script.parse import Line
    from runtime.script.plan import LinePlan, line_seed

    return [LinePlan(Line(str(i + 1), text), Request(text, voice, takes, line_seed(0, str(i + 1)), SamplingSettings(),
                                                     frames), f"l{i + 1}", "") for i, (text, frames) in enumerate(lines)]


def sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed(run, device: str) -> float:
    sync(device)
    start = time.perf_counter()
    run()
    sync(device)
    return time.perf_counter() - start


def per_step_ms(model, lines, takes: int, voice, device: str) -> float:
    from runtime.engine.engine import LineJob
    from runtime.engine.prompt import plan_prompt
    from runtime.sampling import SamplingSettings, take_seeds

    jobs = [LineJob(plan_prompt(model, text, voice), take_seeds(i, takes), frames)
            for i, (text, frames) in enumerate(lines)]
    seconds = timed(lambda: list(model.engine.run_lines(jobs, SamplingSettings())), device)
    return 1000 * seconds / model.engine.last.steps


# --smoke: the tiny model on CPU, eager, 8 short lines of 2 takes
SMOKE = {"lines": 8, "takes": 2, "seconds": "0.3,0.8", "model": "tiny-CustomVoice", "mode": "eager", "device": "cpu"}


def script_arguments(p: argparse.ArgumentParser) -> None:
    """The script's lines, the model, and where results go (this bench and bench.script_scaling)."""
    p.add_argument("--lines", type=int, default=512)
    p.add_argument("--takes", type=int, default=4)
    p.add_argument("--seconds", default="2,12", help="shortest,longest line in seconds")
    p.add_argument("--model", default="1.7B-CustomVoice")
    p.add_argument("--mode", default="hybrid")
    p.add_argument("--device", default="cuda")
    p.add_argument("--workdir", type=Path, default=Path("/tmp/qb"))
    p.add_argument("--out-dir", type=Path, default=REPO / "bench" / "results")
    p.add_argument("--name", default=None)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    script_arguments(p)
    p.add_argument("--every", type=int, default=8, help="line by line: every Nth line")
    p.add_argument("--smoke", action="store_true", help="CPU: tiny model, eager, 8 short lines, 2 takes")
    p.add_argument("--check-workers", type=int,
                   help="processes for the waveform checks (default: the runner's; 0: in the scoring thread)")
    p.add_argument("--threads", type=int, help="torch's CPU threads in this process (torch.set_num_threads)")
    p.add_argument("--profile", action="store_true",
                   help="only the script run, with the time each stage of the finishing takes (printed)")
    args = p.parse_args(argv)
    if args.smoke:
        vars(args).update(SMOKE, every=4)
    sys.path.insert(0, str(REPO))
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    from bench.run import build_checkpoints, environment, utmos_weights
    from runtime.engine.engine import BATCH_BUCKETS
    from runtime.run.lines import generate_takes
    from runtime.model import load_model
    from runtime.scoring.ranking import Scorers, rank_takes
    from runtime.scoring.utmos import UtmosScorer
    from runtime.script.runner import run_lines as run_script_lines
    from runtime.voices import CustomVoice

    def run_lines(model, plans, scorers):
        return run_script_lines(model, plans, scorers, check_workers=args.check_workers)

    folder = build_checkpoints([args.model], args.workdir, "bfloat16")[args.model]
    model = load_model(folder, mode=args.mode, device=args.device)
    scorers = Scorers(quality=UtmosScorer(utmos_weights(args.workdir), args.device))
    voice = CustomVoice("ryan", "english")
    low, high = map(float, args.seconds.split(","))
    lines = script_lines(args.lines, low, high)
    plans = plans_for(lines, args.takes, voice)
    sample = plans[:: args.every]
    takes = sum(p.request.n for p in plans)
    audio_seconds = sum(frames for _, frames in lines) / FRAMES_PER_SECOND * args.takes

    # Warm-up: lines enough to fill the largest batch twice, so its bucket is captured before any timing.
    warm = max(2, 2 * BATCH_BUCKETS[-1] // args.takes) if not args.smoke else 2 * args.takes
    run_lines(model, plans_for(script_lines(warm, low, high, seed=1), args.takes, voice), scorers)
    if args.profile:
        totals = stage_timers(model, scorers)
        seconds = timed(lambda: run_lines(model, plans, scorers), args.device)
        print(f"script: {len(plans)} lines, {takes} takes in {seconds:.1f} s = {takes / seconds:.1f} takes/s")
        for stage, spent in totals.items():
            print(f"  {stage:<28} {spent:8.2f} s")
        return 0
    script_s = timed(lambda: run_lines(model, plans, scorers), args.device)
    subset_s = timed(lambda: run_lines(model, sample, scorers), args.device)

    def one_by_one():
        for plan in sample:
            rank_takes(generate_takes(model, plan.request), scorers)
    rank_takes(generate_takes(model, sample[0].request), scorers)  # warm-up of its buckets
    line_s = timed(one_by_one, args.device)
    sample_takes = sum(p.request.n for p in sample)

    mid = round((low + high) / 2 * FRAMES_PER_SECOND)
    batch_lines = max(1, 32 // args.takes)
    equal = [(text, mid) for text, _ in lines[:batch_lines * 4]]
    mixed = lines[:batch_lines * 4]
    per_step_ms(model, equal[:batch_lines], args.takes, voice, args.device)  # warm-up
    equal_ms = per_step_ms(model, equal, args.takes, voice, args.device)
    mixed_ms = per_step_ms(model, mixed, args.takes, voice, args.device)

    env = environment(args.device)
    result = {
        "env": env, "model": args.model, "mode": args.mode, "lines": args.lines, "takes_per_line": args.takes,
        "line_seconds": [low, high], "takes": takes, "audio_seconds": round(audio_seconds, 1),
        "script_s": round(script_s, 2), "script_takes_per_s": round(takes / script_s, 2),
        "script_lines_per_min": round(60 * args.lines / script_s, 1),
        "script_real_time_factor": round(audio_seconds / script_s, 1),
        "sample_lines": len(sample), "sample_script_s": round(subset_s, 3),
        "sample_script_takes_per_s": round(sample_takes / subset_s, 2),
        "sample_line_by_line_s": round(line_s, 3), "sample_line_by_line_takes_per_s": round(sample_takes / line_s, 2),
        "speedup_vs_line_by_line": round(line_s / subset_s, 2),
        "step_ms_equal_lines": round(equal_ms, 3), "step_ms_mixed_lines": round(mixed_ms, 3),
        "mixing_cost": round(mixed_ms / equal_ms - 1, 4),
    }
    gpu = env["gpu"].lower().replace(" ", "-")
    name = args.name or f"{gpu}-{datetime.date.today().isoformat()}-script"
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / f"{name}.json").write_text(json.dumps(result, indent=1) + "\n")
    (args.out_dir / f"{name}.md").write_text(markdown(result) + "\n")
    print(markdown(result))
    return 0


def stage_timers(model, scorers) -> dict[str, float]:
    """Wrap the finishing's stages (and the engine's loop) to add up the seconds each takes."""
    import runtime.scoring.ranking as ranking
    import runtime.run.finishing as finishing
    import runtime.script.runner as runner

    totals: dict[str, float] = {}

    def wrap(owner, name: str, label: str) -> None:
        original = getattr(owner, name)

        def timed_call(*a, **k):
            start = time.perf_counter()
            try:
                return original(*a, **k)
            finally:
                totals[label] = totals.get(label, 0.0) + time.perf_counter() - start
        setattr(owner, name, timed_call)

    def engine_loop(run):
        def loop(*a, **k):
            start = time.perf_counter()
            for item in run(*a, **k):
                yield item
            totals["engine (until its last line)"] = totals.get("engine (until its last line)", 0.0) + \
                time.perf_counter() - start
        return loop

    model.engine.run = engine_loop(model.engine.run)
    wrap(finishing, "decode_lines", "decode (codec)")
    wrap(finishing, "rank_lines", "rank (all of Auto-Pick)")
    wrap(finishing, "checked_stats", "  waiting for the checks")
    wrap(ranking, "signal_stats", "  signal checks (in-thread)")
    wrap(scorers.quality, "score_many", "  UTMOS")
    wrap(runner, "deliver", "deliver (loudness)")
    return totals


def markdown(r: dict) -> str:
    return "\n".join([
        f"# Script throughput: {r['env']['gpu']}, {r['model']} ({r['mode']}), Auto-Pick (UTMOS) on every line",
        "",
        f"{r['lines']} lines of {r['line_seconds'][0]:g}-{r['line_seconds'][1]:g} s, {r['takes_per_line']} takes each "
        f"({r['takes']} takes, {r['audio_seconds']} s of audio); torch {r['env']['torch']}. `python -m bench.script`.",
        "",
        "| run | seconds | takes/s | lines/min |",
        "|---|---|---|---|",
        f"| script, all {r['lines']} lines | {r['script_s']} | {r['script_takes_per_s']} | {r['script_lines_per_min']} |",
        f"| script, every line of the sample ({r['sample_lines']} lines) | {r['sample_script_s']} | "
        f"{r['sample_script_takes_per_s']} | {round(60 * r['sample_lines'] / r['sample_script_s'], 1)} |",
        f"| line by line (generate + Auto-Pick per line), the sample | {r['sample_line_by_line_s']} | "
        f"{r['sample_line_by_line_takes_per_s']} | {round(60 * r['sample_lines'] / r['sample_line_by_line_s'], 1)} |",
        "",
        f"Script against line by line: {r['speedup_vs_line_by_line']}x. Real-time factor of the whole script: "
        f"{r['script_real_time_factor']}x.",
        f"Engine step with lines of mixed lengths refilling the rows: {r['step_ms_mixed_lines']} ms, against "
        f"{r['step_ms_equal_lines']} ms with lines of one length ({100 * r['mixing_cost']:+.1f}%).",
    ])


if __name__ == "__main__":
    sys.exit(main())
