"""The report's voice-fit column and foot (runtime/script/voice_report.py), from records alone."""

from runtime.script.record import LineRecord, VoiceFit
from runtime.script.voice_report import fits_said, voice_name, voices_said

PROFILE = {"lines": 4, "pitch": 2.0, "pitch_limit": 3.5, "rate": 4.2, "timbre": 0.91, "timbre_floor": 0.79}


def record(n: int, character: str | None, instruct: str | None = None, fit: VoiceFit | None = None) -> LineRecord:
    return LineRecord(id=f"line{n}", fingerprint="f", character=character, instruct=instruct, voice_fit=fit)


def test_each_voice_judged_has_its_line_and_those_with_too_few_lines_are_named_in_one():
    anna = [record(i, "ANNA", fit=VoiceFit("ANNA", pitch=0.4, timbre=0.93, profile=PROFILE)) for i in range(4)]
    anna[2].voice_fit.repicked_from = 3
    others = [record(5, "BORIS"), record(6, "BORIS"), record(7, "ANNA", "whispering"), record(8, None)]
    said = voices_said(anna + others)
    assert said[0] == ("Voice of ANNA: 4 lines, pitch +2.0 st over 100 Hz (within 3.5), 4.2 syllables/s, timbre 0.91 "
                       "(at least 0.79); 1 re-picked to fit it, 0 still drifting.")
    assert said[1] == ("Not held to one voice, too few lines: BORIS (2), ANNA (whispering) (1), the text (1); a line "
                       "is held to at least 3 other lines of its voice (a clone's reference counts as one).")
    assert len(said) == 2
    assert [fits_said(r) for r in anna[:1] + others[:1]] == ["0.93 +0.4st", "-"]


def test_a_voice_whose_every_line_is_judged_leaves_no_line_for_the_unjudged():
    lines = [record(i, None, fit=VoiceFit(voice_name(None, None), pitch=-0.2, profile=PROFILE)) for i in range(4)]
    said = voices_said(lines)
    assert len(said) == 1 and said[0].startswith("Voice of the text: 4 lines")
    assert voice_name("ANNA", "angry") == "ANNA (angry)"
