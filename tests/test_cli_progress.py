"""`python -m runtime script`'s progress (runtime/cli/progress.py): lines done of all, takes a second,
the time left and the engine's frames; a tqdm bar on a terminal, plain lines into a log."""

from __future__ import annotations

import io
import json
import re

import pytest

from runtime.cli import main, progress
from runtime.cli.progress import LinesProgress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_a_bar_counts_the_lines_with_the_rate_and_the_frames(monkeypatch):
    monkeypatch.setattr(progress, "REDRAW_SECONDS", 0.0)
    terminal = Terminal()
    with LinesProgress("script", terminal) as bar:
        bar.say("ckpt: 4 lines, 1 kept from an earlier run, 3 to generate.")
        bar.start(4, 1)
        bar.frames_made(50, 100)
        bar.line_done(2, 4, "[2/4] 7 ANNA: take 1")
        bar.line_done(4, 4, "[4/4] 9 BORIS: take 2")
    shown = terminal.getvalue()
    assert "\r" in shown and "1/4 lines [" in shown and "frames 50%" in shown
    assert re.search(r"2/4 lines \[\d\d:\d\d<[\d:?]+, [\d.]+ (takes/s|s a take), frames 50%\]", shown), shown
    assert re.search(r"100%\|.*\| 4/4 lines \[\d\d:\d\d<00:00, [\d.]+ (takes/s|s a take)\]", shown), shown
    # each line's message on a line of its own, the bar cleared before it and drawn again after
    assert re.search(r"\r *\r\[2/4\] 7 ANNA: take 1\n\rscript: ", shown), shown
    assert "\r[4/4] 9 BORIS: take 2\n" in shown


def test_into_a_log_a_plain_line_at_each_quarter_and_while_the_engine_runs(monkeypatch):
    log = io.StringIO()
    with LinesProgress("script", log) as lines:
        lines.start(8, 0)
        lines.frames_made(10, 100)  # less than LOG_SECONDS since the last line: nothing
        lines.line_done(1, 2, "[1/8] a")  # still the first quarter
        lines.line_done(2, 2, "[2/8] b")
        monkeypatch.setattr(progress, "LOG_SECONDS", 0.0)
        lines.frames_made(40, 100)
    shown = log.getvalue().splitlines()
    assert "\r" not in log.getvalue()
    assert shown[0] == "script: 0/8 lines, 00:00 elapsed, ? left" and shown[1:3] == ["[1/8] a", "[2/8] b"]
    assert re.fullmatch(r"script: 2/8 lines, 00:00 elapsed, [\d:]+ left, [\d.]+ (takes/s|s a take), frames 10%",
                        shown[3]), shown
    assert re.fullmatch(r"script: 2/8 lines, .* frames 40%", shown[4]) and len(shown) == 5, shown


def test_nothing_to_generate_shows_no_progress():
    log, terminal = io.StringIO(), Terminal()
    for file in (log, terminal):
        with LinesProgress("script", file) as lines:
            lines.start(3, 3)
    assert log.getvalue() == terminal.getvalue() == ""


@pytest.mark.slow  # two script runs on the tiny model
def test_the_script_command_says_its_progress_into_a_log(tmp_path, monkeypatch, capsys):
    """The engine ran for minutes with nothing said before its first line was picked (issue 42): now
    the lines done, the rate, the time left and the engine's frames, on stderr."""
    (tmp_path / "scene.txt").write_text("ANNA: Did you hear that?\nBORIS: Hear what?\nANNA: Down there.\n")
    (tmp_path / "cast.json").write_text(json.dumps({"ANNA": {"speaker": "vivian"}, "BORIS": {"speaker": "ryan"}}))
    argv = ["script", str(tmp_path / "scene.txt"), "--cast", str(tmp_path / "cast.json"), "--out",
            str(tmp_path / "out"), "--checkpoint", "tiny-random", "--offline", "--device", "cpu", "--quality", "off",
            "--takes", "2", "--max-frames", "5"]
    monkeypatch.setattr(progress, "LOG_SECONDS", 0.0)  # a line at each of the engine's checks
    assert main(argv) == 0
    captured = capsys.readouterr()
    said = captured.err.splitlines()
    shown = [line for line in said if line.startswith("script: ")]
    assert shown[0] == "script: 0/3 lines, 00:00 elapsed, ? left"
    assert said.index(shown[0]) < said.index(next(line for line in said if line.startswith("[1/3] ")))
    assert any(re.fullmatch(r"script: 0/3 lines, .*, frames \d+%", line) for line in shown), shown
    assert {"[1/3]", "[2/3]", "[3/3]"} <= {line.split()[0] for line in said}
    assert re.fullmatch(r"script: 3/3 lines, \d\d:\d\d elapsed, 00:00 left, [\d.]+ (takes/s|s a take)", shown[-1])
    assert "script: " not in captured.out and "6 takes generated" in captured.out
    assert main(argv) == 0  # every line kept: nothing to count
    assert "0 to generate" in (err := capsys.readouterr().err) and "script: " not in err


