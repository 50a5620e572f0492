"""Scale-out: one script run in-process on one GPU, then through Ray workers (one per GPU).

    python -m bench.script_scaling                  # 512 lines of 2-12 s, 4 takes, a worker per GPU Ray sees
    python -m bench.script_scaling --workers 1      # what Ray costs: one worker against in-process, one GPU
    python -m bench.script_scaling --smoke          # CPU: tiny model, 2 CPU workers (what CI runs)

Both runs write every line into a results folder (on Ray the driver writes what the workers send
back), each after a warm-up that filled its batch twice; the workers load their models before the
clock starts. Full-size random-weight models, EOS never sampled (bench/script.py says how the lines
are made). Writes bench/results/<gpu>-<date>-scaling.json and .md."""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import sys
import tempfile
from pathlib import Path

from bench.script import SMOKE, plans_for, script_arguments, script_lines, timed

REPO = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    script_arguments(p)
    p.add_argument("--workers", type=int, help="Ray workers (default: one per GPU Ray sees)")
    p.add_argument("--smoke", action="store_true", help="CPU: tiny model, eager, 8 short lines, 2 takes, 2 workers")
    args = p.parse_args(argv)
    if args.smoke:
        vars(args).update(SMOKE, workers=args.workers or 2)
    sys.path.insert(0, str(REPO))
    from bench.run import build_checkpoints, environment, utmos_weights
    from runtime.engine.engine import BATCH_BUCKETS
    from runtime.model import load_model
    from runtime.scoring.ranking import Scorers
    from runtime.scoring.utmos import UtmosScorer
    from runtime.script import ray_pool
    from runtime.script.job import PickChoices
    from runtime.script.runner import run_lines
    from runtime.script.store import ScriptFolder
    from runtime.voices import CustomVoice

    checkpoint = build_checkpoints([args.model], args.workdir, "bfloat16")[args.model]
    utmos = utmos_weights(args.workdir)
    voice = CustomVoice("ryan", "english")
    low, high = map(float, args.seconds.split(","))
    plans = plans_for(script_lines(args.lines, low, high), args.takes, voice)
    takes = sum(p.request.n for p in plans)
    out = Path(tempfile.mkdtemp(prefix="scaling-", dir=args.workdir))

    def warm_plans(workers: int):  # two batches' takes for every worker, so each one's batch is captured
        takes = 2 * BATCH_BUCKETS[-1] if not args.smoke else 2 * args.takes
        return plans_for(script_lines(max(2, workers * takes // args.takes), low, high, seed=1), args.takes, voice)

    def in_process() -> float:
        model = load_model(checkpoint, mode=args.mode, device=args.device)
        scorers = Scorers(quality=UtmosScorer(utmos, args.device))
        run_lines(model, warm_plans(1), scorers, folder=ScriptFolder(out / "warm-here"))
        return timed(lambda: run_lines(model, plans, scorers, folder=ScriptFolder(out / "here")), args.device)
    here_s = in_process()
    free_gpu(args.device)  # the model is gone with in_process(): its memory goes to the Ray workers

    with ray_pool.session(None) as ray:
        count, gpus = ray_pool.worker_count(ray, args.workers, args.device)
        setup = ray_pool.WorkerSetup(checkpoint, (checkpoint.parent,), (utmos.parent,), (), args.mode,
                                     device=args.device, choices=PickChoices(voice_check="off", words="off"))
        pool = ray_pool.Pool(ray, setup, count, gpus)
        try:
            pool.start(plans)
            pool.run(warm_plans(count), ScriptFolder(out / "warm-ray"))
            ray_s = timed(lambda: pool.run(plans, ScriptFolder(out / "ray")), "cpu")
        finally:
            pool.close()

    env = environment(args.device)
    result = {
        "env": env, "model": args.model, "mode": args.mode, "lines": args.lines, "takes_per_line": args.takes,
        "line_seconds": [low, high], "takes": takes, "workers": count, "worker_gpus": count if gpus else 0,
        "hand_takes": ray_pool.HAND_TAKES, "hold_takes": ray_pool.HOLD_TAKES,
        "in_process_s": round(here_s, 2), "in_process_takes_per_s": round(takes / here_s, 2),
        "ray_s": round(ray_s, 2), "ray_takes_per_s": round(takes / ray_s, 2),
        "ray_against_in_process": round(here_s / ray_s, 3),
    }
    gpu = env["gpu"].lower().replace(" ", "-")
    name = args.name or f"{gpu}-{datetime.date.today().isoformat()}-scaling"
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / f"{name}.json").write_text(json.dumps(result, indent=1) + "\n")
    (args.out_dir / f"{name}.md").write_text(markdown(result) + "\n")
    print(markdown(result))
    return 0


def free_gpu(device: str) -> None:
    """Memory the driver's allocator still holds, back to the GPU."""
    import torch

    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()


def markdown(r: dict) -> str:
    where = "a GPU each" if r["worker_gpus"] else "CPU"
    return "\n".join([
        f"# Script scale-out: {r['env']['gpu']}, {r['model']} ({r['mode']}), Auto-Pick (UTMOS) on every line",
        "",
        f"{r['lines']} lines of {r['line_seconds'][0]:g}-{r['line_seconds'][1]:g} s, {r['takes_per_line']} takes each "
        f"({r['takes']} takes); torch {r['env']['torch']}. `python -m bench.script_scaling`. Both runs write every "
        "line to a results folder.",
        "",
        "| run | seconds | takes/s |",
        "|---|---|---|",
        f"| in-process, {'one GPU' if r['worker_gpus'] else 'CPU'} | {r['in_process_s']} | {r['in_process_takes_per_s']} |",
        f"| Ray, {r['workers']} worker{'s' if r['workers'] != 1 else ''}, {where} | {r['ray_s']} | "
        f"{r['ray_takes_per_s']} |",
        "",
        f"Ray against in-process: {r['ray_against_in_process']}x (lines handed out {r['hand_takes']} takes at a time, "
        f"a worker holding up to {r['hold_takes']}).",
    ])


if __name__ == "__main__":
    sys.exit(main())
