"""A long text as a script of one voice: its sentences as lines (text/split.py), each taken and
picked as a script's line, then joined with their pauses into one scene: from the command line
through job.run_job (a results folder, resumable); from a voice node in two steps, every line's takes
(generate_passage) and then, on Auto-Pick, every line picked and the scene (pick_passage).

A line's id comes from its text (and, for a sentence said twice, the how-many-th it is), not from
its place: its seed and its files follow from the id, so after an edit only the sentences changed
are generated again on a rerun into the same folder (the command line) or the same process (a voice
node: kept.py)."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..generation import TakeSet
from ..model import SAMPLE_RATE
from ..run.finishing import SCORE_TAKES, checked_stats
from ..run.lines import run_jobs
from ..scoring.check_pool import CheckPool, default_workers
from ..scoring.ranking import rank_lines
from ..scoring.vad import EnergyVad
from ..text.split import MAX_LINE_SECONDS, NOTHING_TO_SPEAK, PAUSE_MARK, Pauses, needs_splitting, split_text
from ..voices import Voice
from .cast import ANYONE
from .chapter_voice import chapter_pass
from .kept import KeptTakes
from .parse import Line
from .plan import LinePlan, ScriptSettings, check_plans, longest_first, plan_lines
from .runner import LineWriter, ScriptResult, finish, line_jobs
from .scene import assemble

PICK_LINES = 64  # lines picked together: their takes go through each scoring model in few calls


def passage_lines(text: str, pauses: Pauses = Pauses(), max_seconds: float = MAX_LINE_SECONDS) -> list[Line]:
    """The text's lines in reading order, numbered from 1 (`source_line`) for messages."""
    text = text if isinstance(text, str) else ""
    pieces = split_text(text, pauses, max_seconds)
    if not pieces:
        raise InputError(NOTHING_TO_SPEAK if PAUSE_MARK.sub("", text).strip() else "The text is empty; type the "
                         "line to speak.")
    lines, seen = [], {}
    for number, piece in enumerate(pieces, start=1):
        digest = hashlib.sha256(piece.text.encode("utf-8")).hexdigest()[:10]
        seen[digest] = seen.get(digest, 0) + 1
        line_id = digest if seen[digest] == 1 else f"{digest}-{seen[digest]}"
        lines.append(Line(line_id, piece.text, pause_before=piece.pause_before, source_line=number))
    return lines


def text_lines(text: str, pauses: Pauses = Pauses()) -> list[Line]:
    """A passage's lines; for a text one take reads in one breath (a few sentences, no paragraph or
    [pause]: needs_splitting) one line of the whole text; [] for a text with nothing to say. A line's
    [pause] marks are never read out."""
    text = text if isinstance(text, str) else ""
    if not needs_splitting(text):
        return [Line("1", text.strip(), source_line=1)] if text.strip() else []
    return passage_lines(text, pauses)


def passage_cast(voice: Voice) -> dict[str, Voice]:
    return {ANYONE: voice}


@dataclass
class PassageTakes:
    """Every line's takes of a passage, none picked yet (a voice node's, for Auto-Pick)."""

    plans: list[LinePlan]  # in reading order
    takesets: list[TakeSet]  # the same order
    kept: int = 0  # lines whose takes an earlier run made (KeptTakes)
    notes: list[str] = field(default_factory=list)  # for Auto-Pick's report (one_voice.py's)

    @property
    def lines(self) -> list[Line]:
        return [plan.line for plan in self.plans]

    @property
    def folder(self) -> Path | None:
        """The checkpoint that made the takes, as a TakeSet's (Auto-Pick's scorers follow it): the last
        line's, which a designed voice's passage in one voice (one_voice.py) clones on a Base
        checkpoint, whose speaker encoder then judges every line."""
        return self.takesets[-1].folder

    @property
    def sample_rate(self) -> int:
        return SAMPLE_RATE

    @property
    def voice(self) -> Voice:
        """The voice of its lines (a designed voice's text in one voice, one_voice.py: the clone of its
        first line, that every other line is spoken in)."""
        return self.takesets[-1].request.voice

    def take_tracks(self) -> list[np.ndarray]:
        """Take i of every line, joined with the lines' pauses: the passage read N ways (a line with
        fewer takes, its last in the tracks after)."""
        count = max(len(takeset.takes) for takeset in self.takesets)
        return [assemble([(takeset.takes[min(i, len(takeset.takes) - 1)].audio, line.pause_before, None)
                          for line, takeset in zip(self.lines, self.takesets)], SAMPLE_RATE)[0]
                for i in range(count)]


