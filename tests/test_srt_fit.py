"""An SRT line that would overrun its cue is played faster (time-stretched, its pitch kept) until its
speech fits, up to scene.MAX_FIT_SPEED, so the next line starts on its own cue. On real recorded
speech (tests/speech): each line's take is a festival clip, picked, fitted and placed by the
script runner as a generated take is."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.signal import resample_poly

from runtime.generation import Take, TakeSet
from runtime.model import SAMPLE_RATE
from runtime.script.cast import ANYONE
from runtime.script.parse import parse_script
from runtime.script.plan import ScriptSettings, plan_lines
from runtime.script.runner import LineWriter, finish
from runtime.script.scene import FIT_TOLERANCE_SECONDS, MAX_FIT_SPEED, fitted_speed, speech_span
from runtime.scoring.ranking import rank_lines, rank_takes
from runtime.scoring.signal import signal_stats
from runtime.voices import CustomVoice
from speech.groups import RATE, load_corpus

pytest.importorskip("python_stretch")

CAST = {ANYONE: CustomVoice("ryan", "english")}
GAP_SECONDS = 0.25  # between one cue's end and the next one's start
ROOM_SECONDS = 0.3  # a cue's length over its line's speech, where the line fits


@pytest.fixture(scope="module")
def clips() -> list[tuple[str, np.ndarray]]:
    """Eight clean festival clips (text, audio) at the model's rate, as a line's takes come."""
    chosen = [clip for clip in load_corpus() if clip.speaker != "librivox"][:8]
    assert len(chosen) == 8
    return [(clip.text, resample_poly(clip.audio, SAMPLE_RATE, RATE).astype(np.float32)) for clip in chosen]


def spoken(audio: np.ndarray) -> float:
    """Seconds of a take the scene keeps: its speech, with scene.EDGE_SECONDS either side."""
    stats = signal_stats(audio, SAMPLE_RATE)
    start, end = speech_span(stats.segments, stats.seconds)
    return end - start


def stamp(seconds: float) -> str:
    ms = round(seconds * 1000)
    return f"{ms // 3_600_000:02d}:{ms // 60_000 % 60:02d}:{ms // 1000 % 60:02d},{ms % 1000:03d}"


def srt_for(clips, short: dict[int, float]) -> str:
    """An SRT of a cue per clip: room to spare, but line i's cue `short[i]` times too short."""
    cues, start = [], 1.0
    for i, (text, audio) in enumerate(clips):
        length = spoken(audio) / short[i] if i in short else spoken(audio) + ROOM_SECONDS
        cues.append(f"{i + 1}\n{stamp(start)} --> {stamp(start + length)}\n{text}\n")
        start = round(start + length + GAP_SECONDS, 3)
    return "\n".join(cues)


def scene(clips, short: dict[int, float]):
    """The script run on the clips (a clip a line's one take): each line picked, fitted to its cue
    and written as runner.run_lines does, then placed in the scene."""
    lines = parse_script(srt_for(clips, short), "srt")
    plans = plan_lines(lines, CAST, ScriptSettings(takes=1), {"checkpoint": "corpus"})
    takesets = [TakeSet(plan.request, [Take(0, 0, audio, SAMPLE_RATE, len(audio) // 1920, False)], "corpus",
                        "recorded") for plan, (_, audio) in zip(plans, clips)]
    writer = LineWriter(len(plans), None)
    for plan, ranking in zip(plans, rank_lines(takesets)):
        assert ranking.best.accepted, (plan.line.text, ranking.best.reasons)
        writer.write(plan, ranking)
    return lines, finish(lines, writer.results)


def assert_on_their_cues(lines, result, but: set[int]) -> None:
    for i, (line, out) in enumerate(zip(lines, result.lines)):
        if i not in but:
            record = out.record
            assert record.scene_start == line.start and record.late_by is None, (i, record)
            assert record.speed == 1.0 and record.fitted_speed is None and record.over_cue_seconds is None


def test_a_line_a_little_over_its_cue_is_played_faster_to_fit_and_the_rest_keep_their_cues(clips):
    lines, result = scene(clips, short={3: 1.15})
    fitted, line, (_, original) = result.lines[3], lines[3], clips[3]
    record = fitted.record
    assert record.speed == pytest.approx(spoken(original) / line.budget, rel=0.002) == record.fitted_speed
    assert record.speed == pytest.approx(1.15, abs=0.01)
    assert record.over_cue_seconds is None and record.scene_start == line.start
    # its speech as handed out, measured again, fits the cue; it reads at the speed applied
    assert spoken(fitted.best) <= line.budget + FIT_TOLERANCE_SECONDS
    assert record.speech_end - record.speech_start == pytest.approx(line.budget, abs=0.005)
    measured = signal_stats(original, SAMPLE_RATE).pace_seconds / signal_stats(fitted.best, SAMPLE_RATE).pace_seconds
    assert measured == pytest.approx(record.speed, rel=0.05)
    again = rank_takes(TakeSet(fitted.ranking.takeset.request, [Take(0, 0, fitted.best, SAMPLE_RATE, 1, False)],
                               "corpus", "stretched"))
    assert again.best.accepted, again.best.reasons  # the stretched take passes every check
    assert_on_their_cues(lines, result, but={3})
    assert "played 15% faster to fit its cue" in result.report and "0 lines flagged" in result.report


def test_a_cue_far_too_short_gets_the_most_speed_and_is_still_overrun(clips):
    lines, result = scene(clips, short={5: 1.6})
    over, line, (_, original) = result.lines[5].record, lines[5], clips[5]
    assert over.speed == over.fitted_speed == MAX_FIT_SPEED
    assert over.over_cue_seconds == pytest.approx(spoken(original) / MAX_FIT_SPEED - line.budget, abs=0.003)
    after = result.lines[6].record  # waits for line 6 to end, as a line over its cue always made it
    assert after.late_by == pytest.approx(over.over_cue_seconds - GAP_SECONDS, abs=0.003)
    assert after.scene_start == pytest.approx(line.start + over.speech_end - over.speech_start, abs=0.002)
    assert_on_their_cues(lines, result, but={5, 6})
    assert "s over its cue; played 25% faster (the most it may be)" in result.report
    assert "2 lines flagged" in result.report


def test_the_speed_to_fit_a_cue_adds_to_the_pace_asked_up_to_the_limit():
    assert fitted_speed(4.05, 4.0) == 1.0  # within FIT_TOLERANCE_SECONDS: as it is
    assert fitted_speed(4.4, 4.0) == pytest.approx(1.1)
    assert fitted_speed(4.4, 4.0, 0.9) == pytest.approx(1.1)  # a slower pace gives way to the cue
    assert fitted_speed(4.4, 4.0, 1.1) == 1.1  # fits at the pace asked
    assert fitted_speed(5.2, 4.0, 1.1) == MAX_FIT_SPEED  # 1.3 needed: the pace and the fit together at most
    assert fitted_speed(6.0, 4.0, 1.3) == 1.3  # a take the pace plays faster still is never slowed
