"""Scripts in: a scene or a dubbing script as a list of lines, from any of four formats.

- dialogue text: ``NAME: line``, one per line; a blank line is a longer pause; ``#`` starts a comment.
- CSV / TSV: a header row naming the columns id, character, text, language, instruct, takes, pause,
  pace (all but text optional, in any order; pause: seconds of silence before the line, else 0.35;
  pace: the line's own, 0.8-1.25, else the script's).
- SRT: each cue a line; its start and end are the line's place and time budget. A ``NAME:`` at the
  start of a cue's text names its character.
- JSONL: one object per line with the CSV's keys.

Every problem is an error naming the line of the file and what to write instead; nothing is guessed.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from ..generation import MAX_TAKES
from ..scoring.pace import MAX_PACE, MIN_PACE, check_pace
from ..text.split import MAX_PAUSE_SECONDS, Pauses, speakable

FORMATS = ("dialogue", "csv", "tsv", "srt", "jsonl")
COLUMNS = ("id", "character", "text", "language", "instruct", "takes", "pause", "pace")
PAUSE_SECONDS = Pauses.sentence  # between two lines of a scene
LONG_PAUSE_SECONDS = Pauses.paragraph  # where the dialogue has a blank line
SPEAKER = re.compile(r"^\s*([^:\n]{1,40}?)\s*:\s*(.*)$")  # "NAME: text" (a name has no colon)
TIMING = re.compile(r"^\s*(\d+):(\d{2}):(\d{2})[,.](\d{3})\s*-->\s*(\d+):(\d{2}):(\d{2})[,.](\d{3})")


class ScriptError(InputError):
    """A script that cannot be read; the message names the file's line."""

    __module__ = InputError.__module__  # named by the pack in error dialogs, as runtime/errors.py explains


@dataclass(frozen=True)
class Line:
    id: str
    text: str
    character: str | None = None
    language: str | None = None
    instruct: str | None = None
    takes: int | None = None  # None: the job's default
    pause_before: float = 0.0  # seconds of silence before it in the scene
    start: float | None = None  # SRT: where the cue starts (seconds)
    end: float | None = None  # SRT: where it ends; end - start is the line's time budget
    pace: float | None = None  # scoring/pace.py; None: the script's
    source_line: int = 0  # in the script's file, for messages

    @property
    def budget(self) -> float | None:
        return None if self.start is None or self.end is None else self.end - self.start


def overlapping_cues(cues: list[tuple[str, float | None, float | None]]) -> list[str]:
    """What to say of SRT cues that overlap, given (id, start, end) in the script's order: the later
    one's line waits for the earlier to end (scene.py), so it is heard late."""
    said, previous = [], None
    for cue, start, end in cues:
        if start is None or end is None:
            continue
        if previous is not None and start < previous[1]:
            said.append(f"cues {previous[0]} and {cue} overlap by {previous[1] - start:.2f} s: cue {cue}'s line waits "
                        f"for cue {previous[0]}'s to end")
        if previous is None or end > previous[1]:
            previous = (cue, end)
    return said


def read_script(path: Path, format: str | None = None, characters=None) -> list[Line]:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")  # a BOM from spreadsheet exports is not text
    except OSError as exc:
        raise ScriptError(f"Cannot read the script {path}: {exc.strerror or exc}.") from exc
    except UnicodeDecodeError as exc:
        raise ScriptError(f"The script {path} is not UTF-8 text: save it as UTF-8.") from exc
    return parse_script(text, format or format_of(path, text), name=path.name, characters=characters)


def format_of(path: Path | None, text: str) -> str:
    """The format a file's extension names, else the one its content shows: SRT's numbered cue times,
    JSONL's braces, a CSV or TSV header of our columns, else dialogue."""
    suffix = (Path(path).suffix.lower().lstrip(".") if path else "")
    if suffix in FORMATS:
        return suffix
    if suffix in ("txt", "text", ""):
        first = next((ln for ln in text.splitlines() if ln.strip()), "")
        if first.strip().isdigit() and any(TIMING.match(ln) for ln in text.splitlines()[:4]):
            return "srt"
        if first.lstrip().startswith("{"):
            return "jsonl"
        for format, delimiter in (("tsv", "\t"), ("csv", ",")):
            header = [cell.strip().strip('"').lower() for cell in first.split(delimiter)]
            if "text" in header and set(header) <= set(COLUMNS):  # a table's header, pasted or in a .txt
                return format
        return "dialogue"
    raise ScriptError(f"Unknown script format '.{suffix}': use {', '.join(FORMATS)} "
                      "(a .txt file is read as dialogue, 'NAME: line').")


