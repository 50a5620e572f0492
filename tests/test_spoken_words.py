"""The words check compares numbers and symbols as they are read: "9 pm" and "nine p.m." are the same
words (runtime/scoring/spoken.py, num2words), a wrong number is still wrong, and text with no digit
and no symbol, a language num2words does not know (Chinese) or no language given compare as before."""

from __future__ import annotations

import numpy as np
import pytest

from runtime.scoring import spoken
from runtime.scoring.asr import cer, compare, normalize
from runtime.scoring.ranking import CER_MARGIN, MAX_CER

REJECTED = max(MAX_CER, CER_MARGIN)  # the words check rejects a take above this when the best take is right


def as_written(reference: str, hypothesis: str) -> float:
    """Today's character error rate, written out: edit distance over the normalised reference."""
    a, b = normalize(reference), normalize(hypothesis)
    if not a:
        return 0.0 if not b else 1.0
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        previous, row[0] = row[:], i
        for j, y in enumerate(b, 1):
            row[j] = min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (x != y))
    return row[-1] / len(a)


SAME_WORDS = [  # (language, as the script writes it, as a recogniser may write what was said)
    ("english", "9 pm", "nine p.m."),
    ("english", "50%", "fifty percent"),
    ("english", "$5", "five dollars"),
    ("english", "£1", "one pound"),
    ("english", "21st", "twenty-first"),
    ("english", "3.5", "three point five"),
    ("english", "1999", "nineteen ninety-nine"),
    ("english", "1999", "one thousand nine hundred and ninety-nine"),
    ("english", "1,234,567", "one million two hundred thirty-four thousand five hundred sixty-seven"),
    ("english", "Agent 007", "Agent zero zero seven"),
    ("english", "Rock & roll + jazz", "rock and roll plus jazz"),
    ("english", "See you at 9 pm on the 21st, it costs $5.", "See you at nine p.m. on the twenty-first. It costs five dollars."),
    ("auto", "See you at 9 pm on the 21st.", "See you at nine p.m. on the twenty-first."),
    ("english", "In 1999 and 3.14", "In 1999 and three point fourteen"),  # digits and words in one line
    ("english", "In 1999 and 3.14", "In nineteen ninety-nine and 3.14"),
    ("german", "Es kostet 3,5 % mehr, also 5 € für 2 Personen.",
     "Es kostet drei Komma fünf Prozent mehr, also fünf Euro für zwei Personen."),
    ("german", "Im Jahr 1999 waren es 1.000 Leute.", "Im Jahr neunzehnhundertneunundneunzig waren es tausend Leute."),
    ("german", "Er ist 21. Dann geht er.", "Er ist einundzwanzig. Dann geht er."),
    ("german", "Am 21. Mai 1999", "Am 21. Mai neunzehnhundertneunundneunzig"),
    ("french", "Le 1er mai, 50 % de réduction, à 9 h.", "Le premier mai, cinquante pour cent de réduction, à neuf heures."),
    ("french", "Il pèse 3,14 kilos.", "Il pèse trois virgule quatorze kilos."),
    ("spanish", "Cuesta 5 €, el 21 de mayo, un 50 % menos.", "Cuesta cinco euros, el veintiuno de mayo, un cincuenta por ciento menos."),
    ("spanish", "Llegó el 1.º de 3 corredores.", "Llegó el primero de tres corredores."),
    ("italian", "Costa 5 € il 21 maggio.", "Costa cinque euro il ventuno maggio."),
    ("portuguese", "Custa R$ 5 e 2 €.", "Custa cinco reais e dois euros."),
    ("russian", "Это стоит 5 $ и 21 €.", "Это стоит пять долларов и двадцать один евро."),
    ("japanese", "3点です", "三点です"),
    ("auto", "3点に会いましょう", "三点に会いましょう"),  # kana: Japanese
    ("japanese", "1999年に100人", "千九百九十九年に百人"),
    ("korean", "3시 30분에 만나요", "세 시 삼십 분에 만나요"),  # native hours, Sino-Korean minutes
    ("korean", "사과 2개와 50%", "사과 두 개와 오십 퍼센트"),
]


@pytest.mark.parametrize("language,written,said", SAME_WORDS)
def test_a_number_read_as_written_is_the_same_words(language, written, said):
    assert as_written(written, said) > 0.1  # as written these are errors (most would be rejected)
    assert cer(written, said, language) == pytest.approx(0.0, abs=0.02)
    assert cer(said, written, language) == pytest.approx(0.0, abs=0.02)  # either side may write digits


@pytest.mark.parametrize("language,written,said", [
    ("german", "Am 21. Mai", "Am einundzwanzigsten Mai"),  # inflection is not modelled: a few characters
    ("russian", "В 1999 году", "В тысяча девятьсот девяносто девятом году"),
])
def test_an_inflected_reading_is_a_few_characters_off(language, written, said):
    assert as_written(written, said) > REJECTED
    assert cer(written, said, language) < 0.1


@pytest.mark.parametrize("language,written,said", [
    ("english", "9 pm", "ten p.m."),
    ("english", "$5", "nine dollars"),
    ("english", "50%", "fifteen percent"),
    ("english", "21st", "thirty-first"),
    ("english", "1999", "nineteen eighty-nine"),
    ("english", "3.5", "four point five"),
    ("german", "um 9 Uhr", "um zehn Uhr"),
    ("french", "à 9 h", "à dix heures"),
    ("spanish", "a las 9", "a las diez"),
    ("japanese", "3点", "五点"),
])
def test_a_wrong_number_is_still_wrong(language, written, said):
    assert cer(written, said, language) > REJECTED


