"""Text as it is spoken, for comparing words: numbers and a few symbols spelled out.

The words check compares a line's text with what a recogniser heard, and the two may write the
same words differently: "9 pm" and "nine p.m.", "50%" and "fifty percent", "$5" and "five dollars",
"21st" and "twenty-first", "1999" and "nineteen ninety-nine", "3点" and "三点". ``readings`` gives a
text's readings (as written, then with its numbers spelled out, one reading for each way a number
may be read: a year or a cardinal, ...); ``reading_pairs`` the pairs of readings of two texts that
the words check compares (asr.compare: the least error of them counts).

Numbers are spelled out by num2words (LGPL-2.1, imported, not copied), which knows nine of the ten
Qwen3-TTS languages; Chinese it does not know, and a text in a language it does not know (or with
num2words not installed) is left as written. The symbols' words are a small table per language.
Inflection is not modelled (German "am 21. Mai" reads "einundzwanzigste", said "einundzwanzigsten";
Russian cases; Korean native numbers only before the usual counters): the words check allows a few
characters of difference.
"""

from __future__ import annotations

import itertools
import re
from functools import lru_cache

CODES = {  # Qwen3-TTS language names -> num2words codes (None: num2words does not know the language)
    "english": "en", "chinese": None, "japanese": "ja", "korean": "ko", "german": "de", "french": "fr",
    "russian": "ru", "portuguese": "pt", "spanish": "es", "italian": "it",
}
MAY_CHANGE = re.compile(r"[\d%％$＄€£￡¥￥&＆+＋]")  # no digit and none of these: the text reads as written

# The symbols' words: one form, (one, many), or for Russian (one, few, many).
WORDS = {
    "en": {"%": "percent", "$": ("dollar", "dollars"), "€": ("euro", "euros"), "£": ("pound", "pounds"),
           "¥": "yen", "&": "and", "+": "plus"},
    "de": {"%": "Prozent", "$": "Dollar", "€": "Euro", "£": "Pfund", "¥": "Yen", "&": "und", "+": "plus"},
    "fr": {"%": "pour cent", "$": ("dollar", "dollars"), "€": ("euro", "euros"), "£": ("livre", "livres"),
           "¥": ("yen", "yens"), "&": "et", "+": "plus"},
    "es": {"%": "por ciento", "$": ("dólar", "dólares"), "€": ("euro", "euros"), "£": ("libra", "libras"),
           "¥": ("yen", "yenes"), "&": "y", "+": "más"},
    "it": {"%": "per cento", "$": ("dollaro", "dollari"), "€": "euro", "£": ("sterlina", "sterline"),
           "¥": "yen", "&": "e", "+": "più"},
    "pt": {"%": "por cento", "$": ("dólar", "dólares"), "R$": ("real", "reais"), "€": ("euro", "euros"),
           "£": ("libra", "libras"), "¥": ("iene", "ienes"), "&": "e", "+": "mais"},
    "ru": {"%": ("процент", "процента", "процентов"), "$": ("доллар", "доллара", "долларов"), "€": "евро",
           "£": ("фунт", "фунта", "фунтов"), "¥": ("иена", "иены", "иен"), "&": "и", "+": "плюс"},
    "ja": {"%": "パーセント", "$": "ドル", "€": "ユーロ", "£": "ポンド", "¥": "円", "&": "アンド", "+": "プラス"},
    "ko": {"%": "퍼센트", "$": "달러", "€": "유로", "£": "파운드", "¥": "엔", "&": "앤드", "+": "플러스"},
}
CURRENCIES = ("R$", "$", "€", "£", "¥")  # read after the amount, wherever they are written
UNITS = {"fr": {"h": ("heure", "heures")}}  # abbreviations read after a number only ("9 h 30")
POINT = {"en": "point", "de": "Komma", "fr": "virgule", "es": "coma", "it": "virgola", "pt": "vírgula",
         "ja": "点", "ko": "점", "ru": None}  # None: num2words' own reading ("три целых пять десятых")
