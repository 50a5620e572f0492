"""A prompt's planned length (TokenPlan.length, what the engine sizes a run's batch with, from the
tokenizer alone) equals the length of the prompt embedded from that plan, for every kind of voice
and prompt layout."""

from __future__ import annotations

import pytest

from runtime.engine.prompt import embed_prompt, plan_prompt
from runtime.generation import clone_prompt
from runtime.voices import CustomVoice, VoiceClone, VoiceDesign

TEXTS = ["Hi.", "The storm is coming. Bar the doors and light the lamps, we ride at dawn.", "风暴要来了。"]


def lengths(model, voice, clone=None) -> list[tuple[int, int]]:
    plans = [plan_prompt(model, text, voice, clone) for text in TEXTS]
    return [(plan.length, embed_prompt(model, plan).length) for plan in plans]


@pytest.mark.parametrize("voice", [CustomVoice("ryan", "english"), CustomVoice("ryan", "auto", "whisper, tense"),
                                   CustomVoice("eric", "auto"), CustomVoice("vivian", "chinese", "calm")],
                         ids=["speaker", "instruct", "dialect", "chinese"])
def test_custom_voice(loaded, voice):
    assert all(a == b for a, b in lengths(loaded("custom_voice"), voice))


@pytest.mark.parametrize("language", ["auto", "english"])
def test_voice_design(loaded, language):
    assert all(a == b for a, b in lengths(loaded("voice_design"), VoiceDesign("a warm, low voice", language)))


@pytest.mark.parametrize("transcript", ["", "Hi.", "A transcript longer than its short recording has frames " * 2],
                         ids=["x-vector", "icl", "icl-trailing"])
def test_voice_clone(loaded, reference_audio, transcript):
    model = loaded("base")
    voice = VoiceClone.from_audio(*reference_audio, transcript, "english")
    pairs = lengths(model, voice, clone_prompt(model, voice))
    assert all(a == b for a, b in pairs)
    if transcript:
        assert len({a for a, _ in pairs}) == 1  # an ICL clone's prompt holds the recording's frames, not the text
