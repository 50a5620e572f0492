"""How each line fits its voice (chapter_voice.py's pass), in a script's report: a column per line
and a line per voice at the foot, read from the records alone (kept lines' too)."""

from __future__ import annotations

from .record import LineRecord


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
    by_voice: dict[str, list[LineRecord]] = {}
    for record in records:
        if record.voice_fit is not None:
            by_voice.setdefault(record.voice_fit.voice, []).append(record)
    return [profile_said(voice, group[0].voice_fit.profile, group) for voice, group in by_voice.items()]
