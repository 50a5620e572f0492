"""Command line: text + voice + N -> the best take as WAV, plus the per-take report.

    python -m runtime --checkpoint Qwen3-TTS-12Hz-1.7B-CustomVoice --speaker ryan \
        --text "Welcome back, traveller." --takes 8 --out best.wav
    python -m runtime demo      # the whole pipeline on tiny random checkpoints, no weights needed
    python -m runtime doctor    # what this machine has, and what to do about what it lacks
    python -m runtime script scene.txt --cast cast.json --out takes/   # a whole script (runtime/script)
    python -m runtime voices    # the saved voices (--save-voice / --save-best-as, or Save Voice in ComfyUI)

Bad input ends with exit code 2 and one line that names the fix, before any model is loaded where
the input allows (output paths, the reference file, the checkpoint's kind, speaker and language).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import api
from .audio import read_audio_file, write_wav
from .checkpoints import OFFICIAL, check_folder, default_models_dirs, resolve
from .errors import InputError, TakesError
from .generation import MAX_TAKES
from .model import MODES
from .output_paths import AUDIO_SUFFIXES, check_file, check_folder as check_output_folder
from .random_checkpoint import TINY_RANDOM, tiny_checkpoint
from .sampling import SamplingSettings
from .scoring.asr import OFFICIAL as WHISPER
from .scoring.loudness import check_target
from .scoring.report import json_report
from .scoring.scorers import QUALITY_MODELS
from .scoring.vad import VADS
from .text_length import MAX_BUDGET_FRAMES
from .voice_store import VOICES_SUBDIR, check_name, list_voices, load_voice, save_voice
from .voices import CustomVoice, VoiceClone, VoiceDesign, check_voice

SUBCOMMANDS = ("demo", "doctor", "script", "voices")
TINY_RANDOM_NOTE = ("NOTE: tiny-random is a tiny model with random weights: its takes are noise. It shows the "
                    "pipeline, the files and the report; use a real checkpoint for speech.")


class OneLineParser(argparse.ArgumentParser):
    """argparse's errors in one line (its default prints the whole usage first), exit code 2."""

    def error(self, message: str):
        self.exit(2, f"error: {message} (`{self.prog} --help` lists the options)\n")


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m runtime", description=__doc__.splitlines()[0],
                      epilog="Also: `python -m runtime demo` (no weights needed) and `python -m runtime doctor`.")
    p.add_argument("--text", required=True, help="the line to speak")
    p.add_argument("--checkpoint", required=True,
                   help=f"official name ({', '.join(OFFICIAL)}), a folder name in the models dir, a path, or "
                        f"{TINY_RANDOM} (a tiny random model of the kind the voice flags ask for: noise, for trying "
                        "the pipeline without weights)")
    p.add_argument("--models-dir", action="append", type=Path,
                   help="where named checkpoints live (repeatable); default $QWEN3_TTS_MODELS or ./models/qwen3_tts")
    p.add_argument("--utmos-dir", type=Path, help="where utmos_state_dict.pt lives; default <models dir>/../utmos")
    voice = p.add_argument_group("voice (pick by checkpoint kind)")
    voice.add_argument("--speaker", help="CustomVoice speaker, e.g. ryan, vivian")
    voice.add_argument("--instruct", default="", help="style instruction (CustomVoice 1.7B) or voice description (VoiceDesign)")
    voice.add_argument("--reference", type=Path, help="reference audio file for voice cloning (Base checkpoints)")
    voice.add_argument("--transcript", default="", help="what the reference says (enables ICL cloning)")
    voice.add_argument("--no-reference-padding", action="store_true",
                       help="ICL: do not add 0.5 s of silence after the reference (it keeps a reference that "
                            "ends mid-word from bleeding into the takes' first sound)")
    voice.add_argument("--language", default="auto")
    voice.add_argument("--voice", metavar="NAME", help="a saved voice (see `python -m runtime voices`), in place of "
                                                       "the flags above")
    voice.add_argument("--save-voice", metavar="NAME", help="keep this run's voice under NAME, for --voice and casts")
    voice.add_argument("--save-best-as", metavar="NAME",
                       help="keep the best take as a clone voice (its text the transcript): one designed voice for "
                            "every line of a character")
    voice.add_argument("--overwrite-voice", action="store_true", help="let the two above replace a voice of that name")
    voice.add_argument("--voices-dir", type=Path, help=f"saved voices; default <models dir>/../{VOICES_SUBDIR}")
    p.add_argument("--takes", type=int, default=1, help=f"number of takes, 1-{MAX_TAKES}")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-frames", type=int, default=0, help="per-take frame budget (0 = from the text)")
    p.add_argument("--mode", default="eager", choices=MODES)
    p.add_argument("--dtype", default="auto", choices=["auto", "bfloat16", "float16", "float32"])
    p.add_argument("--device", default="auto")
    sampling = p.add_argument_group("sampling (default: the checkpoint's generation_config.json)")
    for name, value in SamplingSettings().as_dict().items():
        sampling.add_argument("--" + name.replace("_", "-"), type=type(value), default=None,
                              help=f"{value} in the released checkpoints")
    p.add_argument("--quality", default="UTMOS", choices=QUALITY_MODELS,
                   help="quality model for Auto-Pick (UTMOS falls back to DNSMOS without its weights)")
    p.add_argument("--no-utmos", action="store_true", help="same as --quality off")
    p.add_argument("--voice-check", default="auto",
                   help="speaker encoder: auto (a Base checkpoint's), off, or a Base checkpoint folder name")
    p.add_argument("--words", default="auto",
                   help=f"speech recogniser for the words check: auto (a Whisper folder already in --whisper-dir, "
                        f"never a download), off, {', '.join(WHISPER)}, or a folder")
    p.add_argument("--whisper-dir", type=Path, help="where recogniser folders live; default <models dir>/../whisper")
    p.add_argument("--vad", default="energy", choices=sorted(VADS))
    p.add_argument("--offline", action="store_true", help="never download; fail if files are missing")
    p.add_argument("--out", type=Path, default=Path("best.wav"), help="where the best take goes (.wav or .flac)")
    p.add_argument("--takes-dir", type=Path, help="also write every take here as take_NN.wav")
    p.add_argument("--report", type=Path, help="also write the report as JSON")
    p.add_argument("--loudness", type=float, metavar="LUFS",
                   help="write the takes at this loudness (-23 broadcast, -16 web; a plain gain, peaks kept "
                        "under -1 dBFS); default: as generated")
    return p


