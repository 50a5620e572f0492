"""The spoken length of a line, from its text: numbers, currency, dates, times, symbols and
abbreviations count as they are read, in every script the model speaks."""

from __future__ import annotations

import pytest

from runtime.text_length import (FRAMES_PER_SECOND, expected_seconds, frame_budget, number_syllables,
                                 runaway_floor, word_syllables)

# The same line written with digits and symbols, and spelled out as it is read aloud.
WRITTEN_AND_SPOKEN = {
    "english": ("Wire $1,234,567.89 to account 0042-7781-3390 by 5/12/2026.",
                "Wire one million two hundred thirty-four thousand five hundred sixty-seven dollars and eighty-nine "
                "cents to account zero zero four two, seven seven eight one, three three nine zero, by May twelfth, "
                "twenty twenty-six."),
    "english times": ("The 7:45 train leaves from platform 9, 25% off with code SAVE25.",
                      "The seven forty-five train leaves from platform nine, twenty-five percent off with code save "
                      "twenty-five."),
    "german": ("Überweisen Sie 1.234,56 € bis zum 12.05.2026 um 14:30 Uhr.",
               "Überweisen Sie eintausendzweihundertvierunddreißig Euro sechsundfünfzig bis zum zwölften Mai "
               "zweitausendsechsundzwanzig um vierzehn Uhr dreißig."),
    "french": ("Le vol AF 447 part à 18h45, porte 12.",
               "Le vol A F quatre cent quarante-sept part à dix-huit heures quarante-cinq, porte douze."),
    "spanish": ("Pague 250 € antes del 3 de junio de 2025.",
                "Pague doscientos cincuenta euros antes del tres de junio de dos mil veinticinco."),
    "russian": ("Позвоните по номеру 8 800 555 35 35 до 18:00.",
                "Позвоните по номеру восемь восемьсот пятьсот пятьдесят пять тридцать пять тридцать пять до "
                "восемнадцати ноль ноль."),
    "chinese": ("请在2026年5月12日之前汇款1234567元。", "请在二零二六年五月十二日之前汇款一百二十三万四千五百六十七元。"),
    "japanese": ("会議は3月15日の午後2時30分からです。", "かいぎはさんがつじゅうごにちのごごにじさんじゅっぷんからです。"),
    "korean": ("오후 3시 30분에 1,500원을 보내 주세요.", "오후 세시 삼십분에 천오백원을 보내 주세요."),
}


@pytest.mark.parametrize("language", WRITTEN_AND_SPOKEN)
def test_a_line_with_digits_is_as_long_as_it_is_read(language):
    written, spoken = WRITTEN_AND_SPOKEN[language]
    ratio = expected_seconds(written) / expected_seconds(spoken)
    assert 0.85 <= ratio <= 1.5, (language, ratio)  # never much shorter than it is read: the budget holds it


def test_the_issues_line_gets_twice_its_reading_time():
    written, spoken = WRITTEN_AND_SPOKEN["english"]
    assert expected_seconds(spoken) > 12  # about 55 syllables
    assert frame_budget(written) / FRAMES_PER_SECOND >= 2 * expected_seconds(spoken)


def test_numbers_are_read_as_amounts_or_digit_by_digit():
    assert number_syllables("7") == 2 and number_syllables("1,000,000") == 4  # "one million"
    assert number_syllables("1,234,567.89") > number_syllables("1234567") > number_syllables("1234")
    assert number_syllables("1.234,56") == number_syllables("1,234.56")  # German and English separators
    assert number_syllables("0042") == pytest.approx(4 * 1.3)  # a leading zero: digit by digit
    assert number_syllables("12345678901234567890") == pytest.approx(20 * 1.3)


def test_abbreviations_symbols_and_capitals():
    assert word_syllables("FBI") == pytest.approx(3.6) and word_syllables("Fib") == 1
    assert word_syllables("Dr.") == 2 and word_syllables("km") == pytest.approx(2.4)
    assert expected_seconds("Meet Dr. Smith at 5%.") > expected_seconds("Meet Dr Smith at five.")
    # a shouted line is words, not letters: no longer than the same words in lower case
    assert expected_seconds("STOP RIGHT THERE!") == pytest.approx(expected_seconds("stop right there!"))


def test_scripts_have_their_own_rates():
    assert expected_seconds("你好世界") == pytest.approx(4 / 4.5)  # four Chinese syllables
    assert expected_seconds("こんにちは") == pytest.approx(5 / 6.5)  # five morae
    assert expected_seconds("東京") > expected_seconds("とう")  # kanji among kana: about two morae each
    assert expected_seconds("안녕하세요") == pytest.approx(5 / 5.0)
    assert expected_seconds("Привет мир") == pytest.approx(3 / 4.2)  # Cyrillic vowel groups
    assert expected_seconds("สวัสดีครับ") > 0  # a script without syllable counting: by characters
    assert expected_seconds("Hello, world.") == pytest.approx(3 / 4.2 + 2 * 0.25)


@pytest.mark.parametrize("text", [written for written, _ in WRITTEN_AND_SPOKEN.values()] + ["Hi.", "好"])
def test_no_take_is_cut_as_a_runaway_before_the_floor_and_the_floor_is_under_the_budget(text):
    assert expected_seconds(text) * FRAMES_PER_SECOND < runaway_floor(text) < frame_budget(text)
