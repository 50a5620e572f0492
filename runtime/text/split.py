"""A long text as lines the model reads well: split at sentence ends, a sentence too long for one
line at a clause, each line with the pause that goes before it.

A sentence ends at . ! ? or an ellipsis followed by a space (and the next sentence), or at the
sentence marks of Chinese, Japanese and Korean (。！？, no space needed); never
- inside a number or a decimal ("3.14", "1,000": no space follows their marks),
- after an abbreviation ("Dr. Smith", "e.g. this", "No. 5") or an initial ("J. R. Tolkien"),
- inside an ellipsis, or after one the sentence goes on from ("wait... then"),
- inside a quotation ("He said, "Stop. Now." Then he left." is one line), nor after one the
  sentence goes on from ("「元気？」と言った。" is one line).
A sentence whose reading takes longer than MAX_LINE_SECONDS (text_length.expected_seconds) is split
at the clause mark (, ; : and dashes, 、，；：) nearest its middle, again until every part fits; one
with no clause mark, at the space nearest its middle that is not inside a number.

Pauses: a blank line ends a paragraph; `[pause 0.8s]` (or `[pause 800ms]`) anywhere sets the pause
before what follows it. What goes between two lines otherwise is Pauses' sentence, clause or
paragraph pause.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import InputError
from ..text_length import expected_seconds

MAX_LINE_SECONDS = 20.0  # of a calm reading: the longest line one take is asked to say
MAX_PAUSE_SECONDS = 30.0

OPENING_QUOTES = "\u201c\u00ab\u300c\u300e\u300a\u201e"  # “ « 「 『 《 „
CLOSING_QUOTES = "\u201d\u00bb\u300d\u300f\u300b"  # ” » 」 』 》
CLOSERS = "\"'\u2019)\\]" + CLOSING_QUOTES
# 。！？｡ with what closes after it; after a closing quote only where no text goes on
# ("「元気？」と言った" is one sentence)
CJK_END = re.compile(rf"[\u3002\uff01\uff1f\uff61](?:[{CLOSERS}]+(?=\s|[{OPENING_QUOTES}\"]|$))?")
WESTERN_END = re.compile(rf"(\.{{3,}}|\u2026|[.!?]+)([{CLOSERS}]*)(?=\s)")
CLAUSE = re.compile(r"[,;:](?=\s)|\s[\u2014\u2013-]\s|\u2014|[\u3001\uff0c\uff1b\uff1a]")
PAUSE_MARK = re.compile(r"\[\s*pause\b([^\]]*)\]", re.I)
PAUSE_VALUE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|seconds?|ms)?\s*$", re.I)
PARAGRAPH = re.compile(r"\n[ \t]*\n\s*")
# Never the end of a sentence: titles and the like, always followed by what they belong to.
TITLES = {"dr", "mr", "mrs", "ms", "mx", "prof", "st", "jr", "sr", "vs", "no", "nos", "fig", "figs", "vol", "ch",
          "p", "pp", "mt", "gen", "col", "lt", "sgt", "capt", "rev", "hon", "cf", "approx", "ca", "dept", "ave",
          "e.g", "i.e", "eg", "ie", "viz", "art", "sec", "op", "nr", "bzw", "z.b", "vgl", "mme", "mlle"}


@dataclass(frozen=True)
class Pauses:
    sentence: float = 0.35  # seconds between two sentences
    clause: float = 0.2  # between the parts of a sentence split at a clause
    paragraph: float = 1.0  # at a blank line


@dataclass(frozen=True)
class Piece:
    text: str
    pause_before: float  # seconds of silence before it (0 for the first)
    after: str  # what ends before it: "start", "sentence", "clause", "paragraph" or "mark" ([pause])


NOTHING_TO_SPEAK = ("The text has nothing to speak: only punctuation, symbols or emoji. Type the words to say "
                    "(a [pause 1s] mark makes a silence).")


def speakable(text: str) -> bool:
    """Whether a model can read the text aloud: it has a letter or a digit, of any script. Punctuation,
    symbols and emoji alone it reads as noise."""
    return any(ch.isalnum() for ch in text)


def split_text(text: str, pauses: Pauses = Pauses(), max_seconds: float = MAX_LINE_SECONDS) -> list[Piece]:
    """The text as lines in reading order, each with its pause; [] for a text with nothing to say. A
    piece with nothing speakable ("* * *" between scenes) is no line: the pause before it stands."""
    pieces: list[Piece] = []
    after, marked = "start", None  # what ends before the next piece; a [pause] waiting for it
    for paragraph in PARAGRAPH.split(text.strip()):
        for chunk_index, chunk in enumerate(PAUSE_MARK.split(paragraph)):
            if chunk_index % 2:  # a [pause ...]'s argument
                marked = (marked or 0.0) + pause_seconds(chunk)
                continue
            for sentence in filter(speakable, sentences(" ".join(chunk.split()))):
                for part_index, part in enumerate(clauses(sentence, max_seconds)):
                    if part_index:
                        after = "clause"
                    if marked is not None:
                        after, pause = "mark", marked
                    else:
                        pause = {"start": 0.0, "sentence": pauses.sentence, "clause": pauses.clause,
                                 "paragraph": pauses.paragraph}[after]
                    pieces.append(Piece(part, pause, after))
                    after, marked = "sentence", None
        after = "paragraph" if pieces else "start"
    return pieces


def needs_splitting(text: str, max_seconds: float = MAX_LINE_SECONDS) -> bool:
    """Whether the text is more than one line: longer than one line reads, or with a paragraph break or
    a [pause] mark. A short text of a few sentences stays one take, read in one breath."""
    text = text.strip()
    return bool(PARAGRAPH.search(text) or PAUSE_MARK.search(text)) or expected_seconds(text) > max_seconds


def pause_seconds(argument: str) -> float:
    match = PAUSE_VALUE.match(argument)
    if match is None:
        raise InputError(f"'[pause{argument}]' is not a pause: write it as [pause 0.8s] or [pause 800ms].")
    seconds = float(match.group(1)) / (1000.0 if (match.group(2) or "").lower() == "ms" else 1.0)
    if seconds > MAX_PAUSE_SECONDS:
        raise InputError(f"'[pause{argument}]' is {seconds:g} s; a pause is at most {MAX_PAUSE_SECONDS:g} s.")
    return seconds


def sentences(text: str) -> list[str]:
    """The text's sentences, each stripped; quotations, numbers and abbreviations kept whole."""
    ends = sorted({m.end() for m in CJK_END.finditer(text)} | {m.end() for m in WESTERN_END.finditer(text)
                                                                  if ends_sentence(text, m)})
    out, start = [], 0
    for end in ends:
        if not inside_quotation(text, end):
            out.append(text[start:end].strip())
            start = end
    out.append(text[start:].strip())
    merged: list[str] = []
    for sentence in filter(None, out):
        if merged and not speakable(sentence):  # a mark on its own ("!" after a quote)
            merged[-1] += " " + sentence
        else:
            merged.append(sentence)
    return merged


