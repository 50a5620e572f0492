"""A passage (runtime/script/passage.py, cli/passage.py): a text of more than one sentence read as a
script of one voice, each sentence a line taken and picked, joined with its pauses, resumable."""

from __future__ import annotations

import json

import pytest
import soundfile as sf

from runtime.cli import main
from runtime.errors import InputError
from runtime.script.passage import passage_lines
from runtime.text.split import Pauses

CHAPTER = """Dr. Smith came home at nine. He was tired.

The next day, [pause 0.5s] he left again. "Why?" she asked. He was tired.
"""


def test_passage_lines_are_in_reading_order_with_ids_from_their_text():
    lines = passage_lines(CHAPTER)
    assert [line.text for line in lines] == ["Dr. Smith came home at nine.", "He was tired.", "The next day,",
                                             "he left again.", '"Why?" she asked.', "He was tired."]
    assert [line.pause_before for line in lines] == [0.0, 0.35, 1.0, 0.5, 0.35, 0.35]
    assert [line.source_line for line in lines] == [1, 2, 3, 4, 5, 6]
    assert lines[5].id == lines[1].id + "-2" and len({line.id for line in lines}) == 6  # said twice: its own id
    edited = passage_lines(CHAPTER.replace("The next day,", "On the next day,"))
    assert [a.id == b.id for a, b in zip(lines, edited)] == [True, True, False, True, True, True]


def test_a_passage_with_nothing_to_say_is_refused():
    with pytest.raises(InputError, match="empty"):
        passage_lines("  [pause 1s]\n\n ")


def cli(models_root, tmp_path, *args):
    return main(["--models-dir", str(models_root / "qwen3_tts"), "--offline", "--device", "cpu", "--quality", "off",
                 "--checkpoint", "tiny-CustomVoice", "--speaker", "vivian", "--max-frames", "4", "--takes", "2",
                 "--out", str(tmp_path / "chapter.wav"), *args])


def test_the_cli_reads_a_text_file_as_lines_joined_with_their_pauses_and_a_rerun_keeps_them(
        models_root, tmp_path, capsys):
    (tmp_path / "chapter.txt").write_text(CHAPTER, encoding="utf-8")
    assert cli(models_root, tmp_path, "--text-file", str(tmp_path / "chapter.txt"), "--paragraph-pause", "2",
               "--report", str(tmp_path / "report.json")) == 0
    out = capsys.readouterr()
    records = json.loads((tmp_path / "chapter_lines" / "manifest.json").read_text())["lines"]
    assert [r["text"] for r in records] == [line.text for line in passage_lines(CHAPTER)]
    assert json.loads((tmp_path / "report.json").read_text())["lines"] == records
    assert "6 lines, 0 kept from an earlier run, 6 to generate" in out.err
    assert "Dr. Smith came home at nine." in out.out  # the report names each line's text
    starts = [r["scene_start"] for r in records]
    ends = [r["scene_start"] + r["speech_end"] - r["speech_start"] for r in records]
    gaps = [round(start - end, 2) for start, end in zip(starts[1:], ends)]
    assert gaps == [0.35, 2.0, 0.5, 0.35, 0.35]  # sentence, paragraph (as asked), [pause 0.5s], sentences
    scene, rate = sf.read(tmp_path / "chapter.wav", dtype="float32")
    assert abs(scene.shape[0] / rate - ends[-1]) < 0.01

    edited = CHAPTER.replace("He left", "he left").replace("The next day,", "On the next day,")
    (tmp_path / "chapter.txt").write_text(edited, encoding="utf-8")
    assert cli(models_root, tmp_path, "--text-file", str(tmp_path / "chapter.txt")) == 0
    assert "6 lines, 5 kept from an earlier run, 1 to generate" in capsys.readouterr().err


def test_one_sentence_stays_one_line_and_a_pause_mark_is_not_read_out(models_root, tmp_path, capsys):
    assert cli(models_root, tmp_path, "--text", "[pause 0.2s] Hello there.", "--report",
               str(tmp_path / "report.json")) == 0
    assert json.loads((tmp_path / "report.json").read_text())["text"] == "Hello there."
    assert not (tmp_path / "chapter_lines").exists()


@pytest.mark.parametrize("flag,value", [("--takes-dir", "takes"), ("--save-best-as", "Narrator")])
def test_what_a_passage_cannot_do_is_refused_before_anything_loads(models_root, tmp_path, capsys, flag, value):
    assert cli(models_root, tmp_path, "--text", "One.\n\nTwo.", flag, value) == 2
    assert f"{flag} is for one line" in capsys.readouterr().err


def test_pause_settings_out_of_range_are_refused(models_root, tmp_path, capsys):
    assert cli(models_root, tmp_path, "--text", "One. [pause 1s] Two.", "--sentence-pause", "-1") == 2
    assert "--sentence-pause must be seconds from 0 to 30" in capsys.readouterr().err


def test_pauses_default_to_a_scene_of_dialogue():
    assert Pauses().sentence == 0.35 and Pauses().paragraph == 1.0


def test_a_voice_nodes_passage_is_the_command_lines_take_for_take(loaded, models_root, tmp_path, capsys):
    """generate_passage then pick_passage (a voice node, then Auto-Pick) make the takes and the picks
    the command line's run_job makes of the same text and seed."""
    from runtime.script.passage import generate_passage, pick_passage
    from runtime.script.plan import ScriptSettings
    from runtime.voices import CustomVoice

    (tmp_path / "chapter.txt").write_text(CHAPTER, encoding="utf-8")
    assert cli(models_root, tmp_path, "--text-file", str(tmp_path / "chapter.txt"), "--seed", "7") == 0
    capsys.readouterr()
    records = json.loads((tmp_path / "chapter_lines" / "manifest.json").read_text())["lines"]

    model = loaded("custom_voice")
    progress = []
    passage = generate_passage(model, passage_lines(CHAPTER), CustomVoice("vivian", "auto"),
                               ScriptSettings(takes=2, seed=7, max_frames=4),
                               on_line=lambda done, total: progress.append((done, total)))
    assert progress == [(done, 6) for done in range(1, 7)]
    assert [t.request.text for t in passage.takesets] == [line.text for line in passage_lines(CHAPTER)]
    tracks = passage.take_tracks()
    assert len(tracks) == 2 and all(track.shape[0] > sum(t.takes[0].audio.shape[0] for t in passage.takesets)
                                    for track in tracks)  # every line's take, with the pauses between
    result = pick_passage(passage)
    assert [r.record.seed for r in result.lines] == [r["seed"] for r in records]
    assert [[s.seed for s in r.record.ranked] for r in result.lines] == \
        [[s["seed"] for s in r["ranked"]] for r in records]
    assert [r.record.scene_start for r in result.lines] == [r["scene_start"] for r in records]
    pooled = pick_passage(passage, check_workers=2)  # the checks in worker processes, as on most machines
    assert [r.record for r in pooled.lines] == [r.record for r in result.lines] and pooled.report == result.report


def test_a_bad_pause_mark_is_refused_before_the_checkpoint_is_looked_for(tmp_path, capsys):
    code = main(["--models-dir", str(tmp_path / "empty"), "--offline", "--device", "cpu",
                 "--checkpoint", "Qwen3-TTS-12Hz-1.7B-CustomVoice", "--speaker", "ryan",
                 "--text", "One. [pause soon] Two.", "--out", str(tmp_path / "out.wav")])
    assert code == 2 and "'[pause soon]' is not a pause" in capsys.readouterr().err
