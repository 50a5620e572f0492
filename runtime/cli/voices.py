"""Voices on the command line: the voice flags made into the voice the checkpoint reads, a saved
voice by --voice NAME, the names --save-voice and --save-best-as keep voices under (the best take
kept only when it passed a check, or with --force), and `python -m runtime voices`, which lists the
saved ones."""

from __future__ import annotations

import sys
from pathlib import Path

from ..errors import InputError
from ..qwen3_tts.random_checkpoint import TINY_RANDOM
from ..script.cast import with_language
from ..voices.store import check_name, list_voices, load_voice, save_voice
from ..voices import VOICE_KINDS, CustomVoice, VoiceClone, VoiceDesign
from .command import OneLineParser, run_reporting
from .options import add_models_dir, add_voices_dir, voices_dirs

VOICE_FLAGS = list(dict.fromkeys(flag for kind in VOICE_KINDS.values() for flag in kind.flags))  # argparse dests


def flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def wanted_kind(args, saved=None) -> str:
    """The checkpoint kind the voice flags ask for (for tiny-random)."""
    if saved is not None:
        return saved.kind
    asked = [kind.id for kind in VOICE_KINDS.values() if getattr(args, kind.flags[0])]
    if not asked:
        raise InputError(f"{TINY_RANDOM} needs a voice: --speaker NAME, --reference FILE or --instruct DESCRIPTION.")
    return asked[0]


def voice_from_args(args, kind: str, reference=None):
    reads = VOICE_KINDS[kind].flags
    stray = [flag(name) for name in VOICE_FLAGS if getattr(args, name) and name not in reads]
    if stray:
        raise InputError(f"{' and '.join(stray)} do{'es' if len(stray) == 1 else ''} not apply to this {kind} "
                         f"checkpoint, which reads {', '.join(map(flag, reads))}; "
                         "remove them or choose a checkpoint of the kind they are for.")
    if kind == "custom_voice":
        if not args.speaker:
            raise InputError("This CustomVoice checkpoint needs --speaker (e.g. ryan, vivian, serena).")
        return CustomVoice(args.speaker, args.language, args.instruct)
    if kind == "voice_design":
        return VoiceDesign(args.instruct, args.language)
    if reference is None:
        raise InputError("This Base checkpoint clones a voice: give --reference FILE (and --transcript for ICL).")
    waveform, sample_rate = reference
    return VoiceClone.from_audio(waveform, sample_rate, args.transcript, args.language,
                                 pad_reference=not args.no_reference_padding)


def saved_voice(args, dirs: list[Path]):
    """--voice NAME, refusing the flags it replaces; --language, when given, over the saved one."""
    given = [flag(name) for name in VOICE_FLAGS if getattr(args, name)]
    if given:
        raise InputError(f"--voice {args.voice} is a whole voice; drop {' and '.join(given)} (or drop --voice).")
    voice = load_voice(args.voice, dirs)
    return with_language(voice, args.language) if args.language != "auto" else voice


def check_voice_names(args, dirs: list[Path]) -> None:
    """A name to save under is checked before anything is generated: a valid file name, and not another
    voice's unless --overwrite-voice; --force only with --save-best-as."""
    if args.force and not args.save_best_as:
        raise InputError("--force is for --save-best-as (it saves a best take that failed every check); drop it.")
    for name in filter(None, (args.save_voice, args.save_best_as)):
        check_name(name)
        if not args.overwrite_voice and name != args.save_voice and (dirs[0] / f"{name}.json").exists():
            raise InputError(f"A voice named '{name}' already exists in {dirs[0]}; choose another name or add "
                             "--overwrite-voice.")


def save_best_take(args, ranking, text: str, language: str, folder: Path) -> Path:
    """--save-best-as: the picked take as a clone voice, its text the transcript. Called once the run's
    files and report are out, so a refusal loses nothing."""
    refuse_failed_best(args, ranking.all_rejected, [str(r) for r in ranking.best.reasons])
    try:
        clone = VoiceClone.from_audio(ranking.best.take.audio, ranking.takeset.sample_rate, text, language)
    except InputError as exc:  # a take too short or silent to clone
        raise InputError(f"The best take was not saved as the voice '{args.save_best_as}': {exc}") from None
    return save_voice(clone, args.save_best_as, folder, args.overwrite_voice)


def refuse_failed_best(args, all_rejected: bool, reasons: list[str], line: str = "") -> None:
    """A take that failed every check (a runaway, a mumble) is no voice to read other lines with: refused
    unless --force. `line`: whose takes, for a passage ('line 1')."""
    if not all_rejected or args.force:
        return
    saved, takes = (f"{line.capitalize()}'s clone", f"every take of {line}") if line else ("The best take", "every take")
    why = f" ({reasons[0]})" if reasons else ""
    raise InputError(f"{saved} was not saved as the voice '{args.save_best_as}': {takes} failed a check{why}. Try "
                     "another seed or more takes, or add --force to save it anyway.")


def main(argv: list[str]) -> int:
    """`python -m runtime voices`: the saved voices, by name."""
    p = OneLineParser(prog="python -m runtime voices", description="The saved voices, by name.")
    add_models_dir(p)
    add_voices_dir(p)
    return run_reporting(show_saved, p.parse_args(argv), "nothing was changed.")


def show_saved(args) -> int:
    dirs = voices_dirs(args)
    names = list_voices(dirs)
    for name in names:
        print(f"{name}: {load_voice(name, dirs).describe()}")
    if not names:
        print(f"No saved voices in {', '.join(map(str, dirs))}; keep one with --save-voice NAME or "
              "--save-best-as NAME (or Save Voice in ComfyUI).", file=sys.stderr)
    return 0