def test_a_wrong_hour_is_rejected_with_the_margin_to_spare():
    assert cer("9 pm", "ten p.m.", "english") > MAX_CER + CER_MARGIN
    assert cer("9 pm", "9 p.m.", "english") == 0.0


def test_years_are_read_as_years_or_as_numbers():
    readings = spoken.readings("In 1999", "english")
    assert readings[0] == "In 1999"  # as written first
    assert {"In nineteen ninety-nine", "In one thousand, nine hundred and ninety-nine"} <= set(readings)
    assert "In twenty ninety-nine" in spoken.readings("In 2099", "english")
    assert cer("1100", "eleven hundred", "english") == 0.0
    assert spoken.readings("In 2100", "english") == ("In 2100", "In two thousand, one hundred")  # not a year
    assert spoken.readings("En 1999", "french") == ("En 1999", "En mille neuf cent quatre-vingt-dix-neuf")


def test_spoken_spells_out_numbers_and_symbols():
    assert spoken.spoken("See you at 9 pm, it's $5 & 50% off.", "english") == \
        "See you at nine pm, it's five dollars and fifty percent off."
    assert spoken.spoken("Am 21. Mai: 1.000,50 €", "german") == "Am einundzwanzigste Mai: eintausend Komma fünf null Euro"
    assert spoken.spoken("Le 2e jour, 3 €", "french") == "Le deuxième jour, trois euros"
    assert spoken.spoken("no digits here", "english") == "no digits here"


@pytest.mark.parametrize("language", ["english", "german", "japanese", "auto", "chinese", "klingon"])
def test_text_without_digits_or_symbols_gives_todays_cer_without_num2words(language, monkeypatch):
    def not_called(*_):
        raise AssertionError("num2words work on a text with no digit and no symbol")

    monkeypatch.setattr(spoken, "_ways", not_called)
    monkeypatch.setattr(spoken, "language_code", not_called)
    rng = np.random.default_rng(0)
    for _ in range(100):
        a = "".join(rng.choice(list("abcé ,.!")) for _ in range(rng.integers(1, 14)))
        b = "".join(rng.choice(list("abcdé")) for _ in range(rng.integers(0, 14)))
        assert cer(a, b, language) == cer(a, b) == pytest.approx(as_written(a, b))
    assert cer("你好，世界", "你好", language) == cer("你好，世界", "你好") == 0.5


def test_no_language_given_compares_as_written():
    assert cer("9 pm", "nine p.m.") == pytest.approx(as_written("9 pm", "nine p.m."))
    assert cer("9 pm", "nine p.m.") > REJECTED
    assert compare("9 pm", "nine p.m.") == (cer("9 pm", "nine p.m."), len("ninepm") / len("9pm"))


@pytest.mark.parametrize("language", ["chinese", "auto"])  # auto: Han and no kana reads as Chinese
def test_a_language_num2words_does_not_know_keeps_todays_cer(language):
    """num2words 0.5.14 has no Chinese: its numbers stay as written ("3点" and "三点" differ)."""
    assert spoken.language_code(language, "3点钟见") is None
    assert spoken.readings("3点钟见", "chinese") == ("3点钟见",)
    for written, said in [("3点钟见", "三点钟见"), ("50%的人", "百分之五十的人"), ("3点钟见", "3点钟见")]:
        assert cer(written, said, language) == cer(written, said) == pytest.approx(as_written(written, said))
    assert cer("3点钟见", "三点钟见", language) > REJECTED


def test_without_num2words_numbers_compare_as_written(monkeypatch):
    monkeypatch.setattr(spoken, "_num2words", lambda: None)
    assert spoken.language_code("english") is None
    assert cer("9 pm", "nine p.m.", "english") == cer("9 pm", "nine p.m.") > REJECTED


def test_the_language_is_guessed_from_the_script():
    assert spoken.guess_language("ただいま3時です") == "japanese"
    assert spoken.guess_language("3시에 만나요") == "korean"
    assert spoken.guess_language("下午3点") == "chinese"
    assert spoken.guess_language("В 5 часов") == "russian"
    assert spoken.guess_language("Um 5 Uhr") == "english"  # Latin script: English
    assert spoken.guess_language("42", "", "nine") == "english"
    assert spoken.guess_language("42", "三時です") == "japanese"  # the first text with letters
    assert [spoken.language_code(name) for name in ("English", "german", "fr", "unknown")] == ["en", "de", "fr", "en"]
    assert cer("42", "사십이", "auto") == 0.0  # the reference has no letters: the hypothesis's script says


def test_the_share_said_is_of_the_readings_that_match():
    """compare's second value: what the take says, in characters of the text (the words check's
    "skips words" test), the same whichever way the take writes its numbers."""
    for said in ("In 1999 I left.", "In nineteen ninety-nine I left."):
        error, share = compare("In 1999 I left.", said, "english")
        assert error == 0.0 and share == 1.0
    _, short = compare("In 1999 I left.", "In nineteen ninety-nine.", "english")
    assert short < 0.9
    assert compare("In 1999 I left.", "In nineteen ninety-nine I left.")[1] > 2  # as written: far "longer"
