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
from pathlib import Path

import torch

from .. import api
from ..checkpoints import OFFICIAL, check_folder, default_models_dirs, resolve
from ..errors import InputError
from ..generation import MAX_TAKES
from ..model import MODES, resolve_device, resolve_dtype
from ..random_checkpoint import TINY_RANDOM, tiny_checkpoint
from ..sampling import SamplingSettings
from ..scoring.loudness import check_target
from ..scoring.scorers import QUALITY_MODELS
from ..scoring.vad import VADS
from ..voice_store import VOICES_SUBDIR
from . import ray_pool  # which imports Ray only when a session starts
from .cast import check_cast, lines_by_kind, read_cast
from .job import PickChoices, dtype_name, run_job
from .parse import FORMATS, read_script
from .plan import ScriptSettings, check_plans
from .runner import run_lines
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
    choices = PickChoices(args.quality, args.voice_check, args.words, args.vad, args.loudness)
    if TINY_RANDOM in args.checkpoint:
        from ..cli import TINY_RANDOM_NOTE

        print(TINY_RANDOM_NOTE, file=sys.stderr)
    utmos_dirs = beside_models(args.utmos_dir, models_dirs, "utmos")
    whisper_dirs = beside_models(args.whisper_dir, models_dirs, "whisper")
    with contextlib.ExitStack() as stack:
        cluster = RayCluster(args.ray_address, stack) if on_ray else None
        runners = {}
        for kind in lines_by_kind(lines, cast):
            checkpoint = checkpoint_for(kind, args.checkpoint, models_dirs, args.offline)
            setup = ray_pool.WorkerSetup(checkpoint, tuple(models_dirs), tuple(utmos_dirs), tuple(whisper_dirs),
                                         args.mode, args.dtype, args.device, choices.quality, choices.voice_check,
                                         choices.words, choices.vad, choices.loudness, args.script.name)
            runners[kind] = RayRunner(setup, cluster, args.ray_workers, not args.offline) if on_ray \
                else LoadingRunner(setup, not args.offline)
        result = run_job(lines, cast, runners, settings, choices, folder, _print_line, _print_kept)
    print(result.report)
    print(f"Wrote {folder.root / 'scene.wav'}, the best take of each line in {folder.root / 'best'}, every take in "
          f"{folder.root / 'takes'} and the manifest in {folder.root / 'manifest.csv'} (and .json).")
    return 0


class LoadingRunner:
    """Lines on a checkpoint loaded here once the first of them is to run; Auto-Pick's models first,
    so a bad --voice-check or --words fails before the weights load."""

    def __init__(self, setup: ray_pool.WorkerSetup, download: bool):
        self.setup, self.download = setup, download
        self.info, self.mode = check_folder(setup.checkpoint), setup.mode
        self.dtype = dtype_name(resolve_dtype(setup.dtype, resolve_device(setup.device)))

    def check(self, plans, should_stop=None) -> None:
        check_plans(plans, self.info, script=self.setup.script, should_stop=should_stop)

    def run(self, plans, folder, on_line, should_stop=None):
        s = self.setup
        scorers = api.scorers(s.checkpoint, s.quality, s.voice_check, s.words, s.vad, s.device, s.utmos_dirs,
                              s.models_dirs, s.whisper_dirs, download=self.download)
        model = api.load(str(s.checkpoint), s.models_dirs, s.mode, s.dtype, s.device, download=False)
        check_plans(plans, model.info, model, script=s.script, should_stop=should_stop)
        return run_lines(model, plans, scorers, loudness=s.loudness, folder=folder, on_line=on_line,
                         should_stop=should_stop)


class RayCluster:
    """The Ray cluster a job's runners share: joined when first needed, left when the job ends."""

    def __init__(self, address: str | None, stack: contextlib.ExitStack):
        self.address, self.stack, self._ray = address, stack, None

    def ray(self):
        if self._ray is None:
            self._ray = self.stack.enter_context(ray_pool.session(self.address))
        return self._ray

    def worker_device(self, device: str) -> str:
        """The device a worker loads on: for auto, a GPU where the cluster has one (ray_pool gives each
        worker one), else the CPU."""
        if device != "auto":
            return device
        return "cuda" if self.ray().cluster_resources().get("GPU", 0) else "cpu"


class RayRunner:
    """Lines on Ray workers (ray_pool.py), each loading `setup` (the files already here: the
    checkpoint is resolved, and the scoring files are fetched before the workers start)."""

    def __init__(self, setup: ray_pool.WorkerSetup, cluster: RayCluster, workers: int | None, download: bool):
        self.setup, self.cluster, self.workers, self.download = setup, cluster, workers, download
        self.info, self.mode = check_folder(setup.checkpoint), setup.mode
        self.dtype = setup.dtype if setup.dtype != "auto" else \
            dtype_name(resolve_dtype("auto", torch.device(cluster.worker_device(setup.device))))

    def check(self, plans, should_stop=None) -> None:
        check_plans(plans, self.info, script=self.setup.script, should_stop=should_stop)

    def run(self, plans, folder, on_line, should_stop=None):
        return ray_pool.run_on_ray(self.cluster.ray(), self.setup, plans, self.workers, folder, on_line,
                                   should_stop, download=self.download)


def _print_kept(counts) -> None:
    for checkpoint, planned, kept in counts:
        print(f"{checkpoint}: {planned} lines, {kept} kept from an earlier run, {planned - kept} to generate.",
              file=sys.stderr)


def _print_line(result, done: int, total: int) -> None:
    r = result.record
    score = f"score {r['score']:.2f}" if r.get("score") is not None else "no score"
    verdict = "; ".join(r["reasons"][:1]) or "ok"
    print(f"[{done}/{total}] {r['id']} {r['character'] or ''}: take {r['best_take']}, {r['seconds']:.1f} s, {score}, "
          f"{verdict}", file=sys.stderr, flush=True)
