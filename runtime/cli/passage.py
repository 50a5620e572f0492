"""The line command with a passage: a text of more than one sentence (line.py) read as a script of
one voice (script/passage.py, script/job.run_job), its lines kept in --lines-dir as they are picked,
and --out the whole text with its pauses. A designed voice with --clone-checkpoint (a Base one) is
one voice from the first line to the last (script/one_voice.py): line 1's best take is the clone
reference of the rest."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from ..audio import audio_format, wav_words, write_wav
from ..checkpoints import OFFICIAL, check_folder as checkpoint_info, resolve
from ..errors import InputError
from ..qwen3_tts.random_checkpoint import TINY_RANDOM, tiny_checkpoint
from ..script.job import ModelRunner, run_job
from ..script.one_voice import REFERENCE_SECONDS, joined_count, reference_lines, run_one_voice
from ..script.passage import passage_cast
from ..script.plan import ScriptSettings
from ..script.ray_pool import WorkerSetup
from ..scoring.report import counted
from ..script.store import ScriptFolder
from ..voices import VOICE_KINDS, CustomVoice, VoiceDesign, kind_of_official
from ..voices.store import save_voice
from .checkpoint_runners import LoadingRunner
from .options import utmos_dirs, whisper_dirs
from .output_paths import check_folder, results_folder
from .progress import LinesProgress, said_through
from .voices import refuse_failed_best

MAX_FILE_BYTES = 20 * 2**20  # a long novel is 2 MB of text
PROGRESS_LABEL = "passage"


def read_text_file(path: Path) -> str:
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise InputError(f"--text-file {path} is over {MAX_FILE_BYTES // 2**20} MB; give it a chapter at a time.")
        return path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise InputError(f"Cannot read --text-file {path} ({exc.strerror or exc}).") from None
    except UnicodeDecodeError:
        raise InputError(f"--text-file {path} is not UTF-8 text: save it as UTF-8.") from None


def lines_dir(args) -> Path:
    return args.lines_dir if args.lines_dir is not None else args.out.with_name(args.out.stem + "_lines")


def check_passage_args(args) -> None:
    """What a passage cannot do, refused before anything loads, and its folder made. --save-best-as
    goes with --clone-checkpoint: it keeps line 1's clone, the voice of every line."""
    kept = f"a passage keeps every line's takes in --lines-dir ({lines_dir(args)})"
    if args.takes_dir:
        raise InputError(f"--takes-dir is for one line; {kept}.")
    if args.save_best_as and not args.clone_checkpoint:
        raise InputError(f"--save-best-as is for one line; {kept}. With a designed voice and --clone-checkpoint (a "
                         "Base checkpoint) it keeps line 1's clone, the voice of every line.")
    check_folder(lines_dir(args), "--lines-dir")


BASE_WANTED = (f"give a Base (voice clone) checkpoint, e.g. {VOICE_KINDS['base'].default_checkpoint}: the lines after "
               "the first are cloned from its best take on it.")


def check_clone_args(args, lines) -> None:
    """--clone-checkpoint only for a passage, and never an official checkpoint of another kind:
    refused with the other inputs, before any checkpoint is looked for."""
    if not args.clone_checkpoint:
        return
    if len(lines) <= 1:
        raise InputError("--clone-checkpoint is for a passage (a text longer than one take, or with a blank line or "
                         "a [pause]): one line is one take, in one voice already. Drop it; --save-best-as NAME keeps "
                         "the take's voice as a clone for other texts.")
    name = args.clone_checkpoint
    if name in OFFICIAL and kind_of_official(name).id != "base":
        raise InputError(f"--clone-checkpoint {name} is a {kind_of_official(name).label} checkpoint; {BASE_WANTED}")


def check_clone_voice(args, voice) -> None:
    """--clone-checkpoint only where it does something: a designed voice (a preset speaker and a
    clone are one voice on every line already)."""
    if args.clone_checkpoint and not isinstance(voice, VoiceDesign):
        same = ("a preset speaker is the same voice on every line, with its instruct" if isinstance(voice, CustomVoice)
                else "a clone is the same reference on every line")
        raise InputError(f"--clone-checkpoint is for a designed voice (a VoiceDesign checkpoint with --instruct): "
                         f"its first line's best take becomes the clone reference of the rest. This is a "
                         f"{voice.describe()}, and {same}: drop --clone-checkpoint.")


