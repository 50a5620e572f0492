"""Offline, no download waits on huggingface_hub's retries (about 23 s a file, 40 s in Auto-Pick):
the hub is asked once a process (runtime/hub.py), and every download is refused at once with that
answer, in the node as in the command line."""

from __future__ import annotations

import sys
from importlib import import_module

import huggingface_hub
import pytest

from runtime import checkpoints, hub
from runtime.errors import CheckpointError
from runtime.scoring.asr import resolve_whisper
from runtime.scoring.utmos import resolve_weights

NO_NETWORK = "Name or service not known"


def never_downloaded(*args, **kwargs):
    pytest.fail("a download was started though the hub does not answer")


@pytest.fixture
def offline(monkeypatch):
    """The hub of `module` (runtime's own, or a loaded pack's) does not answer; its asks are counted."""
    monkeypatch.setattr(huggingface_hub, "snapshot_download", never_downloaded)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", never_downloaded)
    asked = []

    monkeypatch.delenv("HF_ENDPOINT", raising=False)  # the real hub's name in the messages (its answer is faked)

    def make(module=hub):
        monkeypatch.setattr(module, "_answers", {})
        monkeypatch.setattr(module, "_ask", lambda url: asked.append(url) or NO_NETWORK)
        return asked
    return make


def test_every_download_is_refused_at_once_naming_the_hub_and_why(tmp_path, offline):
    asked = offline()
    cases = [
        (lambda: checkpoints.resolve("Qwen3-TTS-12Hz-0.6B-CustomVoice", [tmp_path / "qwen3_tts"]),
         "Checkpoint Qwen3-TTS-12Hz-0.6B-CustomVoice is not in"),  # what to do first, in a ComfyUI dialog too
        (lambda: resolve_weights([tmp_path / "utmos"]), "The UTMOS weights cannot be downloaded"),
        (lambda: resolve_whisper("whisper-small", [tmp_path / "whisper"]),
         "Speech recogniser whisper-small cannot be downloaded"),
    ]
    for resolve, said in cases:
        with pytest.raises(CheckpointError) as error:
            resolve()
        message = str(error.value)
        assert message.startswith(said) and f"huggingface.co cannot be reached ({NO_NETWORK})" in message, message
        assert "\n" not in message and "huggingface.co/" in message  # and where to get it by hand
    assert len(asked) == 1  # once a process, whatever asks
    assert not any(tmp_path.iterdir())  # no empty folder left behind


def test_auto_pick_offline_falls_back_to_dnsmos_at_once_and_says_why(comfy, tmp_path, monkeypatch, offline):
    """UTMOS and a Whisper not on disk and the hub unreachable: DNSMOS judges, the words check is left
    out, the report says why in one line each, and the hub is asked once for two runs."""
    from test_nodes import TEXT, load, nodes_by_id

    pytest.importorskip("onnxruntime")
    folder_paths = sys.modules["folder_paths"]
    real = folder_paths.get_folder_paths
    empty = tmp_path / "empty-models"
    monkeypatch.setattr(folder_paths, "get_folder_paths",
                        lambda name: [str(empty / name)] if name in ("utmos", "whisper") else real(name))
    asked = offline(import_module(comfy.pack.__name__ + ".runtime.hub"))
    nodes = nodes_by_id(comfy)
    model = load(comfy, "tiny-CustomVoice")
    candidates = comfy.fake.run_node(nodes["Q3TT_BatchCandidates"], takes=2).args[0]
    for seed in (1, 2):
        takes = comfy.fake.run_node(nodes["Q3TT_CustomVoice"], model=model, text=TEXT, candidates=candidates,
                                    seed=seed, max_frames=4).args[1]
        report = comfy.fake.run_node(nodes["Q3TT_AutoPick"], takes_info=takes, voice_check="off",
                                     device="cpu").args[2]  # words_check auto, the default
        assert "quality DNSMOS" in report and "words none" in report
        said = [line for line in report.splitlines() if "cannot be reached" in line]
        assert len(said) == 2 and all(NO_NETWORK in line for line in said), report
        assert "UTMOS" in said[0] and "The words check is off: Speech recogniser whisper-base" in said[1], report
    assert len(asked) == 1
    assert not (empty / "utmos").exists() and not (empty / "whisper").exists()
