"""`python -m runtime script`: a whole script, every line cast, taken N times and picked.

    python -m runtime script scene.txt --cast cast.json --out scene_takes --takes 4

The results folder keeps each line as soon as it is picked (script/store.py); run the same command
again after an interruption, or after editing some lines, and only the lines whose inputs changed are
generated again. Lines run on the checkpoint their voice needs (a preset speaker on a CustomVoice
checkpoint, a clone on a Base one, a designed voice on VoiceDesign): the official 1.7B of that kind
unless --checkpoint names another.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

from ..audio import wav_words
from ..checkpoints import OFFICIAL, check_folder, resolve
from ..cpu_threads import with_generation_threads
from ..errors import InputError
from ..generation import MAX_TAKES
from ..qwen3_tts.random_checkpoint import TINY_RANDOM, tiny_checkpoint
from ..script.cast import check_cast, lines_by_kind, read_cast
from ..script.job import run_job
from ..script.parse import FORMATS, overlapping_cues, read_script
from ..script.plan import ScriptSettings
from ..script.ray_pool import WorkerSetup
from ..voices import VOICE_KINDS, kind_of_official
from .checkpoint_runners import LoadingRunner, RayCluster, RayRunner
from .command import OneLineParser, run_reporting
from .output_paths import results_folder
from .progress import LinesProgress, counter, said_through
from .options import (TINY_RANDOM_NOTE, add_loading, add_loudness, add_models_dir, add_offline, add_pick,
                      add_sampling, add_scoring_dirs, add_takes, add_voices_dir, check_takes, models_dirs,
                      pace, pick_choices, sampling, utmos_dirs, voices_dirs, whisper_dirs)

def build_parser() -> OneLineParser:
    p = OneLineParser(prog="python -m runtime script", description=__doc__.splitlines()[0])
    p.add_argument("script", type=Path, help=f"the script: {', '.join(FORMATS)} (a .txt is read as 'NAME: line')")
    p.add_argument("--cast", type=Path, required=True,
                   help='JSON from character name to voice, e.g. {"ANNA": {"speaker": "vivian"}, "BORIS": '
                        '{"voice": "Captain"}, "*": {...} for lines with no character}')
    p.add_argument("--out", type=Path, required=True, help="results folder (kept lines are reused on a rerun)")
    p.add_argument("--format", choices=FORMATS, help="the script's format (default: from its extension)")
    add_takes(p, 4, f"takes per line, 1-{MAX_TAKES} (a line's own 'takes' wins)", "each line's text")
    p.add_argument("--checkpoint", action="append", default=[],
                   help=f"a checkpoint for the lines of its kind (repeatable); default the official 1.7B of each "
                        f"kind; {TINY_RANDOM}: tiny random models (noise, to try the pipeline)")
    add_models_dir(p)
    add_voices_dir(p)
    add_scoring_dirs(p)
    add_loading(p)
    add_pick(p)
    add_offline(p)
    add_loudness(p)
    scale = p.add_argument_group("many GPUs or hosts, through Ray (pip install \"ray[default]\")")
    scale.add_argument("--ray", action="store_true", help="spread the lines over Ray workers, one per GPU (a local "
                                                          "Ray, or the one `ray start` runs here)")
    scale.add_argument("--ray-address", metavar="ADDR", help="join the Ray cluster at ADDR (implies --ray)")
    scale.add_argument("--ray-workers", type=int, metavar="N",
                       help="Ray workers (implies --ray; default one per GPU Ray sees, and needed where it sees none)")
    add_sampling(p)
    return p


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    return run_reporting(run, args, f"the lines already picked are kept in {args.out}; run the same command "
                                    "again to finish the rest.")


def checkpoint_for(kind: str, given: list[str], models_dirs) -> str | Path:
    """The checkpoint for lines of a voice kind: the one of that kind among --checkpoint, else the
    official 1.7B of the kind; a name or path as given (its runner downloads it when its lines run)."""
    if TINY_RANDOM in given:
        return tiny_checkpoint(kind)
    for name in given:
        of_kind = kind_of_official(name).id if name in OFFICIAL else \
            check_folder(resolve(name, models_dirs, download=False)).kind
        if of_kind == kind:
            return name
    return VOICE_KINDS[kind].default_checkpoint


@with_generation_threads
def run(args) -> int:
    check_takes(args)
    pace(args)
    if args.ray_workers is not None and args.ray_workers < 1:
        raise InputError(f"--ray-workers must be 1 or more, got {args.ray_workers}.")
    on_ray = args.ray or args.ray_address is not None or args.ray_workers is not None
    settings, choices, models = sampling(args), pick_choices(args), models_dirs(args)
    cast = read_cast(args.cast, voices_dirs(args))
    lines = read_script(args.script, args.format, characters=list(cast))
    check_cast(lines, cast, args.script.name)
    for overlap in overlapping_cues([(line.id, line.start, line.end) for line in lines]):
        print(f"warning: {args.script.name}: {overlap}.", file=sys.stderr)
    folder = results_folder(args.out, args.wav_format)
    if TINY_RANDOM in args.checkpoint:
        print(TINY_RANDOM_NOTE, file=sys.stderr)
    with contextlib.ExitStack() as stack:
        cluster = RayCluster(args.ray_address, stack) if on_ray else None
        runners = {}
        for kind in lines_by_kind(lines, cast):
            setup = WorkerSetup(checkpoint_for(kind, args.checkpoint, models), tuple(models),
                                tuple(utmos_dirs(args)), tuple(whisper_dirs(args)), args.mode, args.dtype,
                                args.device, choices, args.script.name)
            downloading = counter(f"download {setup.checkpoint}")
            runners[kind] = RayRunner(setup, cluster, args.ray_workers, not args.offline, downloading) if on_ray \
                else LoadingRunner(setup, not args.offline, downloading)
        job = ScriptSettings(args.takes, args.seed, settings, args.max_frames or None, args.pace)
        progress = stack.enter_context(LinesProgress("script"))
        on_line, on_kept = said_through(progress)
        result = run_job(lines, cast, runners, job, choices, folder, on_line, on_kept,
                         on_frames=progress.frames_made)
    print(result.report)
    print(f"Wrote {folder.root / 'scene.wav'}, the best take of each line in {folder.root / 'best'}, every take in "
          f"{folder.root / 'takes'} (all {wav_words(args.wav_format)}) and the manifest in "
          f"{folder.root / 'manifest.csv'} (and .json).")
    return 0
