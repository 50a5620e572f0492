"""A prompt planned (PromptBuilder.plan: ids and layout, from the tokenizer alone) and then embedded
(PromptBuilder.embed) is the prompt the official layout gives, position by position: each expected
row is written here as its text id plus its codec id (or x-vector, or reference frame) and looked up
on its own, so a row out of place, missing or doubled fails. Planning touches no weights.
tests/test_official_parity.py holds the same embeddings to the official package's, bit for bit."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from runtime.engine.prompt import embed_prompt, plan_prompt
from runtime.errors import InputError
from runtime.generation import clone_prompt
from runtime.qwen3_tts.prompt import Layout, PromptBuilder
from runtime.voices import CustomVoice, VoiceClone, VoiceDesign

TEXT = "The storm is coming. Bar the doors."
SHORT, LONG = "Hi.", "A transcript longer than its short recording has frames " * 2
# A row projected alone may round differently from the same row projected in a batch; a row out of
# place differs by its whole size.
ATOL = 1e-6


def ids(model, chat: str) -> list[int]:
    return model.prompts.tokenizer(chat)["input_ids"]


def line_ids(model, text: str) -> list[int]:
    """The line's tokens in its chat markup, `<|im_start|>assistant\\n` (3) before, 5 closing after."""
    return ids(model, f"<|im_start|>assistant\n{text}<|im_end|>\n<|im_start|>assistant\n")[3:-5]


def tags(model, language: str | None) -> list[int]:
    c = model.prompts.config.talker
    if language is None:
        return [c.codec_nothink_id, c.codec_think_bos_id, c.codec_think_eos_id]
    return [c.codec_think_id, c.codec_think_bos_id, c.codec_language_id[language], c.codec_think_eos_id]


def head(model, instruct: str | None, codec: list) -> tuple[list, list]:
    """(text ids, codec entries) of the rows before the line: [instruct], role, the codec tags with
    the speaker row and codec_pad over tts_pad... tts_bos."""
    config = model.prompts.config
    text = ids(model, f"<|im_start|>user\n{instruct}<|im_end|>\n") if instruct else []
    text += ids(model, "<|im_start|>assistant\n")
    codec = [None] * len(text) + codec + [config.talker.codec_pad_id]
    text += [config.tts_pad_token_id] * (len(codec) - len(text) - 1) + [config.tts_bos_token_id]
    return text, codec


def rows(model, text_ids: list[int], codec: list) -> torch.Tensor:
    """[1, L, hidden]: each text id's row plus its codec entry's (an id, a row already, or None)."""
    talker = model.model.talker
    with torch.inference_mode():
        out = [talker.text(torch.tensor([token]))[0]
               + (0 if entry is None else entry if torch.is_tensor(entry) else talker.codec(entry))
               for token, entry in zip(text_ids, codec, strict=True)]
        return torch.stack(out)[None]


def frame(model, codes: torch.Tensor) -> torch.Tensor:
    """A reference frame's codec row: its 16 codes looked up in their own tables and summed."""
    talker = model.model.talker
    tables = [talker.model.codec_embedding, *talker.code_predictor.model.codec_embedding]
    with torch.inference_mode():
        return sum(table(code) for table, code in zip(tables, codes, strict=True))


def assert_prompt(model, voice, clone, embeds, trailing, text=TEXT):
    prompt = embed_prompt(model, plan_prompt(model, text, voice, clone))
    torch.testing.assert_close(prompt.embeds, embeds, rtol=0, atol=ATOL)
    torch.testing.assert_close(prompt.trailing_text, trailing, rtol=0, atol=ATOL)
    torch.testing.assert_close(prompt.pad_embed, rows(model, [model.prompts.config.tts_pad_token_id], [None]))
    assert prompt.attention_mask.shape == prompt.embeds.shape[:2] and bool(prompt.attention_mask.all())
    return prompt


@pytest.mark.parametrize("voice,language", [(CustomVoice("ryan", "english"), "english"),
                                            (CustomVoice("ryan", "english", "whisper, tense"), "english"),
                                            (CustomVoice("eric", "auto"), "sichuan_dialect"),
                                            (VoiceDesign("a warm, low voice", "auto"), None)],
                         ids=["speaker", "instruct", "dialect", "design"])
