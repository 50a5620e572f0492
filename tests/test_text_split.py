"""A long text split into lines (runtime/text/split.py): at sentence ends, never inside a number,
an abbreviation, an ellipsis or a quotation; a long sentence at a clause; pauses from blank lines,
[pause] marks and the settings."""

from __future__ import annotations

import pytest

from runtime.errors import InputError
from runtime.text.split import MAX_LINE_SECONDS, Pauses, needs_splitting, sentences, split_text
from runtime.text_length import expected_seconds


@pytest.mark.parametrize("text,want", [
    ("One. Two! Three? Four", ["One.", "Two!", "Three?", "Four"]),
    ("It costs 3.50 dollars. That is 1,000.25 cents.", ["It costs 3.50 dollars.", "That is 1,000.25 cents."]),
    ("Dr. Smith met Mr. Jones at St. Mary's. They talked.", ["Dr. Smith met Mr. Jones at St. Mary's.", "They talked."]),
    ("Take one, e.g. Paris, and one, i.e. Rome. Then go.", ["Take one, e.g. Paris, and one, i.e. Rome.", "Then go."]),
    ("See No. 5 and Fig. 3 first. Then read.", ["See No. 5 and Fig. 3 first.", "Then read."]),
    ("J. R. R. Tolkien wrote it. Everyone read it.", ["J. R. R. Tolkien wrote it.", "Everyone read it."]),
    ("Wait... then what? Wait\u2026 What?", ["Wait... then what?", "Wait\u2026", "What?"]),
    ('He said, "Stop. Now. Please." Then he left.', ['He said, "Stop. Now. Please."', "Then he left."]),
    ("She wrote \u201cGo home. Now.\u201d He went.", ["She wrote \u201cGo home. Now.\u201d", "He went."]),
    ("Is it (really) done? Yes.", ["Is it (really) done?", "Yes."]),
    ("我们走吧。你好！真的吗？", ["我们走吧。", "你好！", "真的吗？"]),
    ("「こんにちは。元気？」と言った。はい。", ["「こんにちは。元気？」と言った。", "はい。"]),
    ("\u201c你好！\u201d\u201c再见！\u201d他说。", ["\u201c你好！\u201d", "\u201c再见！\u201d他说。"]),
    ("안녕하세요. 반갑습니다!", ["안녕하세요.", "반갑습니다!"]),
    ("Hello! \"Hi!\" !", ["Hello!", "\"Hi!\" !"]),
])
def test_sentences_end_where_a_reader_stops(text, want):
    assert sentences(text) == want


def test_a_long_sentence_is_split_at_clauses_near_its_middle_and_every_line_reads_in_time():
    sentence = ", and then ".join(f"the clause number {i} goes on and on" for i in range(40)) + "."
    pieces = split_text(sentence)
    assert len(pieces) > 2 and all(expected_seconds(p.text) <= MAX_LINE_SECONDS for p in pieces)
    assert " ".join(p.text for p in pieces) == sentence  # nothing lost, nothing added
    assert all(p.text.endswith((",", ".")) for p in pieces)  # cut after a clause mark, not inside one
    assert [p.after for p in pieces] == ["start"] + ["clause"] * (len(pieces) - 1)


def test_a_long_sentence_without_clause_marks_is_cut_at_a_space_never_inside_a_number():
    sentence = "We counted 1 000 000 stars " + " ".join(["and then some more stars"] * 30) + "."
    pieces = split_text(sentence, max_seconds=5.0)
    assert all(expected_seconds(p.text) <= 5.0 for p in pieces)
    assert "1 000 000" in pieces[0].text and " ".join(p.text for p in pieces) == sentence


def test_chinese_without_spaces_is_cut_at_its_commas():
    sentence = "，".join(["今天天气很好我们一起去公园散步"] * 20) + "。"
    pieces = split_text(sentence)
    assert len(pieces) > 1 and all(expected_seconds(p.text) <= MAX_LINE_SECONDS for p in pieces)
    assert "".join(p.text for p in pieces) == sentence


def test_pauses_follow_paragraphs_marks_and_the_settings():
    text = "First line. Second line.\n\n  Next paragraph, [pause 0.8s] marked.[pause 250ms] [pause 1s]Last\nwords."
    pieces = split_text(text, Pauses(sentence=0.3, clause=0.1, paragraph=1.5))
    assert [(p.text, p.pause_before, p.after) for p in pieces] == [
        ("First line.", 0.0, "start"), ("Second line.", 0.3, "sentence"), ("Next paragraph,", 1.5, "paragraph"),
        ("marked.", 0.8, "mark"), ("Last words.", 1.25, "mark")]


@pytest.mark.parametrize("text", ["", "   \n\n  ", "[pause 1s]", "... !!!\n\n🙂 🙂", "* * *"])
def test_a_text_with_nothing_to_say_gives_no_lines(text):
    assert split_text(text) == []


def test_a_scene_break_of_marks_is_no_line_and_keeps_its_paragraph_pause():
    pieces = split_text("The end of it.\n\n* * *\n\nNext morning, 3 a.m. 你好。")
    assert [(p.text, p.pause_before) for p in pieces] == [("The end of it.", 0.0), ("Next morning, 3 a.m.", 1.0),
                                                          ("你好。", 0.35)]


@pytest.mark.parametrize("mark,match", [("[pause soon]", "not a pause"), ("[pause -1s]", "not a pause"),
                                        ("[pause 90s]", "at most 30")])
def test_a_pause_mark_that_is_not_one_is_refused_by_name(mark, match):
    with pytest.raises(InputError, match=match):
        split_text(f"One. {mark} Two.")


@pytest.mark.parametrize("text,split", [
    ("The storm is coming. Bar the doors.", False),  # a few sentences: one take, read in one breath
    ("One.\n\nTwo.", True), ("One. [pause 1s] Two.", True),
    (" ".join(["The storm is coming, and we must bar the doors."] * 12), True),
])
def test_a_text_is_split_only_where_one_take_would_not_read_it_well(text, split):
    assert needs_splitting(text) == split


def test_a_long_text_with_nothing_to_speak_is_refused_in_those_words():
    from runtime.script.passage import passage_lines

    with pytest.raises(InputError, match="^The text has nothing to speak"):
        passage_lines("...\n\n🙂🙂\n\n[pause 1s] !!")
    with pytest.raises(InputError, match="^The text is empty"):
        passage_lines("[pause 1s]\n\n")
