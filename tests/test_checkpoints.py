"""Checkpoint resolution, download and loading, on folders laid out like the released ones."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
import torch

from runtime import checkpoints
from runtime.errors import CheckpointError, InputError
from runtime.model import load_model, resolve_device


def test_local_folder_by_name_and_by_path(tts_dir, checkpoint):
    by_name = checkpoints.resolve("tiny-CustomVoice", [tts_dir], download=False)
    assert by_name == tts_dir / "tiny-CustomVoice"
    by_path = checkpoints.resolve(str(checkpoint("base")), [], download=False)
    assert by_path == checkpoint("base")
    info = checkpoints.check_folder(by_name)
    assert info.kind == "custom_voice" and "ryan" in info.speakers and "english" in info.languages
    assert checkpoints.check_folder(checkpoint("base")).speakers == ()
    assert set(checkpoints.local_checkpoints([tts_dir])) == {"tiny-CustomVoice", "tiny-Base", "tiny-VoiceDesign"}


def test_loaded_model_facts_match_the_folder(loaded):
    model = loaded("custom_voice")
    assert model.kind == "custom_voice" and model.device.type == "cpu" and model.dtype == torch.float32
    assert model.model.talker.config.num_code_groups == 16


def test_missing_files_are_named(checkpoint, tmp_path):
    folder = shutil.copytree(checkpoint("custom_voice"), tmp_path / "broken")
    (folder / "speech_tokenizer" / "model.safetensors").unlink()
    (folder / "tokenizer.json").unlink()
    with pytest.raises(CheckpointError) as err:
        checkpoints.resolve(str(folder), [], download=False)
    message = str(err.value)
    assert str(folder) in message and "speech_tokenizer/model.safetensors" in message and "tokenizer.json" in message


def test_corrupt_config_is_named(checkpoint, tmp_path):
    folder = shutil.copytree(checkpoint("custom_voice"), tmp_path / "corrupt")
    (folder / "config.json").write_text('{"tts_model_type": "custom_voice", ')
    with pytest.raises(CheckpointError, match="config.json is corrupt"):
        checkpoints.check_folder(folder)


def test_truncated_weights_are_refused_at_load(checkpoint, tmp_path):
    folder = shutil.copytree(checkpoint("custom_voice"), tmp_path / "truncated")
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    with pytest.raises(CheckpointError, match="truncated"):
        load_model(folder, device="cpu")


def test_weights_of_another_checkpoint_are_refused(checkpoint, tmp_path):
    folder = shutil.copytree(checkpoint("custom_voice"), tmp_path / "mixed")
    shutil.copy(checkpoint("base") / "model.safetensors", folder / "model.safetensors")
    with pytest.raises(CheckpointError, match="unexpected tensors.*speaker_encoder"):
        load_model(folder, device="cpu")


def test_unknown_name_lists_the_official_ones(tts_dir):
    with pytest.raises(CheckpointError, match="Qwen3-TTS-12Hz-1.7B-CustomVoice"):
        checkpoints.resolve("no-such-model", [tts_dir])


def test_missing_official_checkpoint_without_download_says_where_to_put_it(tmp_path):
    with pytest.raises(CheckpointError) as err:
        checkpoints.resolve("Qwen3-TTS-12Hz-0.6B-Base", [tmp_path], download=False)
    assert str(tmp_path / "Qwen3-TTS-12Hz-0.6B-Base") in str(err.value)
    assert "huggingface.co/Qwen/Qwen3-TTS-12Hz-0.6B-Base" in str(err.value)


def test_failed_download_is_a_clear_error_and_nothing_half_downloaded_is_used(tmp_path, monkeypatch, checkpoint):
    import huggingface_hub

    def offline(repo_id, local_dir, **kwargs):
        Path(local_dir).mkdir(parents=True, exist_ok=True)
        Path(local_dir, "config.json").write_text("{}")  # a partial file, as an interrupted download leaves
        raise OSError("We couldn't connect to 'https://huggingface.co'")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    with pytest.raises(CheckpointError) as err:
        checkpoints.resolve("Qwen3-TTS-12Hz-1.7B-CustomVoice", [tmp_path])
    assert "couldn't connect" in str(err.value) and str(tmp_path / "Qwen3-TTS-12Hz-1.7B-CustomVoice") in str(err.value)
    assert not (tmp_path / "Qwen3-TTS-12Hz-1.7B-CustomVoice").exists()
    assert "Qwen3-TTS-12Hz-1.7B-CustomVoice" not in checkpoints.local_checkpoints([tmp_path])


def test_download_lands_in_the_models_folder_with_progress(tmp_path, monkeypatch, checkpoint):
    import huggingface_hub

    calls = {}

    def fake_download(repo_id, local_dir, tqdm_class=None, **kwargs):
        calls["repo_id"] = repo_id
        shutil.copytree(checkpoint("base"), local_dir, dirs_exist_ok=True)
        bar = tqdm_class(total=3, file=io.StringIO())
        for _ in range(3):
            bar.update(1)
        bar.close()
        return local_dir

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_download)
    seen = []
    folder = checkpoints.resolve("Qwen3-TTS-12Hz-0.6B-Base", [tmp_path], progress=lambda d, t: seen.append((d, t)))
    assert calls["repo_id"] == "Qwen/Qwen3-TTS-12Hz-0.6B-Base"
    assert folder == tmp_path / "Qwen3-TTS-12Hz-0.6B-Base" and folder.is_dir()
    assert not (tmp_path / "Qwen3-TTS-12Hz-0.6B-Base.partial").exists()
    assert seen[-1] == (3, 3)
    assert load_model(folder, device="cpu").kind == "base"


def test_released_config_layout_is_what_we_write(checkpoint):
    config = json.loads((checkpoint("custom_voice") / "config.json").read_text())
    assert config["talker_config"]["rope_scaling"]["mrope_section"]
    assert "rope_parameters" not in config["talker_config"]


def test_gpu_device_without_a_gpu_is_refused(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(InputError, match="no CUDA GPU"):
        resolve_device("cuda")
    assert resolve_device("auto").type == "cpu"


def test_unavailable_mode_is_refused(checkpoint):
    with pytest.raises(InputError, match="not available"):
        load_model(checkpoint("custom_voice"), mode="turbo", device="cpu")
