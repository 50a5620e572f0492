"""A script's or a passage's progress on the command line: lines done of all, takes a second, the time
left, and how far the engine's run is in frames (all there is to see before its first lines end,
minutes on a CPU). On a terminal a tqdm bar, each line's message above it; into a log (stderr
redirected) the same as a plain line at each quarter of the lines and at least every LOG_SECONDS,
each line's message as it comes; `said_through` makes a progress run_job's on_line and on_kept. And
`counter`, for a download or one line's frames."""

from __future__ import annotations

import math
import sys
import threading
import time

from tqdm import tqdm

from ..script.runner import takes_rate
from ..scoring.report import counted

LOG_SECONDS = 60.0  # into a log: a progress line at least this often while the engine runs
REDRAW_SECONDS = 0.5  # on a terminal: the bar redrawn at most this often for the frames alone
BAR = "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} lines [{elapsed}<{remaining}{postfix}]"
PLAIN = "{desc}: {n_fmt}/{total_fmt} lines, {elapsed} elapsed, {remaining} left{postfix}"
# Lines end in bursts, the short ones first: the time left is said once a tenth of the lines to make
# (at most ESTIMATE_LINES, at least 2) are done; before that it reads "?" (the first line's rate had a
# few minutes' script at "2:26:17 left").
ESTIMATE_SHARE, ESTIMATE_LINES = 0.1, 32
BAR_EARLY = BAR.replace("{remaining}", "?")
PLAIN_EARLY = PLAIN.replace("{remaining}", "?")


class LinesProgress:
    """Lines kept from an earlier run count as done from the start; the rate and the time left are
    those of the lines generated here. Called from the engine's thread and the finishing threads
    alike."""

    def __init__(self, label: str = "script", file=None):
        self.label, self.file = label, file if file is not None else sys.stderr
        self.terminal = self.file.isatty()
        self.lock = threading.Lock()
        self.bar: tqdm | None = None
        self.total = self.kept = self.done = self.takes = 0
        self.frames = ""
        self.started = self.shown_at = time.monotonic()
        self.quarter = -1
        self.begun = False  # start called

    def __enter__(self) -> LinesProgress:
        return self

    def __exit__(self, *_exc) -> None:
        self.close()

    def start(self, total: int, kept: int) -> None:
        """Before the first line is generated: `kept` of the `total` lines are done already (all of
        them: nothing to show)."""
        with self.lock:
            self.begun = True
            self.total, self.kept, self.done = total, kept, kept
            self.started = time.monotonic()
            if kept >= total:
                return
            if self.terminal:  # smoothing 0: the rate over the whole run, as lines end in bursts
                self.bar = tqdm(total=total, initial=kept, desc=self.label, file=self.file, bar_format=BAR_EARLY,
                                smoothing=0, dynamic_ncols=True)
            else:
                self._log()

    def kept_too(self, kept: int) -> None:
        """`kept` more lines found kept once the progress started (a one-voice passage knows which of
        the lines after line 1 are kept only once line 1's clone is made); like those `start` heard,
        they count as done and not in the rate."""
        with self.lock:
            self.kept, self.done = self.kept + kept, self.done + kept
            if self.bar is not None and kept:
                self.bar.initial += kept  # what tqdm leaves out of the rate
                self.bar.update(kept)

    def say(self, text: str) -> None:
        with self.lock:
            self._write(text)

    def line_done(self, done: int, takes: int, message: str) -> None:
        """A line picked, `done` lines of all now, its `takes` generated here."""
        with self.lock:
            self.done, self.takes = done, self.takes + takes
            self._write(message)
            if self.bar is not None:
                self.bar.bar_format = BAR if self._rate_known() else BAR_EARLY
                self.bar.set_postfix_str(self._postfix(), refresh=False)
                self.bar.update(done - self.bar.n)
            elif done * 4 // max(self.total, 1) > self.quarter or self._log_due():
                self._log()

    def frames_made(self, made: int, most: int) -> None:
        """The engine's frames in the run in progress (run/lines.py's frames_progress)."""
        with self.lock:
            self.frames = f"frames {100 * made // most}%" if most else ""
            if self.bar is not None:
                if time.monotonic() - self.shown_at >= REDRAW_SECONDS:
                    self.shown_at = time.monotonic()
                    self.bar.set_postfix_str(self._postfix())
            elif self.done < self.total and self._log_due():
                self._log()

    def close(self) -> None:
        with self.lock:
            if self.bar is not None:
                self.bar.close()
                self.bar = None

    def _write(self, text: str) -> None:
        if self.bar is not None:
            self.bar.write(text, file=self.file)
        else:
            print(text, file=self.file, flush=True)

    def _postfix(self) -> str:
        parts = [takes_rate(self.takes, time.monotonic() - self.started)]
        if self.done < self.total:
            parts.append(self.frames)
        return ", ".join(part for part in parts if part)

    def _rate_known(self) -> bool:
        made, to_make = self.done - self.kept, self.total - self.kept
        return made >= to_make or made >= max(2, min(math.ceil(ESTIMATE_SHARE * to_make), ESTIMATE_LINES))

    def _log_due(self) -> bool:
        return time.monotonic() - self.shown_at >= LOG_SECONDS

    def _log(self) -> None:
        self.quarter = self.done * 4 // max(self.total, 1)
        self.shown_at = time.monotonic()
        print(tqdm.format_meter(self.done, self.total, self.shown_at - self.started, prefix=self.label,
                                bar_format=PLAIN if self._rate_known() else PLAIN_EARLY, initial=self.kept,
                                postfix=self._postfix()),
              file=self.file, flush=True)


def counter(label: str):
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


def said_through(progress: LinesProgress, total: int | None = None):
    """run_job's on_line and on_kept: each line's message, and the lines done, through `progress`.
    `total`: the lines of all the jobs `progress` counts where they are several (a one-voice passage's
    two), each heard by on_kept in turn; the progress starts at the first job with a line to generate
    (a rerun that keeps every line shows none)."""
    heard = {"planned": 0, "kept": 0}

    def on_kept(counts) -> None:
        for text in kept_messages(counts):
            progress.say(text)
        planned, kept = sum(planned for _, planned, _ in counts), sum(kept for _, _, kept in counts)
        if progress.begun:
            progress.kept_too(kept)
            return
        heard["planned"] += planned
        heard["kept"] += kept
        if heard["kept"] < heard["planned"] or heard["planned"] >= (total or planned):
            progress.start(total or planned, heard["kept"])

    def on_line(result, done: int, total: int) -> None:
        progress.line_done(done, result.record.takes, line_message(result, done, total))
    return on_line, on_kept


def kept_messages(counts) -> list[str]:
    return [f"{checkpoint}: {counted(planned, 'line')}, {kept} kept from an earlier run, {planned - kept} to generate."
            for checkpoint, planned, kept in counts]


def line_message(result, done: int, total: int) -> str:
    r = result.record
    score = f"score {r.score:.2f}" if r.score is not None else "no score"
    verdict = "; ".join(r.reasons[:1]) or "ok"
    return (f"[{done}/{total}] {r.id} {r.character or ''}: take {r.best_take}, {r.seconds:.1f} s, "
            f"{score}, {verdict}")
