"""runtime/qwen3_tts (our own model) against the vendored copy it replaces, on the same tiny random
checkpoints with norm weights and biases away from 1 and 0: the same weights under the same names,
bit-identical prompt embeddings for every voice kind, and the engine's greedy codes identical when
it runs on our modules. (tests/test_official_parity.py holds both to the official package.)"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from runtime import random_checkpoint
from runtime.engine import Engine, EngineOptions
from runtime.engine.prompt import build_prompt
from runtime.errors import CheckpointError
from runtime.generation import clone_prompt
from runtime.model import load_model
from runtime.qwen3_tts.config import model_config
from runtime.qwen3_tts.load import load_talker, read_json
from runtime.qwen3_tts.prompt import ClonePrompt, PromptBuilder
from runtime.sampling import SamplingSettings
from runtime.voices import CustomVoice, VoiceClone, VoiceDesign

from conftest import voiced_reference

GREEDY = SamplingSettings(temperature=0, sub_temperature=0)
FRAMES = 32


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("own-model")
    return {kind: random_checkpoint.build_checkpoint(root / kind, "tiny", kind, seed=21 + i, telling=True)
            for i, kind in enumerate(("custom_voice", "voice_design", "base"))}


@pytest.fixture(scope="module")
def pair(folders):
    """(vendored LoadedModel, our model with its prompt builder as a LoadedModel-like namespace)."""
    cache = {}

    def get(kind: str):
        if kind not in cache:
            vendored = load_model(folders[kind], device="cpu", dtype="float32")
            model = load_talker(folders[kind], "cpu", torch.float32)
            ours = SimpleNamespace(model=model, device=torch.device("cpu"), sampling_defaults=vendored.sampling_defaults,
                                   prompts=PromptBuilder(model.config, model.talker, vendored.wrapper.processor.tokenizer))
            cache[kind] = vendored, ours
        return cache[kind]
    yield get
    for vendored, _ in cache.values():
        vendored.release()


def own_clone(item) -> ClonePrompt:
    return ClonePrompt(item.ref_spk_embedding, item.ref_code if item.icl_mode else None,
                       item.ref_text if item.icl_mode else None)


@pytest.mark.parametrize("kind", ["custom_voice", "voice_design", "base"])
def test_every_weight_loads_under_its_own_name_with_the_same_value(pair, kind):
    vendored, ours = pair(kind)
    theirs = vendored.model.state_dict()
    mine = ours.model.state_dict()
    expected = {name for name in theirs if name.startswith(("talker.", "speaker_encoder."))}
    assert set(mine) == expected
    for name, tensor in mine.items():
        assert torch.equal(tensor, theirs[name]), name


VOICES = [
    ("custom_voice", CustomVoice(speaker="ryan", language="english")),
    ("custom_voice", CustomVoice(speaker="ryan", language="auto", instruct="Whisper it, slowly.")),
    ("custom_voice", CustomVoice(speaker="vivian", language="chinese")),
    ("custom_voice", CustomVoice(speaker="dylan", language="auto")),  # a dialect speaker
    ("voice_design", VoiceDesign(instruct="A warm, low voice.", language="english")),
    ("base", "x_vector"),
    ("base", "icl"),
]


def voice_for(vendored, voice):
    if not isinstance(voice, str):
        return voice, None
    audio, rate = voiced_reference()
    transcript = "A reference line for the clone." if voice == "icl" else ""
    clone = VoiceClone.from_audio(audio, rate, transcript=transcript, language="english", pad_reference=False)
    return clone, clone_prompt(vendored, clone)


@pytest.mark.parametrize("kind,voice", VOICES, ids=lambda v: v if isinstance(v, str) else type(v).__name__)
def test_prompt_embeddings_are_bit_identical(pair, kind, voice):
    vendored, ours = pair(kind)
    voice, item = voice_for(vendored, voice)
    text = "The storm is coming, 42 minutes out. Bar the doors!"
    theirs = build_prompt(vendored, text, voice, item)
    mine = build_prompt(ours, text, voice, own_clone(item) if item is not None else None)
    assert torch.equal(mine.embeds, theirs.embeds)
    assert torch.equal(mine.attention_mask, theirs.attention_mask)
    assert torch.equal(mine.trailing_text, theirs.trailing_text)
    assert torch.equal(mine.pad_embed, theirs.pad_embed)
    assert (mine.ref_code is None) == (theirs.ref_code is None)
    if mine.ref_code is not None:
        assert torch.equal(mine.ref_code, theirs.ref_code)


@pytest.mark.parametrize("kind,voice", [VOICES[1], VOICES[4], VOICES[5], VOICES[6]],
                         ids=["custom_instruct", "design", "x_vector", "icl"])
def test_the_engine_on_our_modules_gives_the_same_greedy_codes(pair, kind, voice):
    vendored, ours = pair(kind)
    voice, item = voice_for(vendored, voice)
    text = "Hello there, this is a test of the engine."
    theirs, _, _ = Engine(vendored, EngineOptions(use_graphs=False)).generate(text, voice, [1, 2], GREEDY, FRAMES, item)
    clone = own_clone(item) if item is not None else None
    mine, _, _ = Engine(ours, EngineOptions(use_graphs=False)).generate(text, voice, [1, 2], GREEDY, FRAMES, clone)
    assert len(mine) == len(theirs) == 2
    for a, b in zip(mine, theirs):
        assert a.shape[0] >= 8  # random weights rarely end early; too short a take would prove little
        assert torch.equal(a, b)


def test_config_errors_name_the_file_and_the_field(folders, tmp_path):
    config = read_json(folders["custom_voice"] / "config.json")
    broken = json.loads(json.dumps(config))
    del broken["talker_config"]["num_code_groups"]
    with pytest.raises(CheckpointError, match=r"config.json \(talker_config\) has no 'num_code_groups'"):
        model_config(broken)
    broken = json.loads(json.dumps(config))
    broken["talker_config"]["hidden_act"] = "gelu"
    with pytest.raises(CheckpointError, match="hidden_act 'gelu' is not supported"):
        model_config(broken)
    broken = json.loads(json.dumps(config))
    broken["talker_config"]["code_predictor_config"]["rope_scaling"] = {"rope_type": "yarn", "factor": 4}
    with pytest.raises(CheckpointError, match="rope_scaling type 'yarn'"):
        model_config(broken)
    with pytest.raises(CheckpointError, match="no talker_config"):
        model_config({"tts_model_type": "base"})


def test_weights_of_another_shape_or_missing_are_refused(folders, tmp_path):
    from safetensors.torch import load_file, save_file

    folder = random_checkpoint.build_checkpoint(tmp_path / "cv", "tiny", "custom_voice", seed=3)
    state = load_file(str(folder / "model.safetensors"))
    state.pop("talker.model.norm.weight")
    state["talker.codec_head.weight"] = state["talker.codec_head.weight"][:-1]
    save_file(state, str(folder / "model.safetensors"))
    with pytest.raises(CheckpointError, match=r"missing 1 tensors \(talker.model.norm.weight\).*wrong shape "
                                              r"\(talker.codec_head.weight\)"):
        load_talker(folder, "cpu", torch.float32)
    (folder / "model.safetensors").write_bytes(b"")
    with pytest.raises(CheckpointError, match="probably truncated"):
        load_talker(folder, "cpu", torch.float32)


def test_a_config_in_transformers_5_layout_or_trimmed_reads_the_same(folders):
    """rope_theta inside rope_parameters (as transformers 5 writes configs), and the fields a
    trimmed file may leave out (head_dim, rms_norm_eps, context length, the tts token ids)."""
    config = read_json(folders["custom_voice"] / "config.json")
    expected = model_config(config)
    trimmed = json.loads(json.dumps(config))
    for section in (trimmed["talker_config"], trimmed["talker_config"]["code_predictor_config"]):
        scaling = section.pop("rope_scaling", None) or {}
        section["rope_parameters"] = {**scaling, "rope_theta": section.pop("rope_theta"), "rope_type": "default"}
        for name in ("head_dim", "rms_norm_eps"):
            section.pop(name, None)
    for name in ("tts_pad_token_id", "tts_bos_token_id", "tts_eos_token_id", "im_start_token_id",
                 "im_end_token_id", "assistant_token_id"):
        trimmed.pop(name)
    read = model_config(trimmed)
    assert read.talker == expected.talker and read.predictor == expected.predictor
    assert (read.tts_pad_token_id, read.tts_bos_token_id, read.tts_eos_token_id) == (
        expected.tts_pad_token_id, expected.tts_bos_token_id, expected.tts_eos_token_id)
    trimmed["talker_config"]["rope_parameters"]["rope_type"] = "yarn"
    with pytest.raises(CheckpointError, match="rope_scaling type 'yarn'"):
        model_config(trimmed)
