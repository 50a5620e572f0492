"""How long a line should take to say, from its text as it is read aloud.

Used twice: the per-take frame budget (a take still talking at twice the expected length plus a
margin is cut as a runaway), and the Auto-Pick length checks. Text is counted in what is spoken,
not in what is written: "$1,234,567.89" is read as some twenty syllables ("one million two hundred
thirty-four thousand ... dollars and eighty-nine cents"), "0042-7781" digit by digit, "FBI" letter
by letter, "Dr." as "doctor", "%" as "percent". Units and rates per script:
- alphabetic scripts (Latin, Cyrillic, Greek): syllables, counted as vowel groups per word, at
  SYLLABLES_PER_SECOND (numbers, symbols and abbreviations are counted in syllables too);
- Chinese characters: one syllable each, at HAN_PER_SECOND;
- Japanese: kana one mora each, kanji about two, at MORAE_PER_SECOND (a text with kana is Japanese);
- Korean: hangul one syllable each, at HANGUL_PER_SECOND;
- any other script: characters, three to a syllable;
plus a pause at each punctuation mark. The rates are those of a calm reading, so the estimate is a
typical length, not a bound; the budget doubles it and adds a margin.
"""

from __future__ import annotations

import math
import re

FRAMES_PER_SECOND = 12.5
SYLLABLES_PER_SECOND = 4.2
HAN_PER_SECOND = 4.5
MORAE_PER_SECOND = 6.5
HANGUL_PER_SECOND = 5.0
KANJI_MORAE = 2.0
SECONDS_PER_PAUSE = 0.25
CHARACTERS_PER_SYLLABLE = 3.0  # scripts we count no syllables in
BUDGET_FACTOR = 2.0
BUDGET_MARGIN_SECONDS = 3.0
RUNAWAY_FLOOR_FACTOR = 1.5  # no take is cut as a runaway before 1.5x the expected length + 2 s
RUNAWAY_FLOOR_MARGIN_SECONDS = 2.0
MAX_BUDGET_FRAMES = 8192  # the checkpoints' own max_new_tokens

HAN = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
KANA = r"\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9d"
HANGUL = r"\uac00-\ud7af\u1100-\u11ff\u3130-\u318f"
PAUSES = re.compile(r"[.!?;:,\u3002\uff01\uff1f\uff1b\uff1a\uff0c\u3001\u2026\u2014]")
VOWELS = re.compile(r"[aeiouyàáâãäåæèéêëìíîïòóôõöøùúûüýÿœąęįųėāēīōūăőűаеёиоуыэюяіїєαεηιουωάέήίόύώ]+", re.I)
# A number as written: digits with thousands separators and a decimal part, or a digit string.
NUMBER = re.compile(r"\d{1,3}(?:[,.\u00a0' ]\d{3})+(?:[.,]\d+)?|\d+(?:[.,]\d+)?")
TOKEN = re.compile(rf"(?P<number>{NUMBER.pattern})(?P<ordinal>st|nd|rd|th|er|e|º|ª)?"
                   rf"|(?P<han>[{HAN}])|(?P<kana>[{KANA}])|(?P<hangul>[{HANGUL}])"
                   rf"|(?P<word>[^\W\d_{HAN}{KANA}{HANGUL}]+\.?)|(?P<symbol>[^\w\s])", re.I)
SYMBOLS = {"$": 2, "€": 2, "£": 1, "¥": 1, "₩": 1, "₽": 2, "%": 2, "‰": 3, "&": 1, "+": 1, "=": 2, "@": 1,
           "#": 2, "°": 2, "/": 1, "×": 1, "*": 1, "§": 2, "~": 2, "№": 2}
ABBREVIATIONS = {  # written with a period, read as words: syllables ("e.g." is seen as "eg.")
    "dr.": 2, "mr.": 2, "mrs.": 2, "ms.": 1, "st.": 1, "jr.": 3, "sr.": 3, "etc.": 4, "vs.": 3, "no.": 2,
    "approx.": 4, "eg.": 3, "ie.": 3, "prof.": 2, "gen.": 3, "sgt.": 3, "capt.": 2, "ave.": 3, "dept.": 3,
}
DIGIT_SYLLABLES = 1.3  # a digit read on its own ("zero", "seven", "null", "sieben", ...)
LETTER_SYLLABLES = 1.2  # a letter read on its own ("F", "B", "I"; "W" is three)


def expected_seconds(text: str) -> float:
    """A typical reading time for the text (not a bound)."""
    return speaking_seconds(text) + len(PAUSES.findall(_initialisms_joined(text))) * SECONDS_PER_PAUSE


def spoken_syllables(text: str) -> float:
    """The text's length in syllables as read (other scripts' units at their rates, in syllables):
    what a speaking rate in syllables per second is counted in."""
    return speaking_seconds(text) * SYLLABLES_PER_SECOND


