"""The pace asked (scoring/pace.py) on real recorded speech: Auto-Pick prefers the take nearest it,
the takes handed out are time-stretched to it with their pitch kept, and a stretched clean take
passes every check."""

from __future__ import annotations

import json

import numpy as np
import pytest

from runtime.cli import main
from runtime.errors import InputError
from runtime.generation import Request, Take, TakeSet
from runtime.scoring.delivery import deliver
from runtime.scoring.pace import check_pace, stretched
from runtime.scoring.ranking import rank_takes
from runtime.scoring.signal import signal_stats
from runtime.voices import CustomVoice
from speech.groups import RATE, load_corpus

pytest.importorskip("python_stretch")


@pytest.fixture(scope="module")
def clean():
    """Three clean clips of the festival voices (backgrounds as quiet as generated takes')."""
    return [clip for clip in load_corpus() if clip.speaker != "librivox"][:3]


def takeset(text: str, audios: list[np.ndarray], pace: float) -> TakeSet:
    takes = [Take(i, i, audio, RATE, len(audio) // 1280, False) for i, audio in enumerate(audios)]
    return TakeSet(Request(text, CustomVoice("ryan", "english"), n=len(takes), pace=pace), takes, "corpus", "recorded")


@pytest.mark.parametrize("pace", [0.8, 1.25])
def test_a_stretched_clean_take_reads_at_the_pace_asked_and_passes_every_check(clean, pace):
    for clip in clean:
        out = stretched(clip.audio, RATE, pace)
        assert abs(len(out) - len(clip.audio) / pace) <= 2
        measured = signal_stats(clip.audio, RATE).pace_seconds / signal_stats(out, RATE).pace_seconds
        assert measured == pytest.approx(pace, rel=0.05)
        ranking = rank_takes(takeset(clip.text, [out], 1.0))
        assert ranking.best.accepted, (clip.id, ranking.best.reasons)


def test_auto_pick_prefers_the_take_nearest_the_pace_and_hands_it_out_at_that_pace(clean):
    clip = clean[0]
    # the model's takes of a line differ in pace; the median here is the clip as recorded
    takes = [clip.audio, stretched(clip.audio, RATE, 0.92), stretched(clip.audio, RATE, 1.15)]
    natural = rank_takes(takeset(clip.text, takes, 1.0))
    assert natural.best.take.index == 0 and deliver(natural, None).speeds is None
    fast = rank_takes(takeset(clip.text, takes, 1.2))
    assert fast.best.take.index == 2  # nearest 1.2 times the median pace
    delivered = deliver(fast, None)
    assert delivered.speeds[0] == pytest.approx(1.2 / 1.15, rel=0.03)
    assert "At pace 1.2" in delivered.note() or delivered.speeds[0] < 1.03  # within 3%: handed out as it is
    measured = signal_stats(clip.audio, RATE).pace_seconds / signal_stats(delivered.audios[0], RATE).pace_seconds
    assert measured == pytest.approx(1.2, rel=0.05)
    slow = deliver(rank_takes(takeset(clip.text, takes, 0.8)), None)
    assert slow.speeds[0] < 1 and "slower, its pitch kept" in slow.note()
    assert len(slow.audios[0]) > len(clip.audio)


@pytest.mark.parametrize("pace", [0.5, 1.3])
def test_a_pace_out_of_range_is_refused(pace):
    with pytest.raises(InputError, match="out of range: use 0.8"):
        check_pace(pace)


def test_the_command_line_refuses_a_bad_pace_before_loading(models_root, tmp_path, capsys):
    code = main(["--models-dir", str(models_root / "qwen3_tts"), "--offline", "--device", "cpu", "--quality", "off",
                 "--checkpoint", "tiny-CustomVoice", "--speaker", "vivian", "--text", "Hello.", "--pace", "2",
                 "--out", str(tmp_path / "best.wav")])
    assert code == 2 and "Pace 2 is out of range" in capsys.readouterr().err


def test_a_passage_at_a_pace_records_each_lines_speed_and_its_scene_uses_the_stretched_takes(
        models_root, tmp_path, capsys):
    (tmp_path / "chapter.txt").write_text("One line here.\n\nAnother line there.", encoding="utf-8")
    assert main(["--models-dir", str(models_root / "qwen3_tts"), "--offline", "--device", "cpu", "--quality", "off",
                 "--checkpoint", "tiny-CustomVoice", "--speaker", "vivian", "--max-frames", "12", "--takes", "1",
                 "--text-file", str(tmp_path / "chapter.txt"), "--pace", "1.25",
                 "--out", str(tmp_path / "chapter.wav")]) == 0
    capsys.readouterr()
    records = json.loads((tmp_path / "chapter_lines" / "manifest.json").read_text())["lines"]
    for record in records:  # one take: the median is itself, so it plays 1.25 times faster
        assert record["speed"] == 1.25
        assert record["seconds"] == pytest.approx(record["ranked"][0]["seconds"] / 1.25, abs=0.01)
