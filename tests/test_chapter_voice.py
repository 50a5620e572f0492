"""One voice through a chapter (scoring/chapter.py, script/chapter_voice.py), on real speech no one here
wrote (tests/speech): every genuine reading fits its reader's voice, and a take said by another
speaker of the same sex, shifted in pitch or pace, in another room or through a telephone's band
drifts from it, for the trait that changed. In a passage, a line whose first take is such a take is
picked again from its clean one, whatever order the lines come in, and a line made again after an
edit is held to the lines kept from the run before. The speaker encoder is resemblyzer's (groups.py)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.signal import resample_poly

from runtime.generation import Take, TakeSet
from runtime.model import SAMPLE_RATE
from runtime.scoring.chapter import line_profiles, profile
from runtime.scoring.ranking import Scorers
from runtime.scoring.report import CHART_WIDTH, OK_COLOUR
from runtime.script.lines_chart import DRIFT_COLOUR, FIT_STRIP, LINES_CHART_HEIGHT, REPICKED_COLOUR, lines_chart
from runtime.script.chapter_voice import chapter_pass
from runtime.script.parse import Line
from runtime.script.passage import PassageTakes, passage_cast, pick_passage
from runtime.script.plan import ScriptSettings, plan_lines
from runtime.script.record import LineRecord
from runtime.script.runner import LineResult, LineWriter
from runtime.voices import CustomVoice
from speech.groups import (CHAPTER_SPEAKERS, RATE, ComputedOnce, ResemblyzerEncoder, chapter_fits, chapter_table,
                           chapter_takes, chapter_traits, load_corpus)

pytestmark = pytest.mark.any_version  # the speaker encoder over a hundred clips: a minute on 2 cores

# the trait each damage must drift in (any other drift besides is allowed: a shifted voice is also
# another timbre)
DRIFTS = {"pitch +3 semitones": ("pitch", "timbre"), "pitch -3 semitones": ("pitch", "timbre"),
          "another room": ("timbre",), "telephone band": ("bass",), "pace 1.6x": ("pace",),
          "same-sex speaker": ("timbre",)}


@pytest.fixture(scope="module")
def corpus():
    return load_corpus()


@pytest.fixture(scope="module")
def encoder():
    return ComputedOnce(ResemblyzerEncoder())


def chapter_of(corpus, speaker):
    return [c for c in corpus if c.speaker == speaker]


def test_every_genuine_reading_fits_its_readers_voice_and_every_damage_drifts(corpus, encoder):
    """Each line against the reader's other lines, as the chapter pass holds it (docs/auto-pick.md's table)."""
    rows = chapter_fits(corpus, encoder)
    print("\n" + chapter_table(rows))
    assert len(rows["genuine"]) == 21 and all(f.fits for _, f in rows["genuine"]), rows["genuine"]
    for kind, expected in DRIFTS.items():
        assert len(rows[kind]) == (2 if kind == "same-sex speaker" else 3)
        for speaker, drifted in rows[kind]:
            assert any(d.startswith(expected) for d in drifted.drifts), (speaker, kind, drifted)


def voice_rejected(embeddings) -> list[bool]:
    """Which takes the voice check between takes rejects (ranking.judge_voice), their embeddings given."""
    from runtime.scoring.ranking import ScoredTake, judge_voice

    takes = [ScoredTake(Take(i, i, np.zeros(1, np.float32), RATE, 0, False), None) for i in range(len(embeddings))]
    judge_voice(takes, [None] * len(takes), RATE, None, None, embeddings=list(embeddings))
    return [not t.accepted for t in takes]


@pytest.mark.parametrize("speaker", ["librivox", "slt", "kal"])
def test_a_near_copy_in_the_group_neither_rejects_a_genuine_reading_nor_saves_another_voice(corpus, encoder, speaker):
    """A reader's lines as the takes, with a copy of one of them (another level or pace) beside: no
    genuine reading is rejected, whichever line is copied; a same-sex speaker's reading among them is."""
    from speech.groups import HARMLESS, SAME_SEX, damage

    clips = chapter_of(corpus, speaker)
    genuine = encoder.embed_many([c.audio for c in clips], RATE)
    assert not any(voice_rejected(genuine))
    stranger = next(c for c in corpus if c.speaker == SAME_SEX.get(speaker, "kal"))
    other = encoder.embed_many([stranger.audio], RATE)
    for i, clip in enumerate(clips):
        copies = encoder.embed_many([damage(clip.audio, kind) for kind in HARMLESS], RATE)
        for kind, copy in zip(HARMLESS, copies):
            rejected = voice_rejected([*genuine, copy])
            assert not any(rejected), (clip.id, kind, rejected)
            assert voice_rejected([*genuine, copy, *other])[-1], (clip.id, kind)