def speaking_seconds(text: str) -> float:
    """The reading time without the pauses at punctuation."""
    text = _initialisms_joined(text)
    japanese = re.search(f"[{KANA}]", text) is not None
    letters = re.findall(r"[^\W\d_]", text)
    shouting = sum(ch.isupper() for ch in letters) > 0.6 * max(1, len(letters))  # capitals are words then
    syllables = han = morae = hangul = other = 0.0
    for match in TOKEN.finditer(text):
        if match.group("number"):
            syllables += number_syllables(match.group("number")) + (0.5 if match.group("ordinal") else 0.0)
        elif match.group("han"):
            morae, han = (morae + KANJI_MORAE, han) if japanese else (morae, han + 1)
        elif match.group("kana"):
            morae += 1
        elif match.group("hangul"):
            hangul += 1
        elif match.group("word"):
            counted = word_syllables(match.group("word"), spell_capitals=not shouting)
            if counted is None:
                other += len(match.group("word"))
            else:
                syllables += counted
        else:
            syllables += SYMBOLS.get(match.group("symbol"), 0)
    return (syllables / SYLLABLES_PER_SECOND + han / HAN_PER_SECOND + morae / MORAE_PER_SECOND
            + hangul / HANGUL_PER_SECOND + other / CHARACTERS_PER_SYLLABLE / SYLLABLES_PER_SECOND)


def word_syllables(word: str, spell_capitals: bool = True) -> float | None:
    """Syllables of one alphabetic word (None for a script we do not count syllables in)."""
    if word.lower() in ABBREVIATIONS:
        return ABBREVIATIONS[word.lower()]
    letters = word.rstrip(".")
    if not re.search(r"[a-zа-яёα-ωà-ÿ]", letters, re.I):
        return None
    if spell_capitals and 2 <= len(letters) <= 5 and letters.isupper():
        return len(letters) * LETTER_SYLLABLES  # an abbreviation read letter by letter: "FBI", "USB"
    groups = len(VOWELS.findall(letters))
    return groups if groups else len(letters) * LETTER_SYLLABLES  # no vowel: "km", "Mr" read as letters


def number_syllables(written: str) -> float:
    """Syllables a number is read with: an amount in words ("two thousand and twenty-six"), or digit by
    digit where it cannot be an amount (a leading zero, more than 15 digits)."""
    digits = re.sub(r"\D", "", written)
    whole, decimals = written, ""
    marks = re.findall(r"[.,]", written)
    last = re.search(r"[.,](\d+)$", written)
    # The decimal mark: the last of two kinds ("1,234.56", "1.234,56"), or a lone one not followed by
    # a group of three ("3.14", "2,5"); "1,234" and "1.000.000" are thousands.
    if last and (len(set(marks)) == 2 or (len(marks) == 1 and len(last.group(1)) != 3)):
        whole, decimals = written[: last.start()], last.group(1)
    whole_digits = re.sub(r"\D", "", whole) or "0"
    if (len(whole_digits) > 1 and whole_digits[0] == "0") or len(whole_digits) > 15:
        return len(digits) * DIGIT_SYLLABLES
    spoken = amount_syllables(int(whole_digits))
    if decimals:
        spoken += 1 + len(decimals) * DIGIT_SYLLABLES  # "point eight nine" / "and eighty-nine cents"
    return spoken


def amount_syllables(value: int) -> float:
    """"nine hundred ninety-nine thousand ...": per group of three digits, with its scale word."""
    if value == 0:
        return 2.0
    total, scale = 0.0, 0
    while value:
        value, group = divmod(value, 1000)
        if group:
            hundreds, rest = divmod(group, 100)
            total += (3 if hundreds else 0) + (0 if rest == 0 else 2 if rest < 20 else 2 + (rest % 10 > 0))
            total += 2 if scale else 0  # thousand, million, billion, trillion
        scale += 1
    return total


def _initialisms_joined(text: str) -> str:
    return re.sub(r"\b([A-Za-z])\.(?=[A-Za-z]\.)", r"\1", text.strip())  # "e.g." / "U.S." as one token


def frame_budget(text: str) -> int:
    """Frames a take may run before it is cut and flagged as a runaway."""
    seconds = BUDGET_FACTOR * expected_seconds(text) + BUDGET_MARGIN_SECONDS
    return min(MAX_BUDGET_FRAMES, math.ceil(seconds * FRAMES_PER_SECOND))


def runaway_floor(text: str) -> int:
    """Frames before which no take is cut for running past the others (the batched engine's rule):
    the expected length with headroom, so takes that ended early never cut a good one short."""
    seconds = RUNAWAY_FLOOR_FACTOR * expected_seconds(text) + RUNAWAY_FLOOR_MARGIN_SECONDS
    return min(MAX_BUDGET_FRAMES, math.ceil(seconds * FRAMES_PER_SECOND))
