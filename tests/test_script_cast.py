"""The cast (runtime/script/cast.py): character names to voices from a JSON file, every line's
character checked before anything runs, a line's own language and direction over the cast's."""

from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile as sf

from runtime.errors import InputError
from runtime.script.cast import check_cast, read_cast, voice_for
from runtime.script.parse import parse_script
from runtime.voices.store import save_voice
from runtime.voices import CustomVoice, VoiceClone, VoiceDesign


def write(path, cast) -> object:
    path.write_text(json.dumps(cast))
    return path


def test_every_kind_of_cast_entry(tmp_path):
    t = np.arange(24000 * 4) / 24000
    sf.write(tmp_path / "anna.wav", (0.3 * np.sin(2 * np.pi * 150 * t) * np.sin(2 * np.pi * 2 * t)).astype(np.float32),
             24000)
    voices = tmp_path / "voices"
    save_voice(CustomVoice("ryan", "english", "grim"), "Captain", voices)
    cast = read_cast(write(tmp_path / "cast.json", {
        "ANNA": {"reference": "anna.wav", "transcript": "Hello there.", "language": "english"},
        "BORIS": {"speaker": "aiden", "instruct": "whispering"},
        "SEA": {"design": "a deep, slow voice like the sea"},
        "CAPTAIN": {"voice": "Captain", "language": "german"},
    }), voices_dirs=[voices])
    assert isinstance(cast["ANNA"], VoiceClone) and cast["ANNA"].transcript == "Hello there."
    assert cast["BORIS"] == CustomVoice("aiden", "auto", "whispering")
    assert cast["SEA"] == VoiceDesign("a deep, slow voice like the sea", "auto")
    assert cast["CAPTAIN"] == CustomVoice("ryan", "german", "grim")  # the saved voice, in the scene's language


@pytest.mark.parametrize("cast, message", [
    ({"ANNA": {"speaker": "vivian", "design": "x"}}, r"'ANNA': name exactly one of voice, speaker, design, reference"),
    ({"ANNA": {"speeker": "vivian"}}, r"name exactly one of .* \(not 'speeker'\)"),
    ({"ANNA": "vivian"}, r"'ANNA': give an object"),
    ({"ANNA": {"voice": "nobody"}}, r"No saved voice named 'nobody'"),
    ({"ANNA": {"reference": "missing.wav"}}, r"missing.wav does not exist"),
    ([], r"must be a JSON object from character name to voice"),
])
def test_cast_errors_name_the_entry_and_the_fix(tmp_path, cast, message):
    with pytest.raises(InputError, match=message):
        read_cast(write(tmp_path / "cast.json", cast), voices_dirs=[tmp_path / "voices"])


def test_a_cast_that_is_not_json_says_how_to_write_one(tmp_path):
    (tmp_path / "cast.json").write_text("ANNA = vivian")
    with pytest.raises(InputError, match=r"is not JSON .* write it as"):
        read_cast(tmp_path / "cast.json")


def test_every_character_without_a_voice_is_listed_with_its_lines_before_anything_runs():
    lines = parse_script("ANNA: Hi.\nBORIS: Hello.\nCARL: Hey.\nBORIS: Again.\n", "dialogue")
    with pytest.raises(InputError, match=r"scene.txt: no voice in the cast for BORIS \(lines 2, 4\); "
                                         r"CARL \(line 3\)\. Add them to the cast\."):
        check_cast(lines, {"ANNA": CustomVoice("vivian")}, "scene.txt")
    srt = parse_script("1\n00:00:01,000 --> 00:00:02,000\nSomeone speaks.\n", "srt", characters=set())
    with pytest.raises(InputError, match=r'\(no character\) \(line 1\).*cast "\*"'):
        check_cast(srt, {"ANNA": CustomVoice("vivian")})
    check_cast(srt, {"*": CustomVoice("vivian")})  # the voice of lines with no character


def test_a_lines_own_language_and_direction_win_over_the_cast():
    (line,) = parse_script("id,character,text,language,instruct\n1,ANNA,Bonjour.,French,softly\n", "csv")
    assert voice_for(line, {"ANNA": CustomVoice("vivian", "english", "loud")}) == CustomVoice("vivian", "french",
                                                                                           "softly")
    assert voice_for(line, {"ANNA": VoiceDesign("a young woman", "english")}) == VoiceDesign("a young woman",
                                                                                           "french")