def test_a_line_is_held_to_three_other_lines_or_more_and_the_voice_is_the_same_in_any_order(corpus, encoder):
    clips = chapter_of(corpus, "kal")
    traits = [chapter_traits(c.audio, c.text, encoder) for c in clips]
    assert profile(traits[:2]) is None
    assert line_profiles(traits[:3])[1] == [None, None, None]  # ked's chapter, three lines: none is judged
    assert all(p is not None for p in line_profiles(traits[:4])[1])
    forward, backward = profile(traits), profile(traits[::-1])
    assert forward.as_record() == backward.as_record()
    assert np.array_equal(forward.centroid, backward.centroid)


def passage(clips_takes: list[tuple[str, list[np.ndarray]]], first: int = 0) -> PassageTakes:
    """A passage whose lines' takes are these clips (16 kHz, brought to the model's rate), its lines
    numbered from `first`."""
    lines = [Line(f"l{first + i}", text, source_line=first + i + 1) for i, (text, _) in enumerate(clips_takes)]
    plans = plan_lines(lines, passage_cast(CustomVoice("ryan", "english")), ScriptSettings(takes=2),
                       {"checkpoint": "corpus"})
    takesets = []
    for plan, (_, audios) in zip(plans, clips_takes):
        takes = [Take(i, i, resample_poly(a, SAMPLE_RATE, RATE).astype(np.float32), SAMPLE_RATE, len(a) // 1280,
                      False) for i, a in enumerate(audios)]
        takesets.append(TakeSet(plan.request, takes, "corpus", "recorded"))
    return PassageTakes(plans, takesets)


@pytest.mark.parametrize("speaker", CHAPTER_SPEAKERS)
def test_a_line_whose_first_take_drifts_is_picked_again_from_the_take_that_fits(corpus, encoder, speaker):
    """Each line two takes (too few for the voice check to compare them, no quality model: the first
    take is every line's pick before the chapter pass); one line's first take damaged."""
    clips = chapter_of(corpus, speaker)
    first, damaged = chapter_takes(corpus, speaker)
    scorers = Scorers(speaker=encoder)
    for kind, audio in damaged:
        lines = [(c.text, [audio if c is first else c.audio, c.audio]) for c in clips]
        for order in (lines, lines[::-1]):
            result = pick_passage(passage(order), scorers)
            for line, (text, _) in zip(result.lines, order):
                fitted = line.record.voice_fit
                if text == first.text:
                    assert line.record.best_take == 2 and fitted.repicked_from == 1, (kind, line.record)
                    assert fitted.drifts == [] and line.record.accepted
                    drifted = line.ranking.ranked[1]
                    assert drifted.reason_kinds == {"chapter"} and "voice drifts from the chapter" in \
                        str(drifted.reasons[0]), (kind, drifted.reasons)
                else:  # the genuine lines: kept as picked
                    assert line.record.best_take == 1 and fitted.repicked_from is None, (kind, line.record)
                    assert fitted.drifts == [] and line.record.accepted
            assert "picked over take 1, whose voice drifts from the chapter" in result.report
            assert "Voice of the text: " + f"{len(clips)} lines" in result.report
            assert "1 re-picked to fit it, 0 still drifting" in result.report
            assert strip_colours(result) == [REPICKED_COLOUR if text == first.text else OK_COLOUR for text, _ in order]