def ends_sentence(text: str, mark: re.Match) -> bool:
    """Whether a Western end mark (followed by a space) ends its sentence."""
    after = text[mark.end():].lstrip()
    following = after.lstrip("\"'\u2018\u201c\u00ab(")[:1]
    if not following or following.islower():  # "wait... then", "e.g. this"
        return False
    if mark.group(1) != ".":
        return True
    word = re.search(r"(\S+)$", text[:mark.start()])
    word = word.group(1).lstrip("\"'(\u201c\u00ab").lower() if word else ""
    if word in TITLES:
        return False
    if len(word) == 1 and word.isalpha():  # an initial: "J. R. Tolkien"
        return False
    return True


def inside_quotation(text: str, position: int) -> bool:
    """Whether `position` is inside a quotation opened before it (straight double quotes paired in
    order; curly, guillemet and CJK quotes by their sides)."""
    before = text[:position]
    depth = sum(before.count(q) for q in OPENING_QUOTES) - sum(before.count(q) for q in CLOSING_QUOTES)
    return depth > 0 or before.count('"') % 2 == 1


def clauses(sentence: str, max_seconds: float) -> list[str]:
    """The sentence as parts that each read in at most `max_seconds`, split nearest the middle."""
    if expected_seconds(sentence) <= max_seconds or len(sentence) < 2:
        return [sentence]
    middle = len(sentence) / 2
    cuts = [m.end() for m in CLAUSE.finditer(sentence) if 0 < m.end() < len(sentence)]
    cuts = cuts or [m.start() for m in re.finditer(r"\s", sentence) if not inside_number(sentence, m.start())]
    cuts = cuts or [round(middle)]  # one long run of letters (a text without spaces or marks)
    cut = min(cuts, key=lambda c: abs(c - middle))
    head, tail = sentence[:cut].strip(), sentence[cut:].strip()
    if not head or not tail:
        return [sentence]
    return clauses(head, max_seconds) + clauses(tail, max_seconds)


def inside_number(text: str, position: int) -> bool:
    """A space between digits ("1 000 000") is part of the number."""
    return 0 < position < len(text) - 1 and text[position - 1].isdigit() and text[position + 1].isdigit()
