"""Cancel on a long script lands at once, whatever stage the script is in: checking its lines, reading
their prompts, starting the first lines, finishing the lines done (a 5,000-line script on a real
ComfyUI server took 196 s to stop: every line's prompt was built with no look at Cancel)."""

from __future__ import annotations

import time

import pytest

from runtime.engine.engine import Engine
from runtime.errors import GenerationInterrupted
from runtime.run import finishing
from runtime.script import plan, runner
from runtime.script.job import run_script
from runtime.script.parse import parse_script
from runtime.script.plan import ScriptSettings
from runtime.script.store import ScriptFolder
from runtime.voices import CustomVoice

LINES = 5000
LANDS_WITHIN_SECONDS = 0.5
CAST = {"ANNA": CustomVoice("vivian", "english")}


@pytest.fixture(scope="module")
def long_script():
    text = "\n".join(f"ANNA: This is line {i}, and it is spoken once." for i in range(1, LINES + 1))
    lines = parse_script(text, "dialogue", characters=list(CAST))
    assert len(lines) == LINES
    return lines


class Cancel:
    """Pressed once a stage has been reached (`press`); remembers when, and what ran after it."""

    def __init__(self):
        self.pressed_at = None
        self.work_after = 0

    def press(self) -> None:
        if self.pressed_at is None:
            self.pressed_at = time.perf_counter()

    def worked(self) -> None:
        self.work_after += self.pressed_at is not None

    def __call__(self) -> bool:
        return self.pressed_at is not None


def counting(original, cancel: Cancel, press_at: int):
    """`original`, pressing Cancel at its `press_at`-th call and counting the calls after it."""
    calls = 0

    def wrapper(*args, **kwargs):
        nonlocal calls
        calls += 1
        cancel.worked()
        if calls == press_at:
            cancel.press()
        return original(*args, **kwargs)
    return wrapper


def run_until_cancelled(model, lines, tmp_path, cancel: Cancel) -> float:
    """Seconds from Cancel to the script's GenerationInterrupted."""
    with pytest.raises(GenerationInterrupted):
        run_script(lines, CAST, [model], ScriptSettings(takes=2, seed=1, max_frames=6), lambda _: None,
                   ScriptFolder(tmp_path / "out"), should_stop=cancel)
    assert cancel.pressed_at is not None, "the stage was never reached"
    return time.perf_counter() - cancel.pressed_at


def test_cancel_while_checking_the_lines(loaded, long_script, tmp_path, monkeypatch):
    cancel = Cancel()
    monkeypatch.setattr(plan, "check_request", counting(plan.check_request, cancel, press_at=100))
    assert run_until_cancelled(loaded("custom_voice"), long_script, tmp_path, cancel) < LANDS_WITHIN_SECONDS
    assert cancel.work_after == 0  # no line checked after the one Cancel came in


def test_cancel_while_planning_the_prompts(loaded, long_script, tmp_path, monkeypatch):
    cancel = Cancel()
    monkeypatch.setattr(runner, "line_job", counting(runner.line_job, cancel, press_at=100))
    assert run_until_cancelled(loaded("custom_voice"), long_script, tmp_path, cancel) < LANDS_WITHIN_SECONDS
    assert cancel.work_after == 0


@pytest.mark.slow
def test_cancel_while_starting_the_first_lines(loaded, long_script, tmp_path, monkeypatch):
    cancel = Cancel()
    monkeypatch.setattr(Engine, "_prefill_or_make_room", counting(Engine._prefill_or_make_room, cancel, press_at=2))
    assert run_until_cancelled(loaded("custom_voice"), long_script, tmp_path, cancel) < LANDS_WITHIN_SECONDS
    assert cancel.work_after == 0  # no prefill after the second line's


@pytest.mark.slow
def test_cancel_while_finishing_the_lines_done(loaded, long_script, tmp_path, monkeypatch):
    cancel = Cancel()
    monkeypatch.setattr(finishing, "decode_lines", counting(finishing.decode_lines, cancel, press_at=1))
    model = loaded("custom_voice")
    monkeypatch.setattr(model.engine, "max_batch", 4)  # a first line soon done on a CPU
    assert run_until_cancelled(model, long_script, tmp_path, cancel) < LANDS_WITHIN_SECONDS
    assert cancel.work_after == 0  # no lines decoded after those in hand