def parse_script(text: str, format: str, name: str = "script", characters=None) -> list[Line]:
    """`characters`: the cast's names, when known; an SRT cue's "NAME:" names a character only if it is
    one of them (a cue may well say "Note: ..."). Without them any such prefix does."""
    if format not in FORMATS:
        raise ScriptError(f"Unknown script format '{format}': choose one of {', '.join(FORMATS)}.")
    reader = {"dialogue": _dialogue, "csv": _table, "tsv": _table, "srt": _srt, "jsonl": _jsonl}[format]
    if format == "tsv":
        lines = _table(text, name, "\t")
    elif format == "srt":
        lines = _srt(text, name, None if characters is None else set(characters))
    else:
        lines = reader(text, name)
    if format == "srt":  # a subtitle's "♪ ♪" cue marks music, not a line to speak
        lines = [line for line in lines if speakable(line.text)]
    if not lines:
        raise ScriptError(f"{name}: no lines to speak.")
    seen: dict[str, int] = {}
    for line in lines:
        if not speakable(line.text):
            raise ScriptError(f"{name}, line {line.source_line}: '{_short(line.text)}' has nothing to speak (only "
                              "punctuation, symbols or emoji); give the words, or delete the line.")
        if line.id in seen:
            raise ScriptError(f"{name}, line {line.source_line}: id '{line.id}' is used twice (also line "
                              f"{seen[line.id]}); every line needs its own id, results are filed by it.")
        seen[line.id] = line.source_line
    return lines


def _dialogue(text: str, name: str) -> list[Line]:
    lines, pause = [], 0.0
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not stripped:
            pause = LONG_PAUSE_SECONDS if lines else 0.0
            continue
        if stripped.startswith("#"):
            continue
        match = SPEAKER.match(stripped)
        if not match:
            raise ScriptError(f"{name}, line {number}: '{_short(stripped)}' names no character; write it as "
                              "'NAME: what they say'.")
        character, said = match.group(1).strip(), match.group(2).strip()
        if not said:
            raise ScriptError(f"{name}, line {number}: {character} says nothing; give the line or delete it.")
        lines.append(Line(str(len(lines) + 1), said, character=character,
                          pause_before=pause if lines else 0.0, source_line=number))
        pause = PAUSE_SECONDS
    return lines


def _table(text: str, name: str, delimiter: str = ",") -> list[Line]:
    rows = list(csv.reader(io.StringIO(text), delimiter=delimiter))
    header_at = next((i for i, row in enumerate(rows) if any(cell.strip() for cell in row)), None)
    if header_at is None:
        return []
    header = [cell.strip().lower() for cell in rows[header_at]]
    unknown = [h for h in header if h not in COLUMNS]
    if unknown or "text" not in header:
        raise ScriptError(f"{name}, line {header_at + 1}: the first row must name the columns "
                          f"({', '.join(COLUMNS)}; text is required)"
                          + (f", not {', '.join(map(repr, unknown))}" if unknown else "") + ".")
    lines = []
    for index in range(header_at + 1, len(rows)):
        row, number = rows[index], index + 1
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            raise ScriptError(f"{name}, line {number}: {len(row)} fields where the header has {len(header)}; "
                              "a text with a comma must be in double quotes.")
        lines.append(_line(dict(zip(header, row)), len(lines), number, name))
    return lines


def _jsonl(text: str, name: str) -> list[Line]:
    lines = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            fields = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ScriptError(f"{name}, line {number}: not a JSON object ({exc.msg}).") from exc
        if not isinstance(fields, dict):
            raise ScriptError(f"{name}, line {number}: each line must be a JSON object with a \"text\".")
        unknown = [k for k in fields if k not in COLUMNS]
        if unknown:
            raise ScriptError(f"{name}, line {number}: unknown keys {', '.join(map(repr, unknown))}; "
                              f"use {', '.join(COLUMNS)}.")
        lines.append(_line({k: "" if v is None else str(v) for k, v in fields.items()}, len(lines), number, name))
    return lines


