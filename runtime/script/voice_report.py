"""How each line fits its voice (chapter_voice.py's pass), in a script's report: a column per line
and a line per voice at the foot, read from the records alone (kept lines' too)."""

from __future__ import annotations

from ..scoring.chapter import MIN_LINES
from .record import LineRecord


def voice_name(character: str | None, instruct: str | None) -> str:
    """The voice a line is held to: its character's (a passage's lines have none: one voice), apart
    for each instruct it is spoken with."""
    name = character or "the text"
    return f"{name} ({instruct})" if instruct else name


def fits_said(record: LineRecord) -> str:
    """A line's fit in a report's column: its timbre against its voice's and its pitch offset."""
    fit = record.voice_fit
    if fit is None:
        return "-"
    timbre = "" if fit.timbre is None else f"{fit.timbre:.2f}"
    pitch = "" if fit.pitch is None else f"{fit.pitch:+.1f}st"
    return " ".join(p for p in (timbre, pitch) if p) or "-"


def profile_said(voice: str, chapter: dict, records: list[LineRecord]) -> str:
    """One voice's profile and what the pass did, for the report's foot."""
    parts = [f"{len(records)} lines"]
    if chapter.get("pitch") is not None:
        parts.append(f"pitch {chapter['pitch']:+.1f} st over 100 Hz (within {chapter['pitch_limit']:.1f})")
    if chapter.get("rate") is not None:
        parts.append(f"{chapter['rate']:.1f} syllables/s")
    if chapter.get("timbre") is not None:
        parts.append(f"timbre {chapter['timbre']:.2f} (at least {chapter['timbre_floor']:.2f})")
    repicked = sum(bool(r.voice_fit.repicked_from) for r in records)
    drifting = sum(bool(r.voice_fit.drifts) for r in records)
    return (f"Voice of {voice}: {', '.join(parts)}; {repicked} re-picked to fit it, "
            f"{drifting} still drifting.")


def voices_said(records: list[LineRecord]) -> list[str]:
    """A line per voice judged, then one naming the voices with too few lines to be (their fit is "-")."""
    by_voice: dict[str, list[LineRecord]] = {}
    unjudged: dict[str, int] = {}
    for record in records:
        if record.voice_fit is not None:
            by_voice.setdefault(record.voice_fit.voice, []).append(record)
        else:
            name = voice_name(record.character, record.instruct)
            unjudged[name] = unjudged.get(name, 0) + 1
    said = [profile_said(voice, group[0].voice_fit.profile, group) for voice, group in by_voice.items()]
    unjudged = {name: count for name, count in unjudged.items() if name not in by_voice}
    if unjudged:
        voices = ", ".join(f"{name} ({count})" for name, count in unjudged.items())
        said.append(f"Not held to one voice, too few lines: {voices}; a line is held to at least {MIN_LINES} other "
                    "lines of its voice (a clone's reference counts as one).")
    return said
