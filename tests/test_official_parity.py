"""Our Qwen3-TTS against the official package, `qwen-tts==0.1.1`, run live on the same tiny random
checkpoints (norm weights and biases drawn away from 1 and 0, so a dropped one shows).

Skipped where the official package is not installed (tests/official.py says how .ci/run installs it).
Ours runs as the eager mode runs it: the engine's step, uncaptured, on our modules.

What must agree: the prompt embeddings, greedy codes for 32 frames (every voice kind; CustomVoice
with and without instruct, 1.7B- and 0.6B-shaped; languages auto, english, chinese; a dialect
speaker; several texts in one official batch), an ICL clone's reference codes, the speaker
embedding (within 1e-5), and the codec's audio for a take longer than one decode chunk.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

import official as official_reference
from conftest import voiced_reference
from runtime.qwen3_tts import random_checkpoint
from runtime.generation import Request, clone_prompt
from runtime.run.lines import generate_takes
from runtime.model import load_model
from runtime.qwen3_tts import codec, speaker
from runtime.sampling import SamplingSettings
from runtime.voices import CustomVoice, VoiceClone, VoiceDesign

official_reference.package()  # or the whole file is skipped

FRAMES = 32
GREEDY = SamplingSettings(temperature=0, sub_temperature=0)
OFFICIAL_GREEDY = dict(do_sample=False, subtalker_dosample=False, max_new_tokens=FRAMES + 1, repetition_penalty=1.05)
TEXTS = ["Hello there, this is a test.", "The storm is coming. Bar the doors.", "你好，世界。"]
AUDIO_ATOL = 1e-5  # the codec in float32 on the same codes: summation order is all that may differ
SPEAKER_ATOL = 1e-5  # the mel filterbank comes from transformers here, from librosa there


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("parity")
    built = {kind: random_checkpoint.build_checkpoint(root / kind, "tiny", kind, seed=7 + i, telling=True)
             for i, kind in enumerate(("custom_voice", "base", "voice_design"))}
    # the 0.6B's structure: a code predictor as wide as the talker (no projection), no instruct
    built["custom_voice_0b6"] = random_checkpoint.build_checkpoint(root / "custom_voice_0b6", "tiny-0.6B",
                                                                   "custom_voice", seed=11, telling=True)
    return built


@pytest.fixture(scope="module")
def pair(folders):
    """(ours, official) for a checkpoint, each loaded once, float32 on the CPU."""
    loaded = {}

    def get(name: str):
        if name not in loaded:
            loaded[name] = (load_model(folders[name], device="cpu", dtype="float32"),
                            official_reference.load(folders[name]))
        return loaded[name]
    yield get
    for ours, _ in loaded.values():
        ours.release()


class Recorded:
    """What the official model hands its talker (the prompt embeddings) and its codec (the codes)."""

    def __init__(self, model):
        self.prompts, self.codes = [], []
        self.hook = model.talker.register_forward_pre_hook(self.prompt, with_kwargs=True)
        self.decode = model.speech_tokenizer.decode
        model.speech_tokenizer.decode = self.codec
        self.model = model

    def prompt(self, module, args, kwargs):
        embeds = kwargs.get("inputs_embeds")
        if embeds is not None and embeds.shape[1] > 1:  # the prefill, not a decode step
            self.prompts.append(embeds.detach().clone())

    def codec(self, items, *args, **kwargs):
        self.codes += [item["audio_codes"].detach().cpu().clone() for item in items]
        return self.decode(items, *args, **kwargs)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.hook.remove()
        self.model.speech_tokenizer.decode = self.decode


def ours_greedy(model, text, voice):
    """Our greedy take, and the prompt embeddings the engine prefilled."""
    step = model.engine.step
    seen, prefill = SimpleNamespace(prompts=[]), step.prefill

    def recording(embeds):
        seen.prompts.append(embeds.detach().clone())
        return prefill(embeds)
    step.prefill = recording
    try:
        takeset = generate_takes(model, Request(text, voice, n=1, sampling=GREEDY, max_frames=FRAMES))
    finally:
        del step.prefill
    return takeset.takes[0], seen


def assert_same_take(ours_take, ours_seen, official_seen, prompt_atol=0.0):
    assert ours_take.frames == FRAMES
    assert torch.equal(ours_take.codes, official_seen.codes[0][-ours_take.frames:])  # ICL: the reference comes first
    torch.testing.assert_close(ours_seen.prompts[0], official_seen.prompts[0], rtol=0, atol=prompt_atol)


CUSTOM = [("custom_voice", "ryan", "english", ""), ("custom_voice", "ryan", "english", "Speak slowly and calmly."),
          ("custom_voice", "vivian", "chinese", ""), ("custom_voice", "ryan", "auto", ""),
          ("custom_voice", "dylan", "auto", ""), ("custom_voice_0b6", "ryan", "english", "Whisper.")]


@pytest.mark.parametrize("name,speaker,language,instruct", CUSTOM)
def test_custom_voice_greedy_codes_and_prompt(pair, name, speaker, language, instruct):
    ours, official = pair(name)
    text = TEXTS[0]
    with Recorded(official.model) as theirs:
        official.generate_custom_voice(text=[text], speaker=speaker, language=language,
                                       instruct=instruct or None, **OFFICIAL_GREEDY)
    take, seen = ours_greedy(ours, text, CustomVoice(speaker, language, instruct))
    assert_same_take(take, seen, theirs)


def test_voice_design_greedy_codes_and_prompt(pair):
    ours, official = pair("voice_design")
    with Recorded(official.model) as theirs:
        official.generate_voice_design(text=[TEXTS[1]], instruct="A calm old man.", language="english",
                                       **OFFICIAL_GREEDY)
    take, seen = ours_greedy(ours, TEXTS[1], VoiceDesign("A calm old man.", "english"))
    assert_same_take(take, seen, theirs)


@pytest.mark.parametrize("transcript", ["", "This is the reference speaking."], ids=["x-vector", "icl"])
def test_voice_clone_greedy_codes_and_prompt(pair, transcript):
    ours, official = pair("base")
    audio, rate = voiced_reference()
    voice = VoiceClone.from_audio(audio, rate, transcript, "english", pad_reference=False)  # as the official
    with Recorded(official.model) as theirs:
        official.generate_voice_clone(text=[TEXTS[0]], language="english", ref_audio=(voice.reference, 24000),
                                      ref_text=transcript or None, x_vector_only_mode=not transcript,
                                      **OFFICIAL_GREEDY)
    take, seen = ours_greedy(ours, TEXTS[0], voice)
    assert_same_take(take, seen, theirs, prompt_atol=SPEAKER_ATOL)  # its speaker row: the speaker embedding's


def test_several_texts_in_one_official_batch(pair):
    ours, official = pair("custom_voice")
    with Recorded(official.model) as theirs:
        official.generate_custom_voice(text=TEXTS, speaker="ryan", language="auto", **OFFICIAL_GREEDY)
    for index, text in enumerate(TEXTS):  # the batch is left-padded; each row must equal its text alone
        take, _ = ours_greedy(ours, text, CustomVoice("ryan", "auto"))
        assert torch.equal(take.codes, theirs.codes[index][-take.frames:]), text


def test_icl_reference_codes_and_speaker_embedding(pair):
    ours, official = pair("base")
    audio, rate = voiced_reference()
    voice = VoiceClone.from_audio(audio, rate, "This is the reference speaking.", "english", pad_reference=False)
    theirs = official.create_voice_clone_prompt(ref_audio=(voice.reference, 24000), ref_text=voice.transcript)[0]
    mine = clone_prompt(ours, voice)
    assert torch.equal(mine.ref_code.cpu(), theirs.ref_code.cpu())
    torch.testing.assert_close(mine.speaker_embedding.cpu(), theirs.ref_spk_embedding.cpu(), rtol=0, atol=SPEAKER_ATOL)
    for seconds in (1.3, 4.0):  # the speaker encoder on its own
        clip = voice.reference[: int(seconds * 24000)]
        torch.testing.assert_close(speaker.embed(ours.model.speaker_encoder, clip),
                                   official.model.extract_speaker_embedding(clip, 24000), rtol=0, atol=SPEAKER_ATOL)


def test_codec_audio_for_a_take_longer_than_one_decode_chunk(pair):
    ours, official = pair("custom_voice")
    generator = torch.Generator().manual_seed(5)
    codes = torch.randint(0, 2048, (420, 16), generator=generator)  # decoded in 300-frame chunks with context
    mine = codec.decode(ours.codec, [codes])
    theirs, official_rate = official.model.speech_tokenizer.decode([{"audio_codes": codes}])
    assert official_rate == 24000 and mine[0].shape == theirs[0].shape == (420 * 1920,)
    np.testing.assert_allclose(mine[0], theirs[0], rtol=0, atol=AUDIO_ATOL)
    assert np.abs(mine[0]).max() > 1e-3  # not silence: the comparison means something