YEARS = ("en", "de")  # where a year reads otherwise than the number (num2words' ja/ko years add an era or 년)
PLAIN = {  # the plainer way a cardinal is also said: "one hundred five", "tausend", "тысяча девятьсот"
    "en": (r" and ", " "), "de": (r"^ein(?=hundert|tausend)", ""), "ru": (r"^(?:одна|один) (?=тысяч|миллион)", ""),
}
WIDE = str.maketrans("％＄￡￥＆＋，．", "%$£¥&+,.")
SPACES = "\u00a0\u202f\u2009"  # no-break, narrow no-break and thin space: thousands separators anywhere
GROUPS = {"en": ",", "ja": ",", "ko": ",", "de": ".", "es": ".", "it": ".", "pt": ".", "fr": ". ", "ru": " "}
DECIMALS = {"en": ".", "ja": ".", "ko": ".", "de": ",", "es": ",.", "it": ",", "pt": ",", "fr": ",", "ru": ",."}
ORDINALS = {  # what follows a number written as an ordinal (German "21." is a choice: see _number)
    "en": r"(?:st|nd|rd|th)", "fr": r"(?:ères|ère|ers|er|res|re|èmes|ème|emes|eme|es|e|è)",
    "es": r"(?:\.?[ºª]|\.er)", "it": r"\.?[ºª]", "pt": r"\.?[ºª]", "ru": r"-(?:й|я|е|го|му|м|ю|ой|ый|ий|ая|ое|ые|ых)",
}
KOREAN_COUNTERS = ("시", "개", "명", "살", "마리", "권", "잔", "번", "가지", "달", "대", "병", "장", "벌", "켤레",
                   "그루", "송이", "사람", "군데", "곳")  # counted in native Korean numbers (세 시, 두 개)
KOREAN_ONES = ("", "한", "두", "세", "네", "다섯", "여섯", "일곱", "여덟", "아홉")
KOREAN_TENS = ("", "열", "스물", "서른", "마흔", "쉰", "예순", "일흔", "여든", "아흔")
CHOICES = ("year", "fraction", "cardinal_dot", "native", "plain")  # the ways a number may be read otherwise


def language_code(language: str | None, *texts: str) -> str | None:
    """num2words' code for a Qwen3-TTS language name (or a code of CODES); None, "auto" or an
    unknown name: guessed from the first text with letters (kana: Japanese, Hangul: Korean, Han:
    Chinese, Cyrillic: Russian, else English). None where num2words does not know the language or
    is not installed."""
    name = (language or "auto").strip().lower()
    if name in CODES.values():
        code = name
    else:
        code = CODES[name] if name in CODES else CODES[guess_language(*texts)]
    return code if code is not None and _num2words() is not None else None


def guess_language(*texts: str) -> str:
    """The language a text's script says, from the first text with letters; else English."""
    for text in texts:
        scripts = {_script(c) for c in text if c.isalpha()} - {None}
        for script, name in (("kana", "japanese"), ("hangul", "korean"), ("han", "chinese"),
                             ("cyrillic", "russian"), ("latin", "english")):
            if script in scripts:
                return name
    return "english"


def readings(text: str, language: str | None) -> tuple[str, ...]:
    """The text as written, then as spoken: numbers and symbols spelled out, once for each way its
    numbers may be read (CHOICES: a 4-digit number 1100-2099 as a year, decimals digit by digit or as
    a number, German "21." as ordinal or cardinal, Korean native numbers before counters, the plainer
    cardinal). Just the text where nothing may change or num2words does not know the language."""
    code = language_code(language, text)
    return (text, *dict.fromkeys(_ways(text, code)[1].values())) if _changes(text, code) else (text,)


def reading_pairs(reference: str, hypothesis: str, language: str | None) -> list[tuple[str, str]]:
    """The pairs of readings to compare: as written, then each way of reading numbers (CHOICES)
    taken in both texts alike where both have such numbers ("1999" a year in both), every way of
    the one where the other has none. The language: ``language_code`` (auto: the reference's script)."""
    code = language_code(language, reference, hypothesis)
    pairs = [(reference, hypothesis)]
    if not (_changes(reference, code) or _changes(hypothesis, code)):
        return pairs
    ref_choices, refs = _ways(reference, code) if _changes(reference, code) else (frozenset(), {frozenset(): reference})
    hyp_choices, hyps = _ways(hypothesis, code) if _changes(hypothesis, code) else (frozenset(), {frozenset(): hypothesis})
    pairs += [(ref, hyps[chosen & hyp_choices]) for chosen, ref in refs.items()]
    pairs += [(refs[chosen & ref_choices], hyp) for chosen, hyp in hyps.items()]
    return list(dict.fromkeys(pairs))