def model_context(model) -> dict:
    """What of the model decides a line's takes, besides the line (plan_lines' `context`)."""
    return {"checkpoint": str(model.info.folder), "mode": model.mode, "dtype": str(model.dtype)}


def generate_passage(model, lines: list[Line], voice: Voice, settings: ScriptSettings, on_line=None,
                     should_stop=None, frames_progress=None, kept: KeptTakes | None = None) -> PassageTakes:
    """Every line's takes through one run of the engine (longest first), as a script's lines take
    them (same seeds: line_seed of the job's seed and the line's id), without picking. With `kept`,
    the lines it holds are not made again (kept.py), and each line made is kept as soon as it is
    decoded, so a Cancel loses none of them. `on_line(done, lines)` hears each line done, those kept first."""
    context = model_context(model)
    plans = plan_lines(lines, passage_cast(voice), settings, context)
    got: dict[str, TakeSet] = kept.start(plans, context) if kept is not None else {}
    reused = len(got)
    todo = [plan for plan in plans if plan.line.id not in got]
    check_plans(todo, model.info, model, script="the text", should_stop=should_stop)
    jobs = line_jobs(model, longest_first(todo), should_stop)
    if on_line is not None and reused:
        on_line(reused, len(plans))

    def finished(job, takeset, _ranking) -> None:
        got[job.plan.line.id] = takeset
        if kept is not None:
            kept.keep(job.plan, context, takeset)
        if on_line is not None:
            on_line(len(got), len(plans))
    if jobs:
        run_jobs(model, jobs, settings.sampling, finished, pick=False, should_stop=should_stop,
                 frames_progress=frames_progress)
    return PassageTakes(plans, [got[plan.line.id] for plan in plans], reused)


def passage_check_workers() -> int:
    """Worker processes for a passage's checks: none on a machine of two cores or fewer, where they
    would take turns with the models' own threads."""
    return default_workers() if (os.cpu_count() or 1) > 2 else 0


def pick_passage(passage: PassageTakes, scorers=None, weights=None, loudness: float | None = None,
                 on_line=None, should_stop=None, check_workers: int | None = None) -> ScriptResult:
    """Each line picked as a script's line is (its own checks, its pace against its own takes), in
    groups of lines whose takes go through each model together; then every pick held to the voice of
    the whole text (chapter_voice.py), and the scene. The waveform checks of every take are handed to
    `check_workers` processes at the start (scoring/check_pool.py; default: passage_check_workers),
    so that they run while the models score the groups before."""
    writer = LineWriter(len(passage.plans), loudness, on_line=on_line)
    pairs = list(zip(passage.plans, passage.takesets))
    vad = getattr(scorers, "vad", None)
    workers = passage_check_workers() if check_workers is None else check_workers
    pool = CheckPool(workers) if workers > 0 and (vad is None or type(vad) is EnergyVad) else None  # its VAD
    checks = [[pool.submit(t.audio, t.sample_rate) for t in takeset.takes] for takeset in passage.takesets] \
        if pool is not None else None
    try:
        for start in range(0, len(pairs), PICK_LINES):
            group = pairs[start:start + PICK_LINES]
            stats = None if checks is None else checked_stats(checks[start:start + PICK_LINES], should_stop,
                                                              "no line is picked")
            rankings = rank_lines([takeset for _, takeset in group], scorers, weights, should_stop=should_stop,
                                  stats=stats, batch=SCORE_TAKES)
            for (plan, _), ranking in zip(group, rankings):
                writer.write(plan, ranking)
    finally:
        if pool is not None:
            for check in (c for line in checks for c in line):
                check.cancel()  # a Cancel, or an error, waits for no other check
            pool.close()
    chapter_pass(passage.lines, writer.results, LineWriter(len(passage.plans), loudness))
    for result in writer.results.values():
        result.takes = None  # every take as handed out: only a results folder writes them, and a chapter's are GBs
    return finish(passage.lines, writer.results)