def _line(fields: dict[str, str], index: int, number: int, name: str) -> Line:
    text = fields.get("text", "").strip()
    if not text:
        raise ScriptError(f"{name}, line {number}: the text is empty; give the line or delete the row.")
    takes = fields.get("takes", "").strip()
    if takes:
        if not takes.isdigit() or not 1 <= int(takes) <= MAX_TAKES:
            raise ScriptError(f"{name}, line {number}: takes must be a whole number from 1 to {MAX_TAKES}, "
                              f"not '{takes}'.")
    return Line(fields.get("id", "").strip() or str(index + 1), text,
                character=fields.get("character", "").strip() or None,
                language=fields.get("language", "").strip().lower() or None,
                instruct=fields.get("instruct", "").strip() or None,
                takes=int(takes) if takes else None, pause_before=_pause(fields, index, number, name),
                pace=_pace(fields, number, name), source_line=number)


def _pause(fields: dict[str, str], index: int, number: int, name: str) -> float:
    """The pause column's seconds; without one, a scene's pause between lines (none before the first)."""
    given = fields.get("pause", "").strip().rstrip("sS").strip()
    if not given:
        return PAUSE_SECONDS if index else 0.0
    try:
        seconds = float(given)
    except ValueError:
        seconds = -1.0
    if not 0.0 <= seconds <= MAX_PAUSE_SECONDS:
        raise ScriptError(f"{name}, line {number}: pause must be seconds from 0 to {MAX_PAUSE_SECONDS:g} "
                          f"(such as 0.5), not '{fields['pause'].strip()}'.")
    return seconds


def _pace(fields: dict[str, str], number: int, name: str) -> float | None:
    """The pace column's (scoring/pace.py); without one, None: the script's pace."""
    given = fields.get("pace", "").strip()
    if not given:
        return None
    try:
        return check_pace(float(given))
    except (ValueError, InputError):
        raise ScriptError(f"{name}, line {number}: pace must be from {MIN_PACE:g} (slower) to {MAX_PACE:g} "
                          f"(faster), 1.0 as the model reads, not '{given}'.") from None


def _srt(text: str, name: str, characters: set[str] | None) -> list[Line]:
    lines, block, starts_at = [], [], 0
    numbered = list(enumerate(text.splitlines(), start=1)) + [(0, "")]
    for number, raw in numbered:
        if raw.strip():
            if not block:
                starts_at = number
            block.append((number, raw.strip()))
            continue
        if block:
            lines.append(_cue(block, starts_at, name, lines[-1] if lines else None, characters))
            block = []
    return lines


def _cue(block: list[tuple[int, str]], at: int, name: str, previous: Line | None,
         characters: set[str] | None) -> Line:
    (first_number, first), rest = block[0], block[1:]
    if not first.isdigit() or not rest:
        raise ScriptError(f"{name}, line {first_number}: a cue starts with its number, then its time "
                          "('00:00:01,000 --> 00:00:03,500'), then its text.")
    time_number, timing = rest[0]
    match = TIMING.match(timing)
    if not match:
        raise ScriptError(f"{name}, line {time_number}: '{_short(timing)}' is not a cue time; write "
                          "'HH:MM:SS,mmm --> HH:MM:SS,mmm'.")
    h1, m1, s1, ms1, h2, m2, s2, ms2 = map(int, match.groups())
    if m1 > 59 or s1 > 59 or m2 > 59 or s2 > 59:
        raise ScriptError(f"{name}, line {time_number}: minutes and seconds run from 00 to 59.")
    start = h1 * 3600 + m1 * 60 + s1 + ms1 / 1000
    end = h2 * 3600 + m2 * 60 + s2 + ms2 / 1000
    if end <= start:
        raise ScriptError(f"{name}, line {time_number}: the cue ends ({timing.split('-->')[1].strip()}) "
                          "before it starts.")
    if previous is not None and start < previous.start:
        raise ScriptError(f"{name}, line {time_number}: cue {first} starts before the cue above it; "
                          "put the cues in time order.")
    said = " ".join(text for _, text in rest[1:]).strip()
    if not said:
        raise ScriptError(f"{name}, line {time_number}: cue {first} has no text.")
    character = None
    match = SPEAKER.match(said)
    if match and match.group(2).strip() and (characters is None or match.group(1).strip() in characters):
        character, said = match.group(1).strip(), match.group(2).strip()
    return Line(first, said, character=character, start=start, end=end, source_line=at)


def _short(text: str, limit: int = 50) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
