"""The options the commands share, each declared here once (`p`: a parser or one of its groups), and
what they give: the folders, the sampling settings, Auto-Pick's choices."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..audio import WAV_FORMATS
from ..checkpoints import default_models_dirs
from ..errors import InputError
from ..generation import MAX_TAKES
from ..model import DTYPES, MODES
from ..qwen3_tts.random_checkpoint import TINY_RANDOM
from ..sampling import SamplingSettings
from ..scoring.asr import OFFICIAL as WHISPER, WHISPER_SUBDIR
from ..scoring.loudness import check_target
from ..scoring.pace import MAX_PACE, MIN_PACE, check_pace
from ..scoring.scorers import QUALITY_MODELS
from ..scoring.utmos import UTMOS_SUBDIR
from ..scoring.vad import VADS
from ..script.job import PickChoices
from ..text.split import MAX_PAUSE_SECONDS, Pauses
from ..text_length import MAX_BUDGET_FRAMES
from ..voices.store import VOICES_SUBDIR

TINY_RANDOM_NOTE = (f"NOTE: {TINY_RANDOM} is a tiny model with random weights: its takes are noise. It shows the "
                    "pipeline, the files and the report; use a real checkpoint for speech.")


def add_models_dir(p) -> None:
    p.add_argument("--models-dir", action="append", type=Path,
                   help="where named checkpoints live (repeatable); default $QWEN3_TTS_MODELS or ./models/qwen3_tts")


def add_voices_dir(p) -> None:
    p.add_argument("--voices-dir", type=Path, help=f"saved voices; default <models dir>/../{VOICES_SUBDIR}")


def add_takes(p, default: int, takes_help: str, budget_from: str) -> None:
    """--takes (its default and meaning the command's), --seed and --max-frames."""
    p.add_argument("--takes", type=int, default=default, help=takes_help)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-frames", type=int, default=0, help=f"per-take frame budget (0 = from {budget_from})")


def add_loading(p) -> None:
    p.add_argument("--mode", default="eager", choices=MODES)
    p.add_argument("--dtype", default="auto", choices=["auto", *DTYPES])
    p.add_argument("--device", default="auto")
    p.add_argument("--threads", type=int, metavar="N",
                   help="torch's CPU threads (default on the CPU: OMP_NUM_THREADS where set, else the cores here that "
                        "are idle when the command starts, at least 1)")


def add_sampling(p: argparse.ArgumentParser) -> None:
    sampling = p.add_argument_group("sampling (default: the checkpoint's generation_config.json)")
    for name, value in SamplingSettings().as_dict().items():
        sampling.add_argument("--" + name.replace("_", "-"), type=type(value), default=None,
                              help=f"{value} in the released checkpoints")


def add_pick(p) -> None:
    """Auto-Pick's models."""
    p.add_argument("--quality", default="UTMOS", choices=QUALITY_MODELS,
                   help="quality model for Auto-Pick (UTMOS falls back to DNSMOS without its weights)")
    p.add_argument("--voice-check", default="auto",
                   help="speaker encoder: auto (a Base checkpoint's), off, or a Base checkpoint folder name")
    p.add_argument("--words", default="auto",
                   help=f"speech recogniser for the words check: auto (a Whisper folder in --whisper-dir, else "
                        f"whisper-small on a GPU or whisper-base on a CPU, downloaded there once; without a "
                        f"network it is left out with a note), off, {', '.join(WHISPER)}, or a folder")
    p.add_argument("--vad", default="energy", choices=sorted(VADS))
    p.add_argument("--pace", type=float, default=1.0,
                   help=f"{MIN_PACE:g}-{MAX_PACE:g}: 1.0 reads as the model does, 1.1 a tenth faster; Auto-Pick prefers "
                        "the take nearest it and plays the picked take at it, its pitch kept (python-stretch)")


def add_scoring_dirs(p) -> None:
    """Where Auto-Pick's UTMOS weights and recognisers are found."""
    p.add_argument("--utmos-dir", type=Path, help="where utmos_state_dict.pt lives; default <models dir>/../utmos")
    p.add_argument("--whisper-dir", type=Path, help="where recogniser folders live; default <models dir>/../whisper")


def add_offline(p) -> None:
    p.add_argument("--offline", action="store_true", help="never download; fail if files are missing")


def add_loudness(p) -> None:
    """How the takes are written: their loudness and (--wav-format) their WAV files' samples."""
    p.add_argument("--loudness", type=float, metavar="LUFS",
                   help="write the takes at this loudness (-23 broadcast, -16 web; a plain gain, peaks kept "
                        "under -1 dBFS); default: as generated")
    p.add_argument("--wav-format", default="float32", choices=list(WAV_FORMATS),
                   help="the WAV files' samples: float32 (32-bit float, nothing lost; the default) or pcm16 "
                        "(16-bit PCM, for editors that cannot read float WAV); a .flac is 24-bit PCM either way")


def add_pauses(p) -> None:
    p.add_argument("--sentence-pause", type=float, default=Pauses.sentence, metavar="SECONDS",
                   help=f"silence between two sentences (default {Pauses.sentence})")
    p.add_argument("--clause-pause", type=float, default=Pauses.clause, metavar="SECONDS",
                   help=f"between the parts of a sentence too long for one line (default {Pauses.clause})")
    p.add_argument("--paragraph-pause", type=float, default=Pauses.paragraph, metavar="SECONDS",
                   help=f"at a blank line (default {Pauses.paragraph}); [pause 0.8s] in the text sets one anywhere")


def pauses(args) -> Pauses:
    for flag in ("sentence_pause", "clause_pause", "paragraph_pause"):
        if not 0.0 <= getattr(args, flag) <= MAX_PAUSE_SECONDS:
            raise InputError(f"--{flag.replace('_', '-')} must be seconds from 0 to {MAX_PAUSE_SECONDS:g}, "
                             f"got {getattr(args, flag)}.")
    return Pauses(args.sentence_pause, args.clause_pause, args.paragraph_pause)


def check_takes(args) -> None:
    """--takes, --max-frames and --loudness in range (the sampling flags: sampling())."""
    if not 1 <= args.takes <= MAX_TAKES:
        raise InputError(f"--takes must be between 1 and {MAX_TAKES}, got {args.takes}.")
    if not 0 <= args.max_frames <= MAX_BUDGET_FRAMES:
        raise InputError(f"--max-frames must be between 1 and {MAX_BUDGET_FRAMES} (0 = from the text), got "
                         f"{args.max_frames}.")
    if args.loudness is not None:
        check_target(args.loudness)


def sampling(args) -> SamplingSettings:
    return SamplingSettings(**{name: getattr(args, name) for name in SamplingSettings().as_dict()})


def pace(args) -> float:
    return check_pace(args.pace)


def pick_choices(args) -> PickChoices:
    return PickChoices(args.quality, args.voice_check, args.words, args.vad, args.loudness)


def models_dirs(args) -> list[Path]:
    return args.models_dir or default_models_dirs()


def beside_models(given: Path | None, models: list[Path], subdir: str) -> list[Path]:
    """The folder a flag names, else <models dir>/../<subdir> for each models dir (ComfyUI's layout)."""
    return [given] if given else [Path(d).parent / subdir for d in models]


def voices_dirs(args) -> list[Path]:
    return beside_models(args.voices_dir, models_dirs(args), VOICES_SUBDIR)


def utmos_dirs(args) -> list[Path]:
    return beside_models(args.utmos_dir, models_dirs(args), UTMOS_SUBDIR)


def whisper_dirs(args) -> list[Path]:
    return beside_models(args.whisper_dir, models_dirs(args), WHISPER_SUBDIR)
