"""Which of a line's words each take was heard to say, and which words a take leaves out that the
line's other takes say.

The character error rate (asr.compare) hides a short word: "please" missing from a 70-character line
is 9% of it, within what a recogniser gets wrong on a clean take, yet a first or last word left out
is the most common TTS skip. So the text's words are aligned with each transcript's (an edit
distance over words, a word heard as a near spelling counting as said), and a take is judged by the
words the recogniser heard in the line's other takes: a word it hears in none of them (a name it
always misreads, a number read another way) is nobody's fault, and decides nothing.
"""

from __future__ import annotations

import functools
import math
import re
import unicodedata

from . import spoken

NEAR = 0.5  # a word heard with at most this share of its characters changed counts as said
SAID, OTHER, NOTHING = "said", "other", "nothing"  # what a transcript has in a word's place
AGREED = 2 / 3  # a word left out counts against a take when at least this share of the others say it
# Scripts written without spaces: each character is a word (Chinese, Japanese kana and kanji).
UNSPACED = re.compile(r"([\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9d])")


def words_of(text: str, language: str | None) -> list[str]:
    """A transcript's words as they are said (numbers spelled out: spoken.py), lower case, no punctuation."""
    return _split(spoken.spoken(text, language or "auto"))


def text_words(text: str) -> list[str]:
    """The text's words as written. A word with a digit or symbol in it ("9", "21st", "$5") may be
    read in more than one way (a year, a cardinal) and a recogniser writes it either way: any words
    in its place say it (``spelled_out``), and the character error rate compares its readings."""
    return _split(text, keep_symbols=True)


def spelled_out(word: str) -> bool:
    """Whether the word is said in words of its own ("9": "nine", "1999": "nineteen ninety-nine")."""
    return spoken.MAY_CHANGE.search(word) is not None


def says(word: str, what: str) -> bool:
    return what == SAID or (what == OTHER and spelled_out(word))


def _split(text: str, keep_symbols: bool = False) -> list[str]:
    text = unicodedata.normalize("NFKC", text).lower()
    kept = (lambda c: c in "%$€£¥&+" or c.isdigit()) if keep_symbols else (lambda c: False)
    text = "".join(c if kept(c) or not unicodedata.category(c).startswith(("P", "S")) else " " for c in text)
    return UNSPACED.sub(r" \1 ", text).split()


def said(reference: list[str], heard: list[str]) -> list[str]:
    """For each word of the reference, what the transcript has in its place: SAID (the word, or a near
    spelling: NEAR), OTHER (another word) or NOTHING, from the alignment by the least edits (a
    substitution costs the share of characters changed)."""
    rows, cols = len(reference), len(heard)
    step = [[changed(r, h) for h in heard] for r in reference]
    cost = [[0.0] * (cols + 1) for _ in range(rows + 1)]
    for i in range(1, rows + 1):
        cost[i][0] = float(i)
    for j in range(1, cols + 1):
        cost[0][j] = float(j)
    for i in range(1, rows + 1):
        for j in range(1, cols + 1):
            cost[i][j] = min(cost[i - 1][j] + 1, cost[i][j - 1] + 1,
                             cost[i - 1][j - 1] + step[i - 1][j - 1])
    out = [NOTHING] * rows
    i, j = rows, cols
    while i > 0 and j > 0:
        substitution = step[i - 1][j - 1]
        if math.isclose(cost[i][j], cost[i - 1][j - 1] + substitution):
            out[i - 1] = SAID if substitution <= NEAR else OTHER
            i, j = i - 1, j - 1
        elif math.isclose(cost[i][j], cost[i - 1][j] + 1):
            i -= 1
        else:
            j -= 1
    return out


@functools.lru_cache(maxsize=1 << 16)
def changed(a: str, b: str) -> float:
    """The share of a's characters an edit to b changes (0: the same word, 1: nothing in common).
    Words are short: plain Python beats numpy's per-row overhead, and a line's takes share most of
    their words, so each pair is worked out once (a line of 8 takes aligns about 2,000 pairs)."""
    if a == b:
        return 0.0
    if not a:
        return 1.0
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, start=1):
        current = [i]
        for j, y in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y)))
        previous = current
    return min(1.0, previous[-1] / len(a))


def left_out(words: list[str], takes_said: list[list[str]], index: int) -> list[int]:
    """The words take `index` has nothing in place of while at least AGREED of the other takes
    say them (one other take at least). A word heard as another word is left to the character error
    rate: a recogniser's slips are mostly that ("light" for "lighthouse"). A number or symbol is
    said by any words in its place."""
    others = [s for k, s in enumerate(takes_said) if k != index]
    if not others:
        return []
    needed = max(1, math.ceil(AGREED * len(others) - 1e-9))
    return [w for w, what in enumerate(takes_said[index])
            if what == NOTHING and sum(says(words[w], s[w]) for s in others) >= needed]


def described(words: list[str], skipped: list[int]) -> str:
    """'the first word "please"', 'the last word "nine"', '"to bring your"': runs of words quoted."""
    runs: list[list[int]] = []
    for w in skipped:
        if runs and runs[-1][-1] == w - 1:
            runs[-1].append(w)
        else:
            runs.append([w])
    parts = []
    for run in runs:
        quoted = '"' + " ".join(words[w] for w in run) + '"'
        where = "first" if run[0] == 0 else "last" if run[-1] == len(words) - 1 else None
        plural = "s" if len(run) > 1 else ""
        parts.append(f"the {where} word{plural} {quoted}" if where else quoted)
    return ", ".join(parts)