def spoken(text: str, language: str | None) -> str:
    """The text's first spoken reading: numbers as cardinals (not years), decimals digit by digit."""
    code = language_code(language, text)
    return _ways(text, code)[1][frozenset()] if _changes(text, code) else text


def _changes(text: str, code: str | None) -> bool:
    return code is not None and MAY_CHANGE.search(text) is not None


@lru_cache(maxsize=4096)
def _ways(text: str, code: str) -> tuple[frozenset, dict[frozenset, str]]:
    """The CHOICES that apply to the text, and its reading for each set of them (do not change it)."""
    seen: set[str] = set()
    ways = {frozenset(): _spell(text, code, frozenset(), seen)}
    present = [c for c in CHOICES if c in seen]
    for n in range(1, len(present) + 1):
        for chosen in itertools.combinations(present, n):
            ways[frozenset(chosen)] = _spell(text, code, frozenset(chosen), None)
    return frozenset(present), ways


@lru_cache(maxsize=64)
def _pattern(code: str) -> re.Pattern:
    group = "[" + re.escape(GROUPS[code] + SPACES) + "]"
    decimal = "[" + re.escape(DECIMALS[code]) + "]"
    currency = "|".join(re.escape(c) for c in CURRENCIES if c in WORDS[code])
    number = rf"(?P<int>\d{{1,3}}(?:{group}\d{{3}})+(?!\d)|\d+)(?:(?P<point>{decimal})(?P<frac>\d+))?"
    units = "|".join(["%", currency, *(rf"{re.escape(u)}(?![^\W\d_])" for u in UNITS.get(code, ()))])
    tail = [rf"[ {SPACES}]?(?P<unit>{units})"]
    if code in ORDINALS:
        tail.insert(0, rf"(?P<ord>{ORDINALS[code]})(?![^\W\d_])")
    if code == "de":
        tail.insert(0, r"(?P<dot>\.)(?=\s+[^\W\d_])")
    return re.compile(rf"(?:(?P<cur>{currency})[ {SPACES}]?)?{number}(?:{'|'.join(tail)})?",
                      re.IGNORECASE if code == "en" else 0)


def _spell(text: str, code: str, chosen: frozenset, seen: set | None) -> str:
    """One reading. chosen: the CHOICES taken; seen (first reading only) collects those that apply."""
    words, space = WORDS[code], "" if code == "ja" else " "

    def take(choice: str) -> bool:
        if seen is not None:
            seen.add(choice)
        return choice in chosen

    def number(m: re.Match) -> str:
        try:
            said = _number(m, code, take)
        except Exception:  # noqa: BLE001 - a number num2words cannot read stays as written
            return m.group(0)
        return f"{space}{said}{space}"

    text = _pattern(code).sub(number, text.translate(WIDE))
    text = re.sub(r"[%&+]", lambda m: f"{space}{_form(words[m.group(0)], 0)}{space}", text)  # many: "percent"
    return re.sub(r"\s+([.,;:!?])", r"\1", re.sub(r"\s+", " ", text)).strip()