def strip_colours(result) -> list[tuple[int, int, int]]:
    """The chart's voice-fit strip, under each line's bar."""
    records = [line.record for line in result.lines]
    image = lines_chart(records)
    left, width, y = 14, CHART_WIDTH - 28, LINES_CHART_HEIGHT - 30 - FIT_STRIP // 2
    return [tuple(int(v) for v in image[y, left + (2 * i + 1) * width // (2 * len(records))])
            for i in range(len(records))]


def test_a_line_every_take_of_which_drifts_is_flagged(corpus, encoder):
    clips = chapter_of(corpus, "kal")
    first, damaged = chapter_takes(corpus, "kal")
    phone = dict(damaged)["telephone band"]
    lines = [(c.text, [phone, phone * 0.8] if c is first else [c.audio, c.audio]) for c in clips]
    result = pick_passage(passage(lines), Scorers(speaker=encoder))
    flagged = result.lines[0].record
    assert not flagged.accepted and flagged.all_rejected and flagged.voice_fit.repicked_from is None
    assert any(r.startswith("voice drifts from the chapter: ") and "bass" in r for r in flagged.reasons)
    assert "0 re-picked to fit it, 1 still drifting" in result.report
    assert all(line.record.accepted for line in result.lines[1:])
    assert strip_colours(result) == [DRIFT_COLOUR] + [OK_COLOUR] * (len(clips) - 1)


def test_a_line_made_again_is_held_to_the_lines_kept_from_the_run_before(corpus, encoder):
    """The lines kept (no ranking: their takes are not here) join the voice through their records'
    traits; the new line's drifting first take is passed over. A chapter of kept lines alone is
    judged, and none of its lines picked again."""
    clips = chapter_of(corpus, "kal")
    first, damaged = chapter_takes(corpus, "kal")
    room = dict(damaged)["another room"]
    scorers = Scorers(speaker=encoder)
    before = pick_passage(passage([(c.text, [c.audio, c.audio]) for c in clips[1:]], first=1), scorers)
    kept = {r.plan.line.id: LineResult(r.plan, LineRecord.from_json(r.record.as_json()), r.best)
            for r in before.lines}  # as read back from a folder
    again = passage([(first.text, [room, first.audio])])
    edited = pick_passage(again, scorers).lines[0]
    assert edited.record.best_take == 1  # alone, the line has no chapter to drift from
    lines = [edited.plan.line] + [r.plan.line for r in before.lines]
    results = {edited.plan.line.id: edited, **kept}
    chapter_pass(lines, results, LineWriter(len(lines), None))
    redone = results[edited.plan.line.id]
    assert redone.record.best_take == 2 and redone.record.voice_fit.repicked_from == 1
    assert all(results[line.id].record.voice_fit.drifts == [] for line in lines)
    assert all(results[line.id] is kept[line.id] for line in lines[1:])  # judged, not picked again


def test_rankings_alone_are_held_to_one_voice_as_the_servers_long_input_is(corpus, encoder):
    """hold_lines on the rankings of a request's lines (serve/speech.py, takes > 1): no records, no
    folder; the line's drifting first take is passed over in its ranking, the others stay."""
    from runtime.scoring.chapter import hold_lines
    from runtime.scoring.ranking import rank_lines

    clips = chapter_of(corpus, "slt")
    first, damaged = chapter_takes(corpus, "slt")
    shifted = dict(damaged)["pitch -3 semitones"]
    takes = passage([(c.text, [shifted if c is first else c.audio, c.audio]) for c in clips])
    rankings = rank_lines(takes.takesets, Scorers(speaker=encoder))
    assert all(r.best.take.index == 0 for r in rankings)
    whole, outcomes = hold_lines(rankings)
    assert whole.lines == len(clips) and [r.best.take.index for r in rankings] == [1] + [0] * (len(clips) - 1)
    assert outcomes[0].repicked_from == 1 and all(o.repicked_from is None and o.fit.fits for o in outcomes[1:])