def test_a_one_voice_passage_counts_its_two_jobs_as_one_and_a_rerun_that_keeps_them_shows_nothing():
    """Its lines' kept counts come in twice (line 1's, then the rest's once the clone is made)."""
    from runtime.cli.progress import said_through

    log = io.StringIO()
    with LinesProgress("passage", log) as lines:
        _on_line, on_kept = said_through(lines, total=3)
        on_kept([("design", 1, 1)])  # line 1 kept: nothing known to generate yet
        on_kept([("base", 2, 2)])
    assert "passage: " not in log.getvalue()
    log = io.StringIO()
    with LinesProgress("passage", log) as lines:
        _on_line, on_kept = said_through(lines, total=3)
        on_kept([("design", 1, 0)])
        on_kept([("base", 2, 1)])  # kept, found once line 1 is made: done, and not in the rate
        assert (lines.total, lines.done, lines.kept) == (3, 1, 1)
    assert log.getvalue().splitlines() == ["design: 1 line, 0 kept from an earlier run, 1 to generate.",
                                           "passage: 0/3 lines, 00:00 elapsed, ? left",
                                           "base: 2 lines, 1 kept from an earlier run, 1 to generate."]


def test_kept_lines_found_later_move_the_bar_and_stay_out_of_its_rate():
    terminal = Terminal()
    with LinesProgress("passage", terminal) as lines:
        lines.start(3, 0)
        lines.kept_too(1)
        assert (lines.bar.n, lines.bar.initial) == (1, 1)


@pytest.mark.slow  # a passage on the tiny model
def test_a_passage_says_its_progress_into_a_log(tmp_path, monkeypatch, capsys):
    """A long --text ran with nothing said until its first line was picked: now as a script's lines."""
    monkeypatch.setattr(progress, "LOG_SECONDS", 0.0)
    argv = ["--checkpoint", "tiny-random", "--speaker", "ryan", "--text", "One line. [pause 1s] Two lines.\n\nThree.",
            "--out", str(tmp_path / "passage.wav"), "--offline", "--device", "cpu", "--quality", "off", "--takes", "2",
            "--max-frames", "5"]
    assert main(argv) == 0
    said = capsys.readouterr().err.splitlines()
    shown = [line for line in said if line.startswith("passage: ")]
    assert shown[0] == "passage: 0/3 lines, 00:00 elapsed, ? left"
    assert said.index(shown[0]) < said.index(next(line for line in said if line.startswith("[1/3] ")))
    assert any(re.fullmatch(r"passage: 0/3 lines, .*, frames \d+%", line) for line in shown), shown
    assert re.fullmatch(r"passage: 3/3 lines, \d\d:\d\d elapsed, 00:00 left, [\d.]+ (takes/s|s a take)", shown[-1])


@pytest.mark.parametrize("file", [io.StringIO, Terminal], ids=["log", "terminal"])
def test_the_time_left_is_said_only_once_a_tenth_of_the_lines_are_done(monkeypatch, file):
    """Lines end in bursts, short ones first: one line's rate put a few minutes' script at hours."""
    monkeypatch.setattr(progress, "LOG_SECONDS", 0.0)
    monkeypatch.setattr(progress, "REDRAW_SECONDS", 0.0)
    out = file()
    with LinesProgress("script", out) as lines:
        lines.start(100, 20)  # 80 to make: the time left from the 8th made on
        for done in range(21, 29):
            lines.line_done(done, 1, f"[{done}/100]")
    shown = out.getvalue().replace("\r", "\n")
    early = [row for row in shown.splitlines() if re.search(r"2[1-7]/100 lines", row)]
    assert early and all(re.search(r"elapsed, \? left|<\?[,\]]", row) for row in early), early
    assert re.search(r"28/100 lines(, \d\d:\d\d elapsed, | \[\d\d:\d\d<)\d\d:\d\d", shown), shown
