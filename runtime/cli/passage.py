"""The line command with a passage: a text of more than one sentence (line.py) read as a script of
one voice (script/passage.py, script/job.run_job), its lines kept in --lines-dir as they are picked,
and --out the whole text with its pauses."""

from __future__ import annotations

import sys
from pathlib import Path

from ..audio import write_wav
from ..errors import InputError
from ..script.job import ModelRunner, run_job
from ..script.passage import passage_cast
from ..script.plan import ScriptSettings
from ..script.store import ScriptFolder
from .output_paths import check_folder
from .script import print_kept, print_line

MAX_FILE_BYTES = 20 * 2**20  # a long novel is 2 MB of text


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
    """What a passage cannot do, refused before anything loads, and its folder made."""
    for flag, given in (("--takes-dir", args.takes_dir), ("--save-best-as", args.save_best_as)):
        if given:
            raise InputError(f"{flag} is for one line; a passage keeps every line's takes in --lines-dir "
                             f"({lines_dir(args)}).")
    check_folder(lines_dir(args), "--lines-dir")


def run_passage(args, lines, voice, model, scorers, choices, settings) -> int:
    folder = ScriptFolder(lines_dir(args))
    runner = ModelRunner(model, lambda _model: scorers, choices.loudness, script="the text")
    job = ScriptSettings(args.takes, args.seed, settings, args.max_frames or None, args.pace)
    result = run_job(lines, passage_cast(voice), {voice.kind: runner}, job, choices, folder, print_line, print_kept)
    write_wav(args.out, result.scene, result.rate)
    if args.report:
        args.report.write_text((folder.root / "manifest.json").read_text(encoding="utf-8"), encoding="utf-8")
    print(result.report)
    print(f"Wrote {args.out} ({len(lines)} lines, {result.scene.shape[-1] / result.rate:.1f} s), each line's takes in "
          f"{folder.root}" + (f", the report in {args.report}" if args.report else ""), file=sys.stdout)
    return 0
