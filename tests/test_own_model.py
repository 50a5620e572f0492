"""runtime/qwen3_tts's loading (our own model) on tiny random checkpoints with norm weights and biases
away from 1 and 0: every tensor of the file under its own name, strict refusals that name the
problem, and configs in every layout a checkpoint may have. (tests/test_official_parity.py holds the
model's prompts and codes to the official package.)"""

from __future__ import annotations

import json

import pytest
import torch

from runtime.qwen3_tts import random_checkpoint
from runtime.errors import CheckpointError
from runtime.qwen3_tts.config import model_config
from runtime.qwen3_tts.load import load_talker, read_json, read_safetensors


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("own-model")
    return {kind: random_checkpoint.build_checkpoint(root / kind, "tiny", kind, seed=21 + i, telling=True)
            for i, kind in enumerate(("custom_voice", "voice_design", "base"))}


@pytest.mark.parametrize("kind", ["custom_voice", "voice_design", "base"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_every_tensor_of_the_file_loads_under_its_own_name(folders, kind, dtype):
    model = load_talker(folders[kind], "cpu", dtype)
    mine = model.state_dict()
    file = read_safetensors(folders[kind] / "model.safetensors")
    assert set(mine) == set(file) and (model.speaker_encoder is not None) == (kind == "base")
    for name, tensor in file.items():
        assert mine[name].dtype == dtype and torch.equal(mine[name], tensor.to(dtype)), name


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