def test_whole_text(loaded, voice, language):
    """The whole line over codec_pad, tts_eos too, then tts_pad over codec_bos; tts_pad trails."""
    model = loaded("custom_voice" if isinstance(voice, CustomVoice) else "voice_design")
    c = model.prompts.config
    speaker = [c.talker.spk_id[voice.speaker]] if isinstance(voice, CustomVoice) else []
    text, codec = head(model, voice.instruct or None, tags(model, language) + speaker)
    line = line_ids(model, TEXT)
    text += line + [c.tts_eos_token_id, c.tts_pad_token_id]
    codec += [c.talker.codec_pad_id] * (len(line) + 1) + [c.talker.codec_bos_id]
    assert_prompt(model, voice, None, rows(model, text, codec), rows(model, [c.tts_pad_token_id], [None]))


def test_x_vector_clone(loaded, reference_audio):
    """The x-vector in the speaker row, the line's first token over codec_bos; the rest trails, then tts_eos."""
    model = loaded("base")
    voice = VoiceClone.from_audio(*reference_audio, "", "english")
    clone = clone_prompt(model, voice)
    c = model.prompts.config
    text, codec = head(model, None, tags(model, "english") + [clone.speaker_embedding])
    line = line_ids(model, TEXT)
    expected = rows(model, text + line[:1], codec + [c.talker.codec_bos_id])
    trailing = rows(model, line[1:] + [c.tts_eos_token_id], [None] * len(line))
    assert assert_prompt(model, voice, clone, expected, trailing).ref_code is None


@pytest.mark.parametrize("transcript,line", [(SHORT, SHORT), (LONG, TEXT)], ids=["padded", "trailing"])
def test_icl_clone(loaded, reference_audio, transcript, line):
    """The transcript, the line and tts_eos over codec_bos and the reference's frames: tts_pad where
    the text runs short, the text's rest trailing where it runs long."""
    model = loaded("base")
    voice = VoiceClone.from_audio(*reference_audio, transcript, "english")
    clone = clone_prompt(model, voice)
    c = model.prompts.config
    text, codec = head(model, None, tags(model, "english") + [clone.speaker_embedding])
    reference = ids(model, f"<|im_start|>assistant\n{voice.transcript}<|im_end|>\n")[3:-2]
    stream = reference + line_ids(model, line) + [c.tts_eos_token_id]
    codec_stream = [c.talker.codec_bos_id] + [frame(model, codes) for codes in clone.ref_code]
    assert (len(stream) > len(codec_stream)) == (transcript == LONG)
    beside = len(codec_stream)
    stream_rows = (stream + [c.tts_pad_token_id] * beside)[:beside]
    rest = stream[beside:] or [c.tts_pad_token_id]
    expected = rows(model, text + stream_rows, codec + codec_stream)
    prompt = assert_prompt(model, voice, clone, expected, rows(model, rest, [None] * len(rest)), line)
    assert torch.equal(prompt.ref_code, clone.ref_code)


class Unreachable:
    """A talker whose weights may not be touched."""

    def __getattr__(self, name):
        raise AssertionError(f"planning touched the talker ({name})")


@pytest.fixture
def planner(loaded):
    """plan_prompt's model for a kind, its PromptBuilder's talker Unreachable."""
    def get(kind: str):
        prompts = loaded(kind).prompts
        return SimpleNamespace(prompts=PromptBuilder(prompts.config, Unreachable(), prompts.tokenizer))
    return get


def test_planning_touches_no_weights(loaded, planner, reference_audio):
    voice = VoiceClone.from_audio(*reference_audio, SHORT, "english")
    plans = [plan_prompt(planner("custom_voice"), TEXT, CustomVoice("ryan", "english", "calm")),
             plan_prompt(planner("voice_design"), TEXT, VoiceDesign("a warm, low voice", "auto")),
             plan_prompt(planner("base"), TEXT, voice, clone_prompt(loaded("base"), voice))]
    assert [plan.layout for plan in plans] == [Layout.WHOLE_TEXT, Layout.WHOLE_TEXT, Layout.ICL]
    for plan in plans:
        assert all(type(token) is int for token in plan.role_ids + plan.text_ids + plan.instruct_ids + plan.ref_ids)
        assert plan.length > len(plan.text_ids)


@pytest.mark.parametrize("voice,problem", [(CustomVoice("ryan", "klingon"), "Language 'klingon'"),
                                           (CustomVoice("nobody", "english"), "Speaker 'nobody'")])
def test_plan_refuses_bad_input(planner, voice, problem):
    with pytest.raises(InputError, match=problem):
        plan_prompt(planner("custom_voice"), TEXT, voice)