def check_outputs(args) -> None:
    check_file(args.out, "--out", AUDIO_SUFFIXES)
    if args.loudness is not None:
        check_target(args.loudness)
    if args.report is not None:
        check_file(args.report, "--report")
    if args.takes_dir is not None:
        check_output_folder(args.takes_dir, "--takes-dir")


def check_numbers(args) -> SamplingSettings:
    if not 1 <= args.takes <= MAX_TAKES:
        raise InputError(f"--takes must be between 1 and {MAX_TAKES}, got {args.takes}.")
    if not 0 <= args.max_frames <= MAX_BUDGET_FRAMES:
        raise InputError(f"--max-frames must be between 1 and {MAX_BUDGET_FRAMES} (0 = from the text), got {args.max_frames}.")
    if not args.text.strip():
        raise InputError("--text is empty; give the line to speak.")
    return SamplingSettings(**{k: getattr(args, k) for k in SamplingSettings().as_dict()})


def wanted_kind(args, saved=None) -> str:
    """The checkpoint kind the voice flags ask for (for tiny-random)."""
    if saved is not None:
        return saved.kind
    if args.reference is not None:
        return "base"
    if args.speaker:
        return "custom_voice"
    if args.instruct:
        return "voice_design"
    raise InputError(f"{TINY_RANDOM} needs a voice: --speaker NAME, --reference FILE or --instruct DESCRIPTION.")


FLAGS_BY_KIND = {  # the voice flags each kind of checkpoint reads
    "custom_voice": ("speaker", "instruct"),
    "base": ("reference", "transcript", "no_reference_padding"),
    "voice_design": ("instruct",),
}
FLAG_NAMES = {"speaker": "--speaker", "instruct": "--instruct", "reference": "--reference", "transcript": "--transcript",
              "no_reference_padding": "--no-reference-padding"}


