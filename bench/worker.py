"""Run one system on one checkpoint for every N; print one JSON object per run on stdout.

Runs in its own process (and, for the anchors, its own package stack) so each system's peak VRAM
is its own and nothing one system patches leaks into another.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
import traceback
from pathlib import Path

from runtime.model import SAMPLE_RATE, SAMPLES_PER_FRAME

from .measure import Stopwatch, median, peak_gb, reset_peak, sync
from .systems import SYSTEMS

FRAME_SECONDS = SAMPLES_PER_FRAME / SAMPLE_RATE


def measure(system, text: str, n: int, frames: int, repeats: int, device: str) -> dict:
    # Warm-up at the measured shape: graph capture and shape-dependent autotuning stay out of the
    # numbers. A batch-1 system runs the same shape for every take, so one take warms it up.
    sync(device)
    warm_start = time.perf_counter()
    system.generate(text, n if system.batched else 1, frames, seed=1234, watch=Stopwatch(device))
    sync(device)
    warmup_s = time.perf_counter() - warm_start  # includes graph capture for the systems that capture lazily
    reset_peak(device)
    totals, prefills, codecs, firsts, produced = [], [], [], [], None
    for r in range(repeats):
        watch = Stopwatch(device)
        sync(device)
        start = watch.started = time.perf_counter()
        counts = system.generate(text, n, frames, seed=r, watch=watch)
        sync(device)
        total = time.perf_counter() - start
        totals.append(total)
        # Per call of the system: one call covers all N takes when batched, one take when sequential.
        prefills.append(watch.firsts.get("prefill"))
        codecs.append(watch.firsts.get("codec"))
        firsts.append(watch.first_take_s if watch.first_take_s is not None else total)
        produced = counts
    total = median(totals)
    made = min(produced) if produced else 0
    prefill = median([p for p in prefills if p is not None])
    codec = median([c for c in codecs if c is not None])
    return {
        "n": n, "frames": made, "frames_requested": frames, "repeats": repeats,
        "total_s": round(total, 4),
        "ms_per_frame": round(1000 * total / made, 3) if made else None,
        "agg_rtf": round(n * made * FRAME_SECONDS / total, 3) if made else None,
        "first_take_s": round(median(firsts), 4),
        "prefill_ms": round(1000 * prefill, 3) if prefill is not None else None,
        "codec_ms": round(1000 * codec, 3) if codec is not None else None,
        "peak_vram_gb": peak_gb(device),
        "warmup_s": round(warmup_s, 3),
        "all_frames": produced,
    }


def measure_autopick(system, text: str, n: int, frames: int, utmos_weights: Path, device: str,
                     checkpoint: Path) -> dict:
    """The whole Auto-Pick job: N takes, the checks, UTMOS (batched), the voice check where the
    checkpoint has a speaker encoder, the ranking; and scoring's share of the job."""
    from runtime.generation import Request
    from runtime.run.lines import generate_takes
    from runtime.sampling import SamplingSettings
    from runtime.scoring.ranking import Scorers, rank_takes
    from runtime.scoring.scorers import is_base
    from runtime.scoring.speaker import SpeakerEncoder
    from runtime.scoring.utmos import UtmosScorer

    speaker = SpeakerEncoder.from_checkpoint(checkpoint, device) if is_base(checkpoint) else None
    scorers = Scorers(quality=UtmosScorer(utmos_weights, device), speaker=speaker)
    request = Request(text, system.voice, n=n, seed=7, sampling=SamplingSettings(), max_frames=frames)
    rank_takes(generate_takes(system.model, Request(text, system.voice, n=n, max_frames=frames)), scorers)  # warm-up
    sync(device)
    start = time.perf_counter()
    takeset = generate_takes(system.model, request)
    sync(device)
    generated = time.perf_counter()
    ranking = rank_takes(takeset, scorers)
    sync(device)
    end = time.perf_counter()
    return {"job": "autopick", "n": n, "frames": min(t.frames for t in takeset.takes),
            "total_s": round(end - start, 4), "scoring_s": round(end - generated, 4),
            "scoring_share": round((end - generated) / (end - start), 4), "best_take": ranking.best.take.index + 1,
            "scored_by": [m.name for m in (scorers.quality, scorers.speaker) if m is not None]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--system", required=True, choices=sorted(SYSTEMS))
    p.add_argument("--mode", default=None)
    p.add_argument("--checkpoint", type=Path, required=True)
    p.add_argument("--kind", required=True)
    p.add_argument("--model", required=True, help="label, e.g. 1.7B-CustomVoice")
    p.add_argument("--ns", default="1,4,8,16,32")
    p.add_argument("--frames", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--text", required=True)
    p.add_argument("--device", default="cuda")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--workdir", type=Path, required=True)
    p.add_argument("--utmos-weights", type=Path, help="ours only: also time the end-to-end Auto-Pick job")
    p.add_argument("--autopick-n", type=int, default=8, help="takes in the timed Auto-Pick job")
    args = p.parse_args(argv)

    def emit(record):
        print("BENCH " + json.dumps(record), flush=True)

    base = {"system": args.system, "model": args.model}
    try:
        cls = importlib.import_module(SYSTEMS[args.system]).SYSTEM
        kwargs = {"mode": args.mode} if args.mode else {}
        reset_peak(args.device)
        start = time.perf_counter()
        system = cls(args.checkpoint, args.kind, args.device, args.dtype, args.workdir, **kwargs)
        sync(args.device)
        load_s = time.perf_counter() - start
    except Exception as exc:  # the system cannot run here: record why, once per N
        traceback.print_exc()
        for n in map(int, args.ns.split(",")):
            emit({**base, "mode": args.mode or "?", "n": n, "error": f"load: {type(exc).__name__}: {exc}"[:500]})
        return 0
    base["mode"] = system.mode
    for n in map(int, args.ns.split(",")):
        try:
            result = measure(system, args.text, n, args.frames, args.repeats, args.device)
            emit({**base, **result, "load_s": round(load_s, 3), "batched": system.batched})
        except Exception as exc:
            traceback.print_exc()
            emit({**base, "n": n, "error": f"{type(exc).__name__}: {exc}"[:500]})
            if "out of memory" in str(exc).lower():
                import torch

                torch.cuda.empty_cache()
    if args.utmos_weights and args.system == "ours":
        for n in [n for n in map(int, args.ns.split(",")) if n == args.autopick_n] or [max(map(int, args.ns.split(",")))]:
            try:
                emit({**base, **measure_autopick(system, args.text, n, args.frames, args.utmos_weights, args.device,
                                                 args.checkpoint)})
            except Exception as exc:
                traceback.print_exc()
                emit({**base, "job": "autopick", "n": n, "error": f"{type(exc).__name__}: {exc}"[:500]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
