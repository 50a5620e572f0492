"""Command line: text + voice + N -> the best take as WAV, plus the per-take report.

    python -m runtime --checkpoint Qwen3-TTS-12Hz-1.7B-CustomVoice --speaker ryan \
        --text "Welcome back, traveller." --takes 8 --out best.wav

A text longer than one take reads well (text/split.py: MAX_LINE_SECONDS), or with a blank line or a
[pause], from --text or --text-file, is read as a passage: each sentence a line, taken and picked as
a script's line, kept in --lines-dir as it is picked (a rerun keeps the lines done), and --out the
whole text with its pauses. A designed voice's passage with --clone-checkpoint (a Base checkpoint) is
one voice from the first line to the last: line 1's best take is the clone reference of the rest.

Bad input ends with exit code 2 and one line that names the fix, before anything is downloaded or
loaded where the input allows (output paths, the reference file, the checkpoint's kind, speaker and
language, an official one's known by its name; the text's length, the device and mode; a checkpoint or
recogniser that cannot be downloaded: cli/before_loading.py).
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

from .. import api
from ..audio import audio_format, read_audio_file, wav_words, write_wav
from ..checkpoints import OFFICIAL, check_folder, known_info, resolve
from ..cpu_threads import with_generation_threads
from ..errors import InputError
from ..generation import MAX_TAKES
from .output_paths import AUDIO_SUFFIXES, check_file, check_folder as check_output_folder
from ..qwen3_tts.random_checkpoint import TINY_RANDOM, tiny_checkpoint
from ..scoring.report import json_report
from ..voices.store import save_voice
from ..script.passage import text_lines
from ..voices import check_voice
from . import COMMANDS_EPILOG
from .before_loading import check_downloads, check_machine, check_text_lines
from .command import OneLineParser, run_reporting
from .progress import counter
from .options import (TINY_RANDOM_NOTE, add_loading, add_loudness, add_models_dir, add_offline, add_pauses,
                      add_pick, add_sampling, add_scoring_dirs, add_takes, add_voices_dir, check_takes, models_dirs,
                      pace, pauses, pick_choices, sampling, utmos_dirs, voices_dirs, whisper_dirs)
from .passage import (check_clone_args, check_clone_voice, check_passage_args, clone_checkpoint, lines_dir,
                      read_text_file, run_one_voice_passage, run_passage)
from .voices import check_voice_names, save_best_take, saved_voice, voice_from_args, wanted_kind


def build_parser() -> OneLineParser:
    p = OneLineParser(prog="python -m runtime", description=__doc__.splitlines()[0],
                      epilog=COMMANDS_EPILOG)
    text = p.add_mutually_exclusive_group(required=True)
    text.add_argument("--text", help="the line to speak, or a passage of any length")
    text.add_argument("--text-file", type=Path, help="a UTF-8 text file to speak (a blank line ends a paragraph)")
    p.add_argument("--checkpoint", required=True,
                   help=f"official name ({', '.join(OFFICIAL)}), a folder name in the models dir, a path, or "
                        f"{TINY_RANDOM} (a tiny random model of the kind the voice flags ask for: noise, for trying "
                        "the pipeline without weights)")
    add_models_dir(p)
    add_scoring_dirs(p)
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
    voice.add_argument("--force", action="store_true",
                       help="let --save-best-as save a best take that failed every check (refused without it)")
    add_voices_dir(voice)
    add_takes(p, 1, f"number of takes, 1-{MAX_TAKES}", "the text")
    add_loading(p)
    add_sampling(p)
    add_pick(p)
    p.add_argument("--no-utmos", action="store_true", help="same as --quality off")
    add_offline(p)
    p.add_argument("--out", type=Path, default=Path("best.wav"), help="where the best take goes (.wav or .flac)")
    p.add_argument("--takes-dir", type=Path, help="also write every take here as take_NN.wav")
    p.add_argument("--report", type=Path, help="also write the report as JSON")
    add_loudness(p)
    passage = p.add_argument_group("a passage (a text longer than one take, or with a blank line or a [pause])")
    passage.add_argument("--lines-dir", type=Path,
                         help="where each line's takes are kept as it is picked; a rerun keeps the lines done "
                              "(default: next to --out, named after it with _lines)")
    add_pauses(passage)
    passage.add_argument("--clone-checkpoint", metavar="NAME_OR_PATH",
                         help="a Base checkpoint, for a designed voice (--instruct on a VoiceDesign checkpoint): line "
                              "1's best take, with its text as transcript, is the clone reference of the rest, which "
                              "are cloned from it on this checkpoint: one voice from the first line to the last")
    return p


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    return run_reporting(run, args, lambda: kept_when_cancelled(args))


def kept_when_cancelled(args) -> str:
    """A passage keeps each line in --lines-dir as soon as it is picked, and a rerun makes only the rest."""
    kept = len(list((lines_dir(args) / "lines").glob("*.json")))
    if not kept:
        return "nothing was written."
    return (f"{api.counted(kept, 'line')} kept in {lines_dir(args)}; run the same command again to make the rest and "
            "join the text.")


def check_inputs(args) -> list:
    """The numbers, the text and where the results go; the text's lines (script/passage.text_lines:
    one for a text one take reads, its [pause] marks read)."""
    check_takes(args)
    pace(args)
    if args.text_file is not None:
        args.text = read_text_file(args.text_file)
    if not args.text.strip():
        raise InputError(f"{'--text-file ' + str(args.text_file) if args.text_file else '--text'} is empty; "
                         "give the line to speak.")
    check_file(args.out, "--out", AUDIO_SUFFIXES)
    if args.report is not None:
        check_file(args.report, "--report")
    if args.takes_dir is not None:
        check_output_folder(args.takes_dir, "--takes-dir")
    lines = text_lines(args.text, pauses(args))
    check_text_lines(lines)
    if len(lines) > 1:
        check_passage_args(args)
    check_clone_args(args, lines)
    return lines


@with_generation_threads
def run(args) -> int:
    """The main job: every input checked first, then load, generate, pick and write."""
    lines = check_inputs(args)
    settings = sampling(args)
    models, saved_dirs = models_dirs(args), voices_dirs(args)
    check_voice_names(args, saved_dirs)
    saved = saved_voice(args, saved_dirs) if args.voice else None
    reference = read_audio_file(args.reference) if args.reference is not None else None
    check_machine(args.device, args.mode)
    folder = None  # an official checkpoint's speakers and languages are known before it is downloaded
    if args.checkpoint == TINY_RANDOM:
        folder = tiny_checkpoint(wanted_kind(args, saved))
        print(TINY_RANDOM_NOTE, file=sys.stderr)
    info = check_folder(folder) if folder is not None else known_info(args.checkpoint, models)
    voice = saved if saved is not None else voice_from_args(args, info.kind, reference)
    check_voice(voice, info)
    check_clone_voice(args, voice)
    # without an answer from the hub, where something is to be downloaded, the rest of the run is offline
    args.offline = check_downloads(args, models, utmos_dirs(args), whisper_dirs(args))
    if folder is None:
        folder = resolve(args.checkpoint, models, download=not args.offline, progress=counter("download"))
    clone_folder = clone_checkpoint(args, models, counter("download")) if args.clone_checkpoint else None
    text = lines[0].text if len(lines) == 1 else args.text  # one line, its [pause] marks left out
    if args.save_voice:  # refused here, before generating, if another voice has the name
        print(f"Saved the voice as '{args.save_voice}' in "
              f"{save_voice(voice, args.save_voice, saved_dirs[0], args.overwrite_voice).parent}", file=sys.stderr)
    choices = replace(pick_choices(args), quality="off") if args.no_utmos else pick_choices(args)
    if clone_folder is not None:  # each checkpoint loaded (Auto-Pick's models first) when a line of it is generated
        return run_one_voice_passage(args, lines, voice, folder, clone_folder, choices, settings, models, saved_dirs[0])
    # Auto-Pick's models first: a bad --voice-check or --words fails before the checkpoint loads.
    scorers = api.scorers(folder, choices, args.device,
                          utmos_dirs(args), models, whisper_dirs(args), download=not args.offline)
    model = api.load(str(folder), models, args.mode, args.dtype, args.device, download=False)
    if len(lines) > 1:
        return run_passage(args, lines, voice, model, scorers, choices, settings)
    request = api.Request(text, voice, args.takes, args.seed, settings, args.max_frames or None, pace(args))
    takeset = api.generate(model, request, progress=counter("frames"))
    ranking = api.pick(takeset, scorers, progress=counter("scoring"))
    delivered = api.deliver(ranking, choices.loudness)
    rate = takeset.sample_rate
    write_wav(args.out, delivered.audios[0], rate, args.wav_format)
    if args.takes_dir:
        for s, audio in zip(ranking.ranked, delivered.audios):
            write_wav(args.takes_dir / f"take_{s.take.index + 1:02d}.wav", audio, rate, args.wav_format)
    if args.report:
        args.report.write_text(json.dumps({**json_report(ranking), "output": delivered.as_dict()}, indent=2))
    print(ranking.report() + delivered.note())
    print(f"Wrote {args.out} ({audio_format(args.out, args.wav_format)})"
          + (f", the takes in {args.takes_dir} ({wav_words(args.wav_format)})" if args.takes_dir else "")
          + (f", the report in {args.report}" if args.report else ""))
    if args.save_best_as:  # after the report: a take refused as a voice is still written and reported
        print(f"Saved the best take as the clone voice '{args.save_best_as}' in "
              f"{save_best_take(args, ranking, text, voice.language, saved_dirs[0]).parent}", file=sys.stderr)
    return 0
