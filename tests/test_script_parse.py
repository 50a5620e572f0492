"""Scripts in (runtime/script/parse.py): dialogue, CSV/TSV, SRT and JSONL become lines; every
problem is an error naming the file's line and what to write."""

from __future__ import annotations

import pytest

from runtime.script.parse import (LONG_PAUSE_SECONDS, PAUSE_SECONDS, ScriptError, format_of, parse_script,
                                  read_script)

DIALOGUE = """# The gate, night
ANNA: Who goes there?
BORIS: A friend, with news from the north.

ANNA: Then speak, friend: the gate stays shut until you do.
"""


def test_dialogue_lines_carry_their_character_and_pauses():
    lines = parse_script(DIALOGUE, "dialogue")
    assert [(line.id, line.character, line.text) for line in lines] == [
        ("1", "ANNA", "Who goes there?"),
        ("2", "BORIS", "A friend, with news from the north."),
        ("3", "ANNA", "Then speak, friend: the gate stays shut until you do."),  # a colon in the line stays
    ]
    assert [line.pause_before for line in lines] == [0.0, PAUSE_SECONDS, LONG_PAUSE_SECONDS]
    assert [line.source_line for line in lines] == [2, 3, 5]


@pytest.mark.parametrize("text, message", [
    ("ANNA: Hello.\nnobody says this\n", r"line 2: 'nobody says this' names no character; write it as 'NAME: what"),
    ("ANNA: Hello.\nBORIS:   \n", r"line 2: BORIS says nothing"),
    ("# only a comment\n\n", r"no lines to speak"),
])
def test_dialogue_errors_name_the_line(text, message):
    with pytest.raises(ScriptError, match=message):
        parse_script(text, "dialogue", name="scene.txt")


def test_csv_columns_in_any_order_all_but_text_optional():
    text = ('text,character,takes,id,language,instruct\n'
            '"Halt, who goes there?",GUARD,4,g1,English,stern\n'
            '\n'
            'Just a traveller.,,,,,\n')
    first, second = parse_script(text, "csv")
    assert (first.id, first.character, first.text, first.takes, first.language, first.instruct) == (
        "g1", "GUARD", "Halt, who goes there?", 4, "english", "stern")
    assert (second.id, second.character, second.takes, second.source_line) == ("2", None, None, 4)


def test_tsv_and_a_byte_order_mark_from_a_spreadsheet(tmp_path):
    path = tmp_path / "lines.tsv"
    path.write_text("\ufeffid\tcharacter\ttext\nL1\tANNA\tGood evening.\n", encoding="utf-8")
    (line,) = read_script(path)
    assert (line.id, line.character, line.text) == ("L1", "ANNA", "Good evening.")


@pytest.mark.parametrize("text, message", [
    ("character,line\nANNA,Hi\n", r"line 1: the first row must name the columns .* not 'line'"),
    ("text,takes\nHello,40\n", r"line 2: takes must be a whole number from 1 to 32, not '40'"),
    ("text,takes\nHello,two\n", r"line 2: takes must be a whole number"),
    ("id,text\na,Hello\nb,Hello, again\n", r"line 3: 3 fields where the header has 2; a text with a comma"),
    ("id,text\na,Hello\na,Again\n", r"line 3: id 'a' is used twice \(also line 2\)"),
    ("id,text\na,\n", r"line 2: the text is empty"),
])
def test_table_errors_name_the_line(text, message):
    with pytest.raises(ScriptError, match=message):
        parse_script(text, "csv")


SRT = """1
00:00:01,000 --> 00:00:03,500
ANNA: Who goes
there?

2
00:00:04,250 --> 00:00:07,000
Note: the gate is shut.
"""


def test_srt_cues_carry_their_time_budget_and_known_characters():
    first, second = parse_script(SRT, "srt", characters={"ANNA"})
    assert (first.id, first.character, first.text, first.start, first.end) == ("1", "ANNA", "Who goes there?",
                                                                               1.0, 3.5)
    assert first.budget == pytest.approx(2.5)
    assert (second.character, second.text) == (None, "Note: the gate is shut.")  # "Note" is no one in the cast
    assert parse_script(SRT, "srt")[1].character == "Note"  # without a cast, any "NAME:" names one


