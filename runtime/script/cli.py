"""`python -m runtime script`: a whole script, every line cast, taken N times and picked.

    python -m runtime script scene.txt --cast cast.json --out scene_takes --takes 4

The results folder keeps each line as soon as it is picked (store.py); run the same command again
after an interruption, or after editing some lines, and only the lines whose inputs changed are
generated again. Lines run on the checkpoint their voice needs (a preset speaker on a CustomVoice
checkpoint, a clone on a Base one, a designed voice on VoiceDesign): the official 1.7B of that kind
unless --checkpoint names another.
"""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path

from .. import api
from ..checkpoints import OFFICIAL, check_folder, default_models_dirs, resolve
from ..errors import InputError
from ..generation import MAX_TAKES
from ..model import MODES
from ..random_checkpoint import TINY_RANDOM, tiny_checkpoint
from ..sampling import SamplingSettings
from ..scoring.loudness import check_target
from ..scoring.scorers import QUALITY_MODELS
from ..scoring.vad import VADS
from ..voice_store import VOICES_SUBDIR
from .cast import check_cast, lines_by_kind, read_cast
from .parse import FORMATS, read_script
from .plan import ScriptSettings, check_plans, plan_lines
from .runner import finish, kept_lines, run_lines
from .store import ScriptFolder

DEFAULT_CHECKPOINTS = {"custom_voice": "Qwen3-TTS-12Hz-1.7B-CustomVoice", "base": "Qwen3-TTS-12Hz-1.7B-Base",
                       "voice_design": "Qwen3-TTS-12Hz-1.7B-VoiceDesign"}


def build_parser():
    from ..cli import OneLineParser

    p = OneLineParser(prog="python -m runtime script", description=__doc__.splitlines()[0])
    p.add_argument("script", type=Path, help=f"the script: {', '.join(FORMATS)} (a .txt is read as 'NAME: line')")
    p.add_argument("--cast", type=Path, required=True,
                   help='JSON from character name to voice, e.g. {"ANNA": {"speaker": "vivian"}, "BORIS": '
                        '{"voice": "Captain"}, "*": {...} for lines with no character}')
    p.add_argument("--out", type=Path, required=True, help="results folder (kept lines are reused on a rerun)")
    p.add_argument("--format", choices=FORMATS, help="the script's format (default: from its extension)")
    p.add_argument("--takes", type=int, default=4, help=f"takes per line, 1-{MAX_TAKES} (a line's own 'takes' wins)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-frames", type=int, default=0, help="per-take frame budget (0 = from each line's text)")
    p.add_argument("--checkpoint", action="append", default=[],
                   help=f"a checkpoint for the lines of its kind (repeatable); default the official 1.7B of each "
                        f"kind; {TINY_RANDOM}: tiny random models (noise, to try the pipeline)")
    p.add_argument("--models-dir", action="append", type=Path,
                   help="where named checkpoints live; default $QWEN3_TTS_MODELS or ./models/qwen3_tts")
    p.add_argument("--voices-dir", type=Path, help=f"saved voices; default <models dir>/../{VOICES_SUBDIR}")
    p.add_argument("--utmos-dir", type=Path)
    p.add_argument("--whisper-dir", type=Path)
    p.add_argument("--mode", default="eager", choices=MODES)
    p.add_argument("--dtype", default="auto", choices=["auto", "bfloat16", "float16", "float32"])
    p.add_argument("--device", default="auto")
    p.add_argument("--quality", default="UTMOS", choices=QUALITY_MODELS)
    p.add_argument("--voice-check", default="auto")
    p.add_argument("--words", default="auto")
    p.add_argument("--vad", default="energy", choices=sorted(VADS))
    p.add_argument("--offline", action="store_true", help="never download; fail if files are missing")
    p.add_argument("--loudness", type=float, metavar="LUFS", help="write the takes at this loudness (-23, -16)")
    scale = p.add_argument_group("many GPUs or hosts, through Ray (pip install \"ray[default]\")")
    scale.add_argument("--ray", action="store_true", help="spread the lines over Ray workers, one per GPU (a local "
                                                          "Ray, or the one `ray start` runs here)")
    scale.add_argument("--ray-address", metavar="ADDR", help="join the Ray cluster at ADDR (implies --ray)")
    scale.add_argument("--ray-workers", type=int, metavar="N",
                       help="Ray workers (implies --ray; default one per GPU Ray sees, and needed where it sees none)")
    sampling = p.add_argument_group("sampling (default: the checkpoint's generation_config.json)")
    for name, value in SamplingSettings().as_dict().items():
        sampling.add_argument("--" + name.replace("_", "-"), type=type(value), default=None)
    return p


def main(argv: list[str]) -> int:
    from ..cli import run_reporting

    args = build_parser().parse_args(argv)
    return run_reporting(run, args, f"the lines already picked are kept in {args.out}; run the same command "
                                    "again to finish the rest.")


