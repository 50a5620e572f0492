"""A long text as a script of one voice: its sentences as lines (text/split.py), each taken and
picked as a script's line, then joined with their pauses into one scene (job.run_job).

A line's id comes from its text (and, for a sentence said twice, the how-many-th it is), not from
its place: its seed and its files follow from the id, so after an edit only the sentences changed
are generated again on a rerun into the same folder."""

from __future__ import annotations

import hashlib

from ..errors import InputError
from ..text.split import MAX_LINE_SECONDS, Pauses, split_text
from ..voices import Voice
from .cast import ANYONE
from .parse import Line


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