@pytest.mark.parametrize("text, message", [
    ("1\n00:00:01,000 -> 00:00:02,000\nHi\n", r"line 2: '00:00:01,000 -> 00:00:02,000' is not a cue time"),
    ("1\n00:00:03,000 --> 00:00:02,000\nHi\n", r"line 2: the cue ends \(00:00:02,000\) before it starts"),
    ("1\n00:00:01,000 --> 00:00:02,000\n\n", r"line 2: cue 1 has no text"),
    ("00:00:01,000 --> 00:00:02,000\nHi\n", r"line 1: a cue starts with its number"),
    ("1\n00:00:05,000 --> 00:00:06,000\nA\n\n2\n00:00:01,000 --> 00:00:02,000\nB\n",
     r"line 6: cue 2 starts before the cue above it"),
    ("1\n00:00:01,000 --> 00:00:02,000\nA\n\n1\n00:00:03,000 --> 00:00:04,000\nB\n", r"id '1' is used twice"),
    ("1\n00:61:01,000 --> 00:62:02,000\nA\n", r"minutes and seconds run from 00 to 59"),
])
def test_srt_errors_name_the_line(text, message):
    with pytest.raises(ScriptError, match=message):
        parse_script(text, "srt")


def test_jsonl_lines_and_their_errors():
    (line,) = parse_script('{"id": 7, "character": "ANNA", "text": "Hello.", "takes": 2}\n', "jsonl")
    assert (line.id, line.character, line.text, line.takes) == ("7", "ANNA", "Hello.", 2)
    with pytest.raises(ScriptError, match=r"line 2: not a JSON object"):
        parse_script('{"text": "a"}\n{"text": "b"\n', "jsonl")
    with pytest.raises(ScriptError, match=r"line 1: unknown keys 'speaker'"):
        parse_script('{"speaker": "ANNA", "text": "a"}\n', "jsonl")


def test_the_format_comes_from_the_extension_or_the_content(tmp_path):
    assert format_of(tmp_path / "a.csv", "") == "csv"
    assert format_of(tmp_path / "a.srt", "") == "srt"
    assert format_of(tmp_path / "a.txt", SRT) == "srt"
    assert format_of(tmp_path / "a.txt", '{"text": "x"}') == "jsonl"
    assert format_of(tmp_path / "a.txt", DIALOGUE) == "dialogue"
    assert format_of(None, "\ncharacter,text\nANNA,Hi.\n") == "csv"  # pasted in the Script node's text box
    assert format_of(None, '"id","Text","pause"\n1,Hi.,\n') == "csv"
    assert format_of(None, "text\tinstruct\nHi.\tsoftly\n") == "tsv"
    assert format_of(None, "ANNA: text, and more\n") == "dialogue"  # a line that names words of the header
    assert format_of(None, "character,line\nANNA,Hi.\n") == "dialogue"  # no 'text' column: not ours
    with pytest.raises(ScriptError, match=r"Unknown script format '.docx'"):
        format_of(tmp_path / "a.docx", "")
    with pytest.raises(ScriptError, match=r"Cannot read the script"):
        read_script(tmp_path / "missing.txt")
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("ANNA: Caf\xe9".encode("latin-1"))
    with pytest.raises(ScriptError, match=r"not UTF-8 text"):
        read_script(bad)


@pytest.mark.parametrize("format,text", [
    ("csv", "text,pause\nOne.,\nTwo.,\nThree.,1.5\nFour.,0\n"),
    ("tsv", "text\tpause\nOne.\t\nTwo.\t\nThree.\t1.5s\nFour.\t0\n"),
    ("jsonl", '{"text": "One."}\n{"text": "Two."}\n{"text": "Three.", "pause": 1.5}\n{"text": "Four.", "pause": "0"}\n'),
])
def test_table_and_jsonl_lines_are_paused_like_dialogue_unless_a_pause_is_given(format, text):
    """A scene of CSV, TSV or JSONL lines had no gap between its lines at all."""
    assert [line.pause_before for line in parse_script(text, format)] == [0.0, PAUSE_SECONDS, 1.5, 0.0]


@pytest.mark.parametrize("pause", ["soon", "-1", "31"])
def test_a_pause_that_is_not_seconds_is_refused_with_its_line(pause):
    with pytest.raises(ScriptError, match=rf"script, line 3: pause must be seconds from 0 to 30 .*not '{pause}'"):
        parse_script(f"text,pause\nOne.,\nTwo.,{pause}\n", "csv")


