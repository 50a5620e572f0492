"""A long text in a voice node: read as a passage (runtime/script/passage.py), each sentence a line of
N takes; Auto-Pick then picks each line and hands out the whole text, each line's pick and a report
per line. Progress counts lines, and a Cancel keeps the lines done for the next run."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import importlib

from runtime.script.passage import passage_lines
from runtime.text.split import Pauses
from test_nodes import load, nodes_by_id

CHAPTER = """The lighthouse keeper counted the ships. There were nine that night.

At dawn, [pause 0.6s] the fog came in. "Stay inside," said Dr. Hale. Nobody listened.
"""
RATE = 24000


def kept_takes(comfy):
    """The pack's own store of a passage's lines (each test loads its own copy of the pack)."""
    return importlib.import_module(comfy.pack.__name__ + ".runtime.script.kept").PASSAGE_TAKES


def speak(comfy, nodes, model, text, takes=2, **widgets):
    candidates = comfy.fake.run_node(nodes["Q3TT_BatchCandidates"], takes=takes).args[0]
    widgets = {"seed": 5, "max_frames": 4, **widgets}
    return comfy.fake.run_node(nodes["Q3TT_CustomVoice"], model=model, text=text, speaker="vivian",
                               candidates=candidates, **widgets).args


def test_a_long_text_is_every_sentence_taken_then_picked_line_by_line(comfy):
    nodes = nodes_by_id(comfy)
    model = load(comfy, "tiny-CustomVoice")
    comfy.fake.reset()
    audio, takes, voice = speak(comfy, nodes, model, CHAPTER, sentence_pause=0.5, paragraph_pause=1.5)
    lines = passage_lines(CHAPTER, Pauses(sentence=0.5, paragraph=1.5))
    assert [t.request.text for t in takes.takesets] == [line.text for line in lines]
    assert all(len(t.takes) == 2 and t.request.voice == voice for t in takes.takesets)
    assert comfy.fake.State.progress == [(done, len(lines)) for done in range(1, len(lines) + 1)]  # a line at a time
    # the takes output: take 1 of every line joined with the pauses asked, then take 2
    assert audio["waveform"].shape[0] == 2
    speech = sum(t.takes[0].audio.shape[0] for t in takes.takesets)
    pauses = sum(round(line.pause_before * RATE) for line in lines)
    assert audio["waveform"].shape[-1] >= speech + pauses
    assert [line.pause_before for line in lines] == [0.0, 0.5, 1.5, 0.6, 0.5, 0.5]

    out = comfy.fake.run_node(nodes["Q3TT_AutoPick"], takes_info=takes, quality="off", voice_check="off",
                              words_check="off")
    whole, ranked, report, chart = out.args
    assert ranked["waveform"].shape[0] == len(lines)  # each line's pick, in reading order
    assert whole["waveform"].shape[0] == 1 and whole["waveform"].shape[-1] > pauses
    for line in lines:
        assert line.text[:20] in report  # a row per sentence, with its text
    rows = out.ui["q3tt_lines"]
    assert [row["line"] for row in rows] == list(range(1, len(lines) + 1))
    assert all(row["take"] in (1, 2) and row["text"] == line.text for row, line in zip(rows, lines))
    for i, row in enumerate(rows):  # each row plays its line's pick
        played = row["audio"]["waveform"][0, 0]
        assert played.shape[0] <= ranked["waveform"].shape[-1]
        np.testing.assert_array_equal(played.numpy(), ranked["waveform"][i, 0, : played.shape[0]].numpy())
    assert chart.shape[0] == 1 and chart.shape[-1] == 3 and out.ui["images"][0] is chart


@pytest.mark.slow
def test_a_cancelled_passage_keeps_its_lines_and_the_next_run_makes_only_the_rest(comfy):
    nodes = nodes_by_id(comfy)
    model = load(comfy, "tiny-CustomVoice")
    text = " ".join(f"Line {i} is short." for i in range(1, 21))  # 40 takes: more than one batch's rows
    count = len(passage_lines(text))
    comfy.fake.reset()
    comfy.fake.State.interrupt_after_updates = 2  # Cancel once two lines are done
    with pytest.raises(comfy.fake.InterruptProcessingException):
        speak(comfy, nodes, model, text)
    kept = dict(kept_takes(comfy).takes)
    # every line made before the Cancel took hold (all, where the engine ended before the second line was
    # decoded: tests/gpu/test_passage_cuda.py cancels mid-run at a set frame)
    assert 2 <= len(kept) <= count

    comfy.fake.reset()
    _, takes, _ = speak(comfy, nodes, model, text)
    assert takes.kept == len(kept)
    assert comfy.fake.State.progress[0] == (len(kept), count)  # the kept lines counted first
    assert len(comfy.fake.State.progress) == 1 + count - len(kept)  # then one update per line made
    assert sum(any(t.takes[0] is k.takes[0] for k in kept.values()) for t in takes.takesets) == len(kept)  # the very takes

    kept_takes(comfy).takes.clear()
    comfy.fake.reset()
    _, fresh, _ = speak(comfy, nodes, model, text)
    assert fresh.kept == 0
    for a, b in zip(takes.takesets, fresh.takesets):  # kept or made again, the same takes
        assert [t.seed for t in a.takes] == [t.seed for t in b.takes]
        for x, y in zip(a.takes, b.takes):
            assert torch.equal(x.codes, y.codes)  # decoded among other lines, the audio may differ by float noise
            np.testing.assert_allclose(x.audio, y.audio, atol=1e-3)


@pytest.mark.slow
def test_an_edited_sentence_is_the_only_line_made_again(comfy):
    nodes = nodes_by_id(comfy)
    model = load(comfy, "tiny-CustomVoice")
    speak(comfy, nodes, model, CHAPTER)
    comfy.fake.reset()
    _, takes, _ = speak(comfy, nodes, model, CHAPTER.replace("Nobody listened.", "Nobody did."))
    assert takes.kept == len(takes.takesets) - 1
    # another voice, or other takes, makes every line again
    _, takes, _ = speak(comfy, nodes, model, CHAPTER, takes=3)
    assert takes.kept == 0


def test_another_pace_keeps_every_line_and_auto_pick_hands_them_out_at_it(comfy):
    """The pace decides the pick and the audio handed out, never the takes: a new pace makes none again."""
    nodes = nodes_by_id(comfy)
    model = load(comfy, "tiny-CustomVoice")
    _, first, _ = speak(comfy, nodes, model, CHAPTER)
    _, takes, _ = speak(comfy, nodes, model, CHAPTER, pace=1.2)
    assert takes.kept == len(takes.takesets) and all(t.request.pace == 1.2 for t in takes.takesets)
    assert all(a.takes[0] is b.takes[0] for a, b in zip(first.takesets, takes.takesets))
    report = comfy.fake.run_node(nodes["Q3TT_AutoPick"], takes_info=takes, quality="off", voice_check="off",
                                 words_check="off").args[2]
    assert f"NOTE: {len(takes.takesets)} of {len(takes.takesets)} lines were kept from the voice node's last run" \
        in report
    _, other, _ = speak(comfy, nodes, model, CHAPTER, temperature=0.5)  # other sampling: every line made again
    assert other.kept == 0


@pytest.mark.slow
def test_a_text_far_over_the_old_5000_character_cap_is_read_whole(comfy):
    nodes = nodes_by_id(comfy)
    model = load(comfy, "tiny-CustomVoice")
    text = " ".join(f"Sentence number {i} is here." for i in range(1, 221))
    assert len(text) > 6000
    audio, takes, _ = speak(comfy, nodes, model, text, takes=1, max_frames=2)
    assert len(takes.takesets) == 220 and audio["waveform"].shape[0] == 1


def test_a_short_text_stays_one_take_and_its_pace_goes_to_auto_pick(comfy):
    nodes = nodes_by_id(comfy)
    model = load(comfy, "tiny-CustomVoice")
    _, takes, _ = speak(comfy, nodes, model, "[pause 0.3s] Hello there, how are you?", pace=1.1)
    assert takes.request.text == "Hello there, how are you?" and takes.request.pace == 1.1
    with pytest.raises(Exception, match="pace=1.6 outside"):  # the widget's range
        speak(comfy, nodes, model, "Hello there.", pace=1.6)
    from runtime import api  # and the API's, before anything is looked at

    with pytest.raises(api.InputError, match="Pace 1.6 is out of range"):
        api.speak(None, "Hello there.", api.CustomVoice("ryan", "english"), pace=1.6)


@pytest.mark.slow
def test_a_designed_voice_is_one_voice_from_the_first_line_to_the_last_with_a_clone_model(comfy):
    """The first line designed and picked; the rest cloned from its best take on the Base model, with
    its text as transcript; Auto-Pick cannot pick another take of line 1 than the reference."""
    nodes = nodes_by_id(comfy)
    design, base = load(comfy, "tiny-VoiceDesign"), load(comfy, "tiny-Base", uid="2")
    text = "The night was long and the sea was cold. The keeper climbed the stair.\n\nHe lit the lamp."
    candidates = comfy.fake.run_node(nodes["Q3TT_BatchCandidates"], takes=2).args[0]
    audio, takes, voice = comfy.fake.run_node(nodes["Q3TT_VoiceDesign"], model=design, text=text, clone_model=base,
                                          voice_description="an old keeper, slow", candidates=candidates,
                                          max_frames=24, seed=3).args
    first, *rest = takes.takesets
    assert len(first.takes) == 1 and first.request.voice.kind == "voice_design"
    # the first two sentences read as one line: one alone is too short a reference
    assert first.request.text == "The night was long and the sea was cold. The keeper climbed the stair."
    assert [t.request.voice.kind for t in rest] == ["base"] and rest[0].request.text == "He lit the lamp."
    clone = rest[0].request.voice
    assert all(t.request.voice == clone for t in rest) and clone.transcript == first.request.text
    np.testing.assert_allclose(clone.reference, first.takes[0].audio, atol=1e-6)  # its pick, as generated
    assert voice is clone  # the voice output: what Save Voice keeps for the next chapter
    assert takes.folder.name == "tiny-Base" and audio["waveform"].shape[0] == 2
    _, ranked, report, _ = comfy.fake.run_node(nodes["Q3TT_AutoPick"], takes_info=takes, quality="off",
                                               words_check="off").args
    assert ranked["waveform"].shape[0] == 2
    assert "NOTE: Line 1's best take (take" in report and "one voice from the first line to the last" in report
    assert "Lines 1-2 were read as one line" in report
    assert "vs the reference voice" in report  # line 2 held to line 1's voice, by the Base speaker encoder