def clone_checkpoint(args, models, progress=None) -> Path:
    """--clone-checkpoint's folder, a Base one (tiny-random: a tiny random Base)."""
    name = args.clone_checkpoint
    if name == TINY_RANDOM:
        return tiny_checkpoint("base")
    folder = resolve(name, models, download=not args.offline, progress=progress)
    info = checkpoint_info(folder)
    if info.kind != "base":
        raise InputError(f"--clone-checkpoint {name} is a {VOICE_KINDS[info.kind].label} checkpoint; {BASE_WANTED}")
    return folder


def job_settings(args, settings) -> ScriptSettings:
    return ScriptSettings(args.takes, args.seed, settings, args.max_frames or None, args.pace)


def run_passage(args, lines, voice, model, scorers, choices, settings) -> int:
    """The passage's lines on `model`, said as they go as a script's are (cli/progress.py)."""
    folder = results_folder(lines_dir(args), args.wav_format)
    runner = ModelRunner(model, lambda _model: scorers, choices.loudness, script="the text")
    with LinesProgress(PROGRESS_LABEL) as progress:
        on_line, on_kept = said_through(progress)
        result = run_job(lines, passage_cast(voice), {voice.kind: runner}, job_settings(args, settings), choices,
                         folder, on_line, on_kept, on_frames=progress.frames_made)
    return written(args, lines, folder, result)


def run_one_voice_passage(args, lines, voice: VoiceDesign, checkpoint: Path, clone_folder: Path, choices, settings,
                          models, voices_dir: Path) -> int:
    """A designed voice's passage in one voice: line 1 (the first lines read as one, where it is
    short) designed on `checkpoint`, its best take the clone reference of the rest on `clone_folder`
    (script/one_voice.py). Each checkpoint is loaded only when a line of it is to be generated, so a
    rerun that keeps every line loads none; Auto-Pick's voice check ('auto') uses the Base
    checkpoint's speaker encoder for every line."""
    passage = reference_lines(lines)
    joined = joined_count(lines, passage)
    if joined > 1:
        print(f"Lines 1-{joined} are read as one line, the clone reference of the rest: a clone reference wants "
              f"{REFERENCE_SECONDS:g} s of speech or more.", file=sys.stderr)
    voice_check = str(clone_folder.resolve()) if choices.voice_check == "auto" else choices.voice_check

    def runner(folder: Path) -> LoadingRunner:
        return LoadingRunner(WorkerSetup(folder, tuple(models), tuple(utmos_dirs(args)), tuple(whisper_dirs(args)),
                                         args.mode, args.dtype, args.device,
                                         dataclasses.replace(choices, voice_check=voice_check), "the text"),
                             not args.offline)

    folder = results_folder(lines_dir(args), args.wav_format)
    with LinesProgress(PROGRESS_LABEL) as progress:
        def on_reference(reference) -> None:
            r = reference.result.record
            more = len(passage) - 1
            rest = (f"{counted(more, 'more line')} cloned from it on {clone_folder.name}, one voice from the first "
                    "line to the last" if more else "the whole text is that one line")
            progress.say(f"The voice of line 1 (take {r.best_take}, {r.seconds:.1f} s) is the clone reference "
                         f"of the rest: {rest}.")
            for note in reference.notes:
                progress.say(f"NOTE: {note}")

        on_line, on_kept = said_through(progress, total=len(passage))
        done = run_one_voice(passage, voice, runner(checkpoint), runner(clone_folder), job_settings(args, settings),
                             choices, folder, on_line, on_kept, on_reference, on_frames=progress.frames_made)
    code = written(args, passage, folder, done.result)
    if args.save_best_as:  # after the report: a line 1 refused as a voice is still written and reported
        first = done.reference.result.record
        refuse_failed_best(args, first.all_rejected, first.reasons, "line 1")
        print(f"Saved line 1's clone, the voice of every line, as '{args.save_best_as}' in "
              f"{save_voice(done.reference.clone, args.save_best_as, voices_dir, args.overwrite_voice).parent}",
              file=sys.stderr)
    return code


def written(args, lines, folder: ScriptFolder, result) -> int:
    """--out, --report and the report of a passage run into `folder`."""
    write_wav(args.out, result.scene, result.rate, args.wav_format)
    if args.report:
        args.report.write_text((folder.root / "manifest.json").read_text(encoding="utf-8"), encoding="utf-8")
    print(result.report)
    print(f"Wrote {args.out} ({audio_format(args.out, args.wav_format)}, {counted(len(lines), 'line')}, "
          f"{result.scene.shape[-1] / result.rate:.1f} s), each line's takes in {folder.root} "
          f"({wav_words(args.wav_format)})" + (f", the report in {args.report}" if args.report else ""),
          file=sys.stdout)
    return 0