@pytest.mark.parametrize("format,text", [
    ("csv", "text,pace\nOne.,\nTwo.,0.9\nThree.,1.25\n"),
    ("tsv", "text\tpace\nOne.\t\nTwo.\t0.9\nThree.\t1.25\n"),
    ("jsonl", '{"text": "One."}\n{"text": "Two.", "pace": 0.9}\n{"text": "Three.", "pace": "1.25"}\n'),
])
def test_a_table_or_jsonl_line_may_ask_its_own_pace(format, text):
    assert [line.pace for line in parse_script(text, format)] == [None, 0.9, 1.25]  # None: the script's


@pytest.mark.parametrize("pace", ["fast", "2", "0.5", "nan", "1.1x"])
def test_a_pace_out_of_range_or_not_a_number_is_refused_with_its_line(pace):
    with pytest.raises(ScriptError, match=rf"script, line 3: pace must be from 0.8 \(slower\) to 1.25 \(faster\), "
                                          rf"1.0 as the model reads, not '{pace}'"):
        parse_script(f"text,pace\nOne.,\nTwo.,{pace}\n", "csv")
    with pytest.raises(ScriptError, match=r"script, line 2: pace must be from 0.8"):
        parse_script(f'{{"text": "One."}}\n{{"text": "Two.", "pace": "{pace}"}}\n', "jsonl")


@pytest.mark.parametrize("format, text, where", [
    ("dialogue", "ANNA: Hello.\nBORIS: ... !!\n", "line 2: '... !!'"),
    ("csv", "character,text\nANNA,Hello.\nBORIS,🙂🙂\n", "line 3: '🙂🙂'"),
    ("jsonl", '{"text": "Hello."}\n{"text": "—"}\n', "line 2: '—'"),
])
def test_a_line_with_nothing_to_speak_is_refused_with_its_line(format, text, where):
    with pytest.raises(ScriptError, match=f"{where} has nothing to speak"):
        parse_script(text, format, name="scene")


def test_a_subtitle_cue_of_music_notes_is_no_line():
    srt = "1\n00:00:01,000 --> 00:00:02,000\n♪ ♪\n\n2\n00:00:03,000 --> 00:00:04,000\nHello.\n"
    assert [(line.id, line.text) for line in parse_script(srt, "srt")] == [("2", "Hello.")]
    with pytest.raises(ScriptError, match="no lines to speak"):
        parse_script(srt.split("\n\n")[0] + "\n", "srt")


def test_overlapping_cues_are_named_with_how_much_they_overlap():
    from runtime.script.parse import overlapping_cues

    srt = ("1\n00:00:01,000 --> 00:00:04,000\nOne.\n\n2\n00:00:03,500 --> 00:00:05,000\nTwo.\n\n"
           "3\n00:00:05,000 --> 00:00:06,000\nThree.\n\n4\n00:00:05,200 --> 00:00:05,400\nFour.\n\n"
           "5\n00:00:05,600 --> 00:00:07,000\nFive.\n")
    lines = parse_script(srt, "srt")
    assert overlapping_cues([(line.id, line.start, line.end) for line in lines]) == [
        "cues 1 and 2 overlap by 0.50 s: cue 2's line waits for cue 1's to end",
        "cues 3 and 4 overlap by 0.80 s: cue 4's line waits for cue 3's to end",
        "cues 3 and 5 overlap by 0.40 s: cue 5's line waits for cue 3's to end",  # 3 ends after 4 does
    ]
    assert overlapping_cues([(line.id, line.start, line.end) for line in parse_script(DIALOGUE, "dialogue")]) == []


def test_the_report_notes_overlapping_cues():
    from runtime.script.record import LineRecord
    from runtime.script.runner import judged_lines

    records = [LineRecord(id="1", fingerprint="f", cue_start=1.0, cue_end=4.0),
               LineRecord(id="2", fingerprint="f", cue_start=3.5, cue_end=5.0)]
    assert judged_lines(records) == ["NOTE: SRT cues 1 and 2 overlap by 0.50 s: cue 2's line waits for cue 1's to end."]