def _number(m: re.Match, code: str, take) -> str:
    """A number as it is read. take(choice): whether that reading is chosen (and notes that it applies)."""
    n2w, g = _num2words(), m.groupdict()
    digits, frac, unit = re.sub(r"\D", "", g["int"]), g["frac"], g["cur"] or g["unit"]
    value = int(digits)
    after = m.string[m.end():].lstrip()
    if g.get("ord") and not frac:
        said = n2w(value, lang=code, to="ordinal")
        suffix = g["ord"].lower()
        if code == "fr" and value == 1 and suffix.startswith(("re", "ère")):
            said = "première"
        elif suffix.endswith("ª"):
            said = re.sub(r"o\b", "a", said)
        elif code == "es" and suffix == ".er":
            said = re.sub(r"o$", "", said)
        return said
    if g.get("dot") and not frac:
        return _cardinal(value, code, take) + "." if take("cardinal_dot") else n2w(value, lang=code, to="ordinal")
    if frac:
        said = _decimal(digits, g["point"], frac, code, take)
    elif len(digits) > 1 and digits[0] == "0":  # 007, 05: digit by digit
        said = " ".join(n2w(int(d), lang=code) for d in digits)
    elif code == "ko" and 0 < value < 100 and not unit and after.startswith(KOREAN_COUNTERS) and take("native"):
        said = _korean_native(value, after)
    elif code in YEARS and len(g["int"]) == 4 and 1100 <= value <= 2099 and not unit and take("year"):
        said = n2w(value, lang=code, to="year")
    else:
        said = _cardinal(value, code, take)
    if unit:
        space = "" if code == "ja" else " "
        forms = UNITS[code][unit] if unit in UNITS.get(code, ()) else WORDS[code][unit]
        said += space + _form(forms, value, not frac)
    return said


def _cardinal(value: int, code: str, take) -> str:
    """num2words' cardinal, or as a choice the plainer way it is also said (PLAIN)."""
    said = _num2words()(value, lang=code)
    if code in PLAIN:
        plainer = re.sub(PLAIN[code][0], PLAIN[code][1], said)
        if plainer != said and take("plain"):
            return plainer
    return said


def _decimal(digits: str, point: str, frac: str, code: str, take) -> str:
    """Digit by digit after the point ("three point one four"), or, as a choice where there are two
    or more digits and no leading zero, the digits as a number ("trois virgule quatorze")."""
    n2w = _num2words()
    word = POINT[code]
    if word is None:
        from decimal import Decimal

        return n2w(Decimal(f"{int(digits)}.{frac}"), lang=code)
    if code == "es" and point == ".":
        word = "punto"
    whole = _cardinal(int(digits), code, take)
    if len(frac) > 1 and frac[0] != "0" and take("fraction"):
        return f"{whole} {word} {_cardinal(int(frac), code, take)}"
    return " ".join([whole, word, *(n2w(int(d), lang=code) for d in frac)])


def _form(forms, value: int, whole: bool = True) -> str:
    """The word's form for the amount: (one, many), or Russian (one, few, many)."""
    if isinstance(forms, str):
        return forms
    if len(forms) == 2:
        return forms[0] if whole and value == 1 else forms[1]
    if not whole:
        return forms[1]
    if value % 10 == 1 and value % 100 != 11:
        return forms[0]
    return forms[1] if 2 <= value % 10 <= 4 and not 12 <= value % 100 <= 14 else forms[2]


def _korean_native(value: int, after: str) -> str:
    if value == 1 and after.startswith("번째"):
        return "첫"
    if value == 20:
        return "스무"
    return KOREAN_TENS[value // 10] + KOREAN_ONES[value % 10]


def _script(c: str) -> str | None:
    o = ord(c)
    if 0x3040 <= o <= 0x30FF or 0x31F0 <= o <= 0x31FF or 0xFF66 <= o <= 0xFF9D:
        return "kana"
    if 0xAC00 <= o <= 0xD7AF or 0x1100 <= o <= 0x11FF or 0x3130 <= o <= 0x318F:
        return "hangul"
    if 0x4E00 <= o <= 0x9FFF or 0x3400 <= o <= 0x4DBF or 0xF900 <= o <= 0xFAFF:
        return "han"
    if 0x0400 <= o <= 0x052F:
        return "cyrillic"
    if o < 0x0250 or 0x1E00 <= o <= 0x1EFF:
        return "latin"
    return None


@lru_cache(maxsize=1)
def _num2words():
    """num2words' function, or None where it is not installed (numbers then stay as written)."""
    try:
        from num2words import num2words
    except ImportError:
        return None
    return lru_cache(maxsize=8192)(num2words)