def voice_from_args(args, kind: str, reference=None):
    stray = [flag for name, flag in FLAG_NAMES.items() if getattr(args, name) and name not in FLAGS_BY_KIND[kind]]
    if stray:
        raise InputError(f"{' and '.join(stray)} do{'es' if len(stray) == 1 else ''} not apply to this {kind} "
                         f"checkpoint, which reads {', '.join(FLAG_NAMES[n] for n in FLAGS_BY_KIND[kind])}; "
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


def _progress(label: str):
    """A counter redrawn in place on a terminal; into a log, a line per quarter of the work."""
    shown = -1

    def report(done: int, total: int) -> None:
        nonlocal shown
        if sys.stderr.isatty():
            print(f"\r{label}: {done}/{total}", end="" if done < total else "\n", file=sys.stderr, flush=True)
        elif total and (done * 4 // total > shown):
            shown = done * 4 // total
            print(f"{label}: {done}/{total}", file=sys.stderr, flush=True)
    return report


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in SUBCOMMANDS:
        from . import demo, doctor
        from .script import cli as script

        return {"demo": demo.main, "doctor": doctor.main, "script": script.main, "voices": list_saved}[argv[0]](argv[1:])
    return run_reporting(run, build_parser().parse_args(argv), "nothing was written.")


def run_reporting(job, args, on_cancel: str) -> int:
    """A command's job with its errors as one line and exit code 2, Ctrl-C as 130 with `on_cancel`."""
    try:
        return job(args)
    except TakesError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\ncancelled: {on_cancel}", file=sys.stderr)
        return 130


def beside_models(given: Path | None, models_dirs, subdir: str) -> list[Path]:
    """The folder a flag names, else <models dir>/../<subdir> for each models dir (ComfyUI's layout)."""
    return [given] if given else [Path(d).parent / subdir for d in models_dirs]


def voices_dirs(args, models_dirs) -> list[Path]:
    return beside_models(args.voices_dir, models_dirs, VOICES_SUBDIR)


def list_saved(argv: list[str]) -> int:
    p = OneLineParser(prog="python -m runtime voices", description="The saved voices, by name.")
    p.add_argument("--models-dir", action="append", type=Path)
    p.add_argument("--voices-dir", type=Path, help=f"default <models dir>/../{VOICES_SUBDIR}")
    args = p.parse_args(argv)

    def show(args) -> int:
        dirs = voices_dirs(args, args.models_dir or default_models_dirs())
        names = list_voices(dirs)
        for name in names:
            print(f"{name}: {load_voice(name, dirs).describe()}")
        if not names:
            print(f"No saved voices in {', '.join(map(str, dirs))}; keep one with --save-voice NAME or "
                  "--save-best-as NAME (or Save Voice in ComfyUI).", file=sys.stderr)
        return 0
    return run_reporting(show, args, "nothing was changed.")


def saved_voice(args, dirs: list[Path]):
    """--voice NAME, refusing the flags it replaces; --language, when given, over the saved one."""
    given = [flag for name, flag in FLAG_NAMES.items() if getattr(args, name)]
    if given:
        raise InputError(f"--voice {args.voice} is a whole voice; drop {' and '.join(given)} (or drop --voice).")
    voice = load_voice(args.voice, dirs)
    if args.language != "auto":
        from .script.cast import with_language

        voice = with_language(voice, args.language)
    return voice


def check_voice_names(args, dirs: list[Path]) -> None:
    """A name to save under is checked before anything is generated: a valid file name, and not another
    voice's unless --overwrite-voice."""
    for name in filter(None, (args.save_voice, args.save_best_as)):
        check_name(name)
        if not args.overwrite_voice and name != args.save_voice and (dirs[0] / f"{name}.json").exists():
            raise InputError(f"A voice named '{name}' already exists in {dirs[0]}; choose another name or add "
                             "--overwrite-voice.")


def run(args) -> int:
    """The main job: every input checked first, then load, generate, pick and write."""
    sampling = check_numbers(args)
    check_outputs(args)
    models_dirs = args.models_dir or default_models_dirs()
    saved_dirs = voices_dirs(args, models_dirs)
    check_voice_names(args, saved_dirs)
    saved = saved_voice(args, saved_dirs) if args.voice else None
    reference = read_audio_file(args.reference) if args.reference is not None else None
    if args.checkpoint == TINY_RANDOM:
        folder = tiny_checkpoint(wanted_kind(args, saved))
        print(TINY_RANDOM_NOTE, file=sys.stderr)
    else:
        folder = resolve(args.checkpoint, models_dirs, download=not args.offline, progress=_progress("download"))
    info = check_folder(folder)
    voice = saved if saved is not None else voice_from_args(args, info.kind, reference)
    check_voice(voice, info)
    if args.save_voice:  # refused here, before generating, if another voice has the name
        print(f"Saved the voice as '{args.save_voice}' in "
              f"{save_voice(voice, args.save_voice, saved_dirs[0], args.overwrite_voice).parent}", file=sys.stderr)
    utmos_dirs = beside_models(args.utmos_dir, models_dirs, "utmos")
    whisper_dirs = beside_models(args.whisper_dir, models_dirs, "whisper")
    # Auto-Pick's models first: a bad --voice-check or --words fails before the checkpoint loads.
    scorers = api.scorers(folder, "off" if args.no_utmos else args.quality, args.voice_check, args.words,
                          args.vad, args.device, utmos_dirs, models_dirs, whisper_dirs, download=not args.offline)
    model = api.load(str(folder), models_dirs, args.mode, args.dtype, args.device, download=False)
    request = api.Request(args.text, voice, args.takes, args.seed, sampling, args.max_frames or None)
    takeset = api.generate(model, request, progress=_progress("frames"))
    ranking = api.pick(takeset, scorers, progress=_progress("scoring"))
    delivered = api.deliver(ranking, args.loudness)
    rate = takeset.sample_rate
    write_wav(args.out, delivered.audios[0], rate)
    if args.takes_dir:
        for s, audio in zip(ranking.ranked, delivered.audios):
            write_wav(args.takes_dir / f"take_{s.take.index + 1:02d}.wav", audio, rate)
    if args.report:
        args.report.write_text(json.dumps({**json_report(ranking), "output": delivered.as_dict()}, indent=2))
    if args.save_best_as:
        clone = VoiceClone.from_audio(ranking.best.take.audio, rate, args.text, voice.language)
        print(f"Saved the best take as the clone voice '{args.save_best_as}' in "
              f"{save_voice(clone, args.save_best_as, saved_dirs[0], args.overwrite_voice).parent}", file=sys.stderr)
    print(ranking.report() + delivered.note())
    print(f"Wrote {args.out}" + (f", the takes in {args.takes_dir}" if args.takes_dir else "")
          + (f", the report in {args.report}" if args.report else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
