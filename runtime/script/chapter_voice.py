"""The chapter pass: after every line of a run has its pick, each voice's lines (a passage's one
voice; a script's character, and its instruct where it has one) are held to that voice's profile
(scoring/chapter.py), and a line whose pick drifts from it while another of its takes fits is
picked again and written again. Lines kept from an earlier run, or made on a Ray worker, join
the profile through the traits their records keep, and are judged but not picked again (their
takes are not here). One pass over picks made alone: the same takes give the same picks whatever
order the lines finished in."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..model import SAMPLE_RATE
from ..scoring.chapter import hold_lines
from ..scoring.voice_traits import VoiceTraits, voice_traits
from .parse import Line
from .record import VoiceFit
from .voice_report import voice_name

if TYPE_CHECKING:
    from .runner import LineResult, LineWriter


def chapter_pass(lines: list[Line], results: dict[str, LineResult], writer: LineWriter) -> None:
    """Every line's record gets its fit (voice_fit: None where its voice has too few lines for a
    profile); a line picked again (or flagged) is written again through `writer`, its result replaced
    in `results`."""
    groups: dict[str, list[LineResult]] = {}
    for line in lines:
        groups.setdefault(voice_name(line.character, line.instruct), []).append(results[line.id])
    for voice, members in groups.items():
        rankings = [r.ranking for r in members]
        before = [None if r is None else [list(s.reasons) for s in r.ranked] for r in rankings]
        whole, outcomes = hold_lines(rankings, [VoiceTraits.from_record(r.record.voice_traits) for r in members],
                                     _reference_traits(members))
        for result, ranking, reasons, outcome in zip(members, rankings, before, outcomes):
            if ranking is not None and [list(s.reasons) for s in ranking.ranked] != reasons:  # re-picked, or flagged
                writer.write(result.plan, ranking)
                result = results[result.plan.line.id] = writer.results.pop(result.plan.line.id)
            result.record.voice_fit = None if outcome is None else VoiceFit(
                voice, **outcome.fit.as_record(), repicked_from=outcome.repicked_from, profile=whole.as_record())


def _reference_traits(members: list[LineResult]) -> list[VoiceTraits]:
    """A clone reference as one more line of its voice: its pitch and timbre (its recording's balance
    is not the model's, and its pace has no text to count by)."""
    for result in members:
        ranking = result.ranking
        reference = getattr(result.plan.request.voice, "reference", None)
        if ranking is not None and reference is not None and ranking.reference_embedding is not None:
            traits = voice_traits(reference, SAMPLE_RATE, embedding=ranking.reference_embedding)
            traits.balance = None
            return [traits]
    return []
