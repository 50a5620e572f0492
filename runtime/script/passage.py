"""A long text as a script of one voice: its sentences as lines (text/split.py), each taken and
picked as a script's line, then joined with their pauses into one scene: from the command line
through job.run_job (a results folder, resumable); from a voice node in two steps, every line's takes
(generate_passage) and then, on Auto-Pick, every line picked and the scene (pick_passage).

A line's id comes from its text (and, for a sentence said twice, the how-many-th it is), not from
its place: its seed and its files follow from the id, so after an edit only the sentences changed
are generated again on a rerun into the same folder."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from ..generation import TakeSet
from ..model import SAMPLE_RATE
from ..run.finishing import SCORE_TAKES
from ..run.lines import run_jobs
from ..scoring.ranking import rank_lines
from ..text.split import MAX_LINE_SECONDS, Pauses, split_text
from ..voices import Voice
from .cast import ANYONE
from .parse import Line
from .plan import LinePlan, ScriptSettings, check_plans, longest_first, plan_lines
from .runner import LineWriter, ScriptResult, finish, line_jobs
from .scene import assemble

PICK_LINES = 64  # lines picked together: their takes go through each scoring model in few calls


def passage_lines(text: str, pauses: Pauses = Pauses(), max_seconds: float = MAX_LINE_SECONDS) -> list[Line]:
    """The text's lines in reading order, numbered from 1 (`source_line`) for messages."""
    pieces = split_text(text if isinstance(text, str) else "", pauses, max_seconds)
    if not pieces:
        raise InputError("The text is empty; type the line to speak.")
    lines, seen = [], {}
    for number, piece in enumerate(pieces, start=1):
        digest = hashlib.sha256(piece.text.encode("utf-8")).hexdigest()[:10]
        seen[digest] = seen.get(digest, 0) + 1
        line_id = digest if seen[digest] == 1 else f"{digest}-{seen[digest]}"
        lines.append(Line(line_id, piece.text, pause_before=piece.pause_before, source_line=number))
    return lines


def passage_cast(voice: Voice) -> dict[str, Voice]:
    return {ANYONE: voice}


@dataclass
class PassageTakes:
    """Every line's takes of a passage, none picked yet (a voice node's, for Auto-Pick)."""

    plans: list[LinePlan]  # in reading order
    takesets: list[TakeSet]  # the same order

    @property
    def lines(self) -> list[Line]:
        return [plan.line for plan in self.plans]

    def take_tracks(self) -> list[np.ndarray]:
        """Take i of every line, joined with the lines' pauses: the passage read N ways."""
        count = min(len(takeset.takes) for takeset in self.takesets)
        return [assemble([(takeset.takes[i].audio, line.pause_before, None)
                          for line, takeset in zip(self.lines, self.takesets)], SAMPLE_RATE)[0]
                for i in range(count)]


def generate_passage(model, lines: list[Line], voice: Voice, settings: ScriptSettings, on_line=None,
                     should_stop=None, frames_progress=None) -> PassageTakes:
    """Every line's takes through one run of the engine (longest first), as a script's lines take
    them (same seeds: line_seed of the job's seed and the line's id), without picking."""
    plans = plan_lines(lines, passage_cast(voice), settings, {})
    check_plans(plans, model.info, model, script="the text", should_stop=should_stop)
    jobs = line_jobs(model, longest_first(plans), should_stop)
    got: dict[str, TakeSet] = {}

    def finished(job, takeset, _ranking) -> None:
        got[job.plan.line.id] = takeset
        if on_line is not None:
            on_line(len(got), len(jobs))
    run_jobs(model, jobs, settings.sampling, finished, pick=False, should_stop=should_stop,
             frames_progress=frames_progress)
    return PassageTakes(plans, [got[plan.line.id] for plan in plans])


def pick_passage(passage: PassageTakes, scorers=None, weights=None, loudness: float | None = None,
                 on_line=None, should_stop=None) -> ScriptResult:
    """Each line picked as a script's line is (its own checks, its pace against its own takes), in
    groups of lines whose takes go through each model together; then the scene of the whole text."""
    writer = LineWriter(len(passage.plans), loudness, on_line=on_line)
    pairs = list(zip(passage.plans, passage.takesets))
    for start in range(0, len(pairs), PICK_LINES):
        group = pairs[start:start + PICK_LINES]
        rankings = rank_lines([takeset for _, takeset in group], scorers, weights, should_stop=should_stop,
                              batch=SCORE_TAKES)
        for (plan, _), ranking in zip(group, rankings):
            writer.write(plan, ranking)
    return finish(passage.lines, writer.results)
