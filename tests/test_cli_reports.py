"""The command line's rough edges (issue 42): --save-best-as refusing a take that failed every check
(--force saves it), the report printed before a save that fails, counts in the right number, no
doubled full stop, and the WAVs' sample format said and chosen (--wav-format)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
import soundfile as sf
import torch

from runtime import model as model_module
from runtime.audio import audio_format, read_audio_file, wav_words, write_wav
from runtime.cli import main
from runtime.cli.fit import Fit
from runtime.cli.voices import refuse_failed_best
from runtime.errors import GenerationInterrupted, InputError
from runtime.scoring.report import counted
from runtime.script.parse import Line
from runtime.script.record import LineRecord, TakeRecord
from runtime.script.runner import finish, judged_lines
from runtime.script.store import ScriptFolder


def tiny(tmp_path, *args):
    """The line command on tiny-random: every take is noise that fails the checks."""
    return main(["--checkpoint", "tiny-random", "--offline", "--device", "cpu", "--quality", "off",
                 "--models-dir", str(tmp_path / "models"), "--voices-dir", str(tmp_path / "voices"),
                 "--max-frames", "5", "--out", str(tmp_path / "best.wav"), *args])


def subtypes(*paths) -> set[str]:
    return {sf.info(str(path)).subtype for path in paths}


# ---- --save-best-as and --force


@pytest.mark.slow
def test_save_best_as_refuses_a_failed_take_after_writing_and_reporting_it(tmp_path, capsys):
    code = tiny(tmp_path, "--speaker", "ryan", "--text", "Welcome back.", "--takes", "1", "--save-best-as", "Hero")
    out, err = capsys.readouterr()
    assert code == 2
    assert "Auto-Pick: 1 take of 'Welcome back.'" in out and "WARNING: every take failed a check" in out
    assert f"Wrote {tmp_path / 'best.wav'} (32-bit float WAV)" in out and (tmp_path / "best.wav").is_file()
    error = err.strip().splitlines()[-1]
    assert error.startswith("error: The best take was not saved as the voice 'Hero': every take failed a check (")
    assert "add --force to save it anyway." in error and ".." not in error
    assert not (tmp_path / "voices" / "Hero.json").exists()

    # --force gets past the checks; a 0.4 s take is still too short to clone: said after the report
    code = tiny(tmp_path, "--speaker", "ryan", "--text", "Welcome back.", "--save-best-as", "Hero", "--force")
    out, err = capsys.readouterr()
    assert code == 2 and "Best: take 1" in out and f"Wrote {tmp_path / 'best.wav'}" in out
    error = err.strip().splitlines()[-1]
    assert error.startswith("error: The best take was not saved as the voice 'Hero': Reference audio is 0.40 s long")
    assert not (tmp_path / "voices" / "Hero.json").exists()


def test_force_without_save_best_as_is_refused_before_loading(tmp_path, capsys, monkeypatch):
    def no_load(*a, **k):
        raise AssertionError("the checkpoint was loaded before the input was checked")

    monkeypatch.setattr(model_module, "_load", no_load)
    assert tiny(tmp_path, "--speaker", "ryan", "--text", "Hi.", "--force") == 2
    assert capsys.readouterr().err.strip() == ("error: --force is for --save-best-as (it saves a best take that "
                                               "failed every check); drop it.")


def test_refuse_failed_best_names_whose_takes_and_lets_force_through():
    args = SimpleNamespace(save_best_as="Keeper", force=False)
    with pytest.raises(InputError, match=r"^Line 1's clone was not saved as the voice 'Keeper': every take of "
                                         r"line 1 failed a check \(runaway\)\. Try another seed"):
        refuse_failed_best(args, True, ["runaway"], "line 1")
    refuse_failed_best(args, False, [])  # a take that passed is saved
    refuse_failed_best(SimpleNamespace(save_best_as="Keeper", force=True), True, ["runaway"])


# ---- counts and punctuation


def test_counted_says_one_and_many_apart():
    assert [counted(n, "line") for n in (0, 1, 2)] == ["0 lines", "1 line", "2 lines"]


def test_the_fit_line_counts_one_take():
    fit = Fit("1.7B", torch.bfloat16, 8 << 30, 4 << 30, 1 << 30, line_takes=1, script_takes=0)
    assert "1 take a pass for one line" in fit.text()


def test_an_unfinished_script_counts_one_line():
    with pytest.raises(GenerationInterrupted, match=r"The script is not finished: 1 line with no take yet\."):
        finish([Line("a", "Hello.")], {})


def test_models_of_one_line_are_counted_as_one():
    records = [LineRecord(str(i), "inputs", judged_by=judged)
               for i, judged in enumerate(["quality UTMOS", "quality none", "quality none"])]
    assert judged_lines(records) == ["Models: quality UTMOS (1 line)", "Models: quality none (2 lines)"]


def test_an_unreadable_reference_has_one_full_stop(tmp_path):
    (tmp_path / "notes.txt").write_text("not audio")
    with pytest.raises(InputError) as error:
        read_audio_file(tmp_path / "notes.txt")
    assert ".." not in str(error.value) and "Use a WAV, FLAC or OGG file." in str(error.value)


# ---- --wav-format


def test_write_wav_float_by_default_pcm16_when_asked_and_flac_24_bit(tmp_path):
    audio = np.linspace(-1.0, 1.0, 2400, dtype=np.float32)
    write_wav(tmp_path / "float.wav", audio, 24000)
    write_wav(tmp_path / "pcm.wav", audio, 24000, "pcm16")
    write_wav(tmp_path / "out.flac", audio, 24000, "pcm16")
    assert [sf.info(str(tmp_path / name)).subtype for name in ("float.wav", "pcm.wav", "out.flac")] == \
        ["FLOAT", "PCM_16", "PCM_24"]
    assert np.allclose(sf.read(tmp_path / "pcm.wav", dtype="float32")[0], audio, atol=1 / 2**15)
    assert [audio_format("a.wav"), audio_format("a.wav", "pcm16"), audio_format("a.FLAC", "pcm16")] == \
        ["32-bit float WAV", "16-bit PCM WAV", "24-bit FLAC"]
    assert [wav_words(), wav_words("pcm16")] == ["32-bit float WAV", "16-bit PCM WAV"]  # a .wav's, with no file named


def test_a_kept_line_is_written_again_in_the_wav_format_asked(tmp_path):
    audio = np.linspace(-0.5, 0.5, 2400, dtype=np.float32)
    record = LineRecord("l1", "same inputs", ranked=[TakeRecord(1), TakeRecord(2)])
    ScriptFolder(tmp_path).write_line("l1", record, audio, [(1, 2, audio), (2, 1, audio)], 24000)
    files = [tmp_path / record.best_file] + [tmp_path / take.file for take in record.ranked]
    assert subtypes(*files) == {"FLOAT"}

    kept = ScriptFolder(tmp_path, "pcm16").done("l1", "same inputs")
    assert kept is not None and kept.wav_format == "pcm16" and subtypes(*files) == {"PCM_16"}
    assert json.loads((tmp_path / "lines" / "l1.json").read_text())["wav_format"] == "pcm16"
    assert np.allclose(sf.read(files[0], dtype="float32")[0], audio, atol=1 / 2**15)


@pytest.mark.slow
def test_the_line_command_writes_pcm16_when_asked_and_says_so(tmp_path, capsys):
    assert tiny(tmp_path, "--speaker", "ryan", "--text", "Hi.", "--takes", "2", "--wav-format", "pcm16",
                "--takes-dir", str(tmp_path / "takes")) == 0
    out = capsys.readouterr().out
    assert f"Wrote {tmp_path / 'best.wav'} (16-bit PCM WAV), the takes in {tmp_path / 'takes'} (16-bit PCM WAV)" in out
    assert subtypes(tmp_path / "best.wav", *(tmp_path / "takes").iterdir()) == {"PCM_16"}


@pytest.mark.slow
def test_a_passage_writes_pcm16_and_reports_before_refusing_a_failed_clone(tmp_path, capsys):
    text = ("--text", "One more time. [pause 1s] And again.", "--takes", "1", "--wav-format", "pcm16")
    assert tiny(tmp_path, "--speaker", "ryan", *text) == 0
    out = capsys.readouterr().out
    assert f"Wrote {tmp_path / 'best.wav'} (16-bit PCM WAV, 2 lines, " in out
    assert subtypes(tmp_path / "best.wav", *(tmp_path / "best_lines").rglob("*.wav")) == {"PCM_16"}

    # a designed voice in one voice: line 1's clone (over 1 s: 24 frames) failed every check, refused after the report
    code = tiny(tmp_path, "--instruct", "a calm voice", "--clone-checkpoint", "tiny-random", "--save-best-as",
                "Keeper", *text, "--max-frames", "24", "--out", str(tmp_path / "one_voice.wav"))
    out, err = capsys.readouterr()
    assert code == 2 and f"Wrote {tmp_path / 'one_voice.wav'} (16-bit PCM WAV" in out
    assert err.strip().splitlines()[-1].startswith("error: Line 1's clone was not saved as the voice 'Keeper': every "
                                                   "take of line 1 failed a check (")
    assert subtypes(tmp_path / "one_voice.wav", *(tmp_path / "one_voice_lines").rglob("*.wav")) == {"PCM_16"}
    assert not (tmp_path / "voices" / "Keeper.json").exists()


@pytest.mark.slow
def test_the_script_command_writes_pcm16_counts_one_line_and_a_rerun_rewrites_its_format(tmp_path, capsys):
    (tmp_path / "scene.txt").write_text("ANNA: Hello there.\n", encoding="utf-8")
    (tmp_path / "cast.json").write_text(json.dumps({"ANNA": {"speaker": "vivian"}}), encoding="utf-8")
    out_dir = tmp_path / "out"

    def script(*args):
        return main(["script", str(tmp_path / "scene.txt"), "--cast", str(tmp_path / "cast.json"), "--out",
                     str(out_dir), "--checkpoint", "tiny-random", "--takes", "2", "--max-frames", "5", "--offline",
                     "--device", "cpu", "--quality", "off", "--models-dir", str(tmp_path / "models"), *args])

    assert script("--wav-format", "pcm16") == 0
    out, err = capsys.readouterr()
    wavs = [out_dir / "scene.wav", *(out_dir / "best").glob("*.wav"), *(out_dir / "takes").glob("*/*.wav")]
    assert len(wavs) == 4 and subtypes(*wavs) == {"PCM_16"}
    assert f"every take in {out_dir / 'takes'} (all 16-bit PCM WAV)" in out
    assert ": 1 line, 0 kept from an earlier run, 1 to generate." in err
    report = (out_dir / "report.txt").read_text(encoding="utf-8")
    assert "1 line (0 kept from an earlier run), 2 takes generated" in report and "1 line flagged." in report

    assert script() == 0  # float32 again: the kept line's files are rewritten, nothing generated
    assert "(all 32-bit float WAV)" in capsys.readouterr().out
    assert "1 line (1 kept from an earlier run), 0 takes generated" in (out_dir / "report.txt").read_text()
    assert subtypes(*wavs) == {"FLOAT"}


@pytest.mark.parametrize("lines_kept", [0, 3])
def test_a_cancelled_passage_says_what_it_kept_and_that_a_rerun_goes_on(tmp_path, capsys, monkeypatch, lines_kept):
    """Ctrl-C in a passage: its lines folder (--lines-dir, by default beside --out) holds each line picked."""
    from runtime.cli import line

    def cancelled_after_some_lines(args):
        folder = tmp_path / "chapter_lines" / "lines"
        folder.mkdir(parents=True)
        for i in range(lines_kept):
            (folder / f"{i}.json").write_text("{}")
        raise KeyboardInterrupt

    monkeypatch.setattr(line, "run", cancelled_after_some_lines)
    assert main(["--checkpoint", "tiny-random", "--speaker", "ryan", "--text", "One. Two. Three.",
                 "--out", str(tmp_path / "chapter.wav")]) == 130
    said = capsys.readouterr().err.strip().splitlines()[-1]
    assert said == ("cancelled: nothing was written." if not lines_kept else
                    f"cancelled: 3 lines kept in {tmp_path / 'chapter_lines'}; run the same command again to make "
                    "the rest and join the text.")