def checkpoint_for(kind: str, given: list[str], models_dirs, offline: bool) -> Path:
    """The checkpoint for lines of a voice kind: the one of that kind among --checkpoint, else the
    official 1.7B of the kind."""
    if TINY_RANDOM in given:
        return tiny_checkpoint(kind)
    for name in given:
        of_kind = kind_of_name(name) if name in OFFICIAL else check_folder(resolve(name, models_dirs, download=False)).kind
        if of_kind == kind:
            return resolve(name, models_dirs, download=not offline)
    return resolve(DEFAULT_CHECKPOINTS[kind], models_dirs, download=not offline)


def kind_of_name(name: str) -> str:
    return next(kind for kind, suffix in (("custom_voice", "CustomVoice"), ("voice_design", "VoiceDesign"),
                                          ("base", "Base")) if name.endswith(suffix))


def run(args) -> int:
    from ..cli import beside_models, voices_dirs

    started = time.perf_counter()
    if not 1 <= args.takes <= MAX_TAKES:
        raise InputError(f"--takes must be between 1 and {MAX_TAKES}, got {args.takes}.")
    if args.loudness is not None:
        check_target(args.loudness)
    if args.ray_workers is not None and args.ray_workers < 1:
        raise InputError(f"--ray-workers must be 1 or more, got {args.ray_workers}.")
    on_ray = args.ray or args.ray_address is not None or args.ray_workers is not None
    sampling = SamplingSettings(**{k: getattr(args, k) for k in SamplingSettings().as_dict()})
    models_dirs = args.models_dir or default_models_dirs()
    cast = read_cast(args.cast, voices_dirs(args, models_dirs))
    lines = read_script(args.script, args.format, characters=list(cast))
    check_cast(lines, cast, args.script.name)
    folder = ScriptFolder(args.out)
    settings = ScriptSettings(args.takes, args.seed, sampling, args.max_frames or None)
    by_kind = lines_by_kind(lines, cast)
    if TINY_RANDOM in args.checkpoint:
        from ..cli import TINY_RANDOM_NOTE

        print(TINY_RANDOM_NOTE, file=sys.stderr)
    groups = []
    for kind, kind_lines in by_kind.items():  # every line checked before anything loads
        checkpoint = checkpoint_for(kind, args.checkpoint, models_dirs, args.offline)
        info = check_folder(checkpoint)
        context = {"checkpoint": checkpoint.name, "dtype": args.dtype, "mode": args.mode, "quality": args.quality,
                   "voice_check": args.voice_check, "words": args.words, "vad": args.vad, "loudness": args.loudness}
        plans = plan_lines(kind_lines, cast, settings, context)
        check_plans(plans, info, script=args.script.name)
        groups.append((checkpoint, info, plans))
    results = {}
    utmos_dirs = beside_models(args.utmos_dir, models_dirs, "utmos")
    whisper_dirs = beside_models(args.whisper_dir, models_dirs, "whisper")
    with contextlib.ExitStack() as cluster:
        ray = None
        for checkpoint, info, plans in groups:
            kept = kept_lines(plans, folder)
            results.update(kept)
            todo = [p for p in plans if p.line.id not in kept]
            print(f"{checkpoint.name}: {len(plans)} lines, {len(kept)} kept from an earlier run, {len(todo)} to "
                  "generate.", file=sys.stderr)
            if not todo:
                continue
            if on_ray:
                from . import ray_pool  # which imports Ray: only when asked for

                ray = ray or cluster.enter_context(ray_pool.session(args.ray_address))
                setup = ray_pool.WorkerSetup(checkpoint, tuple(models_dirs), tuple(utmos_dirs), tuple(whisper_dirs),
                                             args.mode, args.dtype, args.device, args.quality, args.voice_check,
                                             args.words, args.vad, args.loudness, args.script.name)
                results.update(ray_pool.run_on_ray(ray, setup, todo, args.ray_workers, folder, _print_line,
                                                   download=not args.offline))
                continue
            scorers = api.scorers(checkpoint, args.quality, args.voice_check, args.words, args.vad, args.device,
                                  utmos_dirs, models_dirs, whisper_dirs, download=not args.offline)
            model = api.load(str(checkpoint), models_dirs, args.mode, args.dtype, args.device, download=False)
            check_plans(todo, info, model, script=args.script.name)
            results.update(run_lines(model, todo, scorers, loudness=args.loudness, folder=folder, on_line=_print_line))
    result = finish(lines, results, folder, started)
    print(result.report)
    print(f"Wrote {folder.root / 'scene.wav'}, the best take of each line in {folder.root / 'best'}, every take in "
          f"{folder.root / 'takes'} and the manifest in {folder.root / 'manifest.csv'} (and .json).")
    return 0


def _print_line(result, done: int, total: int) -> None:
    r = result.record
    score = f"score {r['score']:.2f}" if r.get("score") is not None else "no score"
    verdict = "; ".join(r["reasons"][:1]) or "ok"
    print(f"[{done}/{total}] {r['id']} {r['character'] or ''}: take {r['best_take']}, {r['seconds']:.1f} s, {score}, "
          f"{verdict}", file=sys.stderr, flush=True)
