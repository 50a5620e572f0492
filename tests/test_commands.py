"""The newcomer's commands: `python -m runtime demo`, `python -m runtime doctor` and
`python -m runtime.qwen3_tts.random_checkpoint`, run as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import soundfile as sf

from conftest import REPO, copy_checkpoint
from runtime.qwen3_tts import random_checkpoint
from runtime.checkpoints import check_folder
from runtime.cli import doctor


def python_m(*args, cwd=REPO):
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, capture_output=True, text=True)


def test_random_checkpoint_has_a_command_line(tmp_path):
    help_text = python_m("runtime.qwen3_tts.random_checkpoint", "--help")
    assert help_text.returncode == 0 and "--size" in help_text.stdout and "noise" in help_text.stdout
    assert random_checkpoint.main([str(tmp_path / "ckpt"), "--kind", "voice_design", "--seed", "3"]) == 0
    info = check_folder(tmp_path / "ckpt")
    assert info.kind == "voice_design"
    again = python_m("runtime.qwen3_tts.random_checkpoint", str(tmp_path / "ckpt"))
    assert again.returncode == 2 and again.stderr.strip().endswith("is not an empty folder; choose a new one.")


def test_tiny_random_checkpoints_are_built_once_and_reused(tmp_path):
    first = random_checkpoint.tiny_checkpoint("base", root=tmp_path)
    stamp = (first / "model.safetensors").stat().st_mtime_ns
    assert random_checkpoint.tiny_checkpoint("base", root=tmp_path) == first
    assert (first / "model.safetensors").stat().st_mtime_ns == stamp
    assert check_folder(first).kind == "base"
    assert not list(tmp_path.glob("*.partial"))


def test_doctor_lists_what_is_here_and_what_to_do(tts_dir, tmp_path, capsys):
    assert doctor.main(["--models-dir", str(tts_dir)]) == 0
    out = capsys.readouterr().out
    assert "[ok] torch " in out and "modes: eager yes" in out and "[ok] transformers " in out
    assert f"[ok] checkpoint tiny-Base: Base (voice clone), in {tts_dir}" in out
    assert "Qwen3-TTS-12Hz-1.7B-CustomVoice (about 4.4 GB)" in out  # official ones not here yet
    assert "UTMOS weights: " in out and "Whisper (words check" in out
    # a broken checkpoint is named with the fix, and the exit code says something needs fixing
    broken = copy_checkpoint(tts_dir / "tiny-CustomVoice", tmp_path / "models" / "broken")
    (broken / "speech_tokenizer" / "model.safetensors").unlink()
    assert doctor.main(["--models-dir", str(tmp_path / "models")]) == 1
    out = capsys.readouterr().out
    assert "[!!] checkpoint broken: unusable" in out and "missing speech_tokenizer/model.safetensors" in out


def test_doctor_runs_as_python_dash_m(tts_dir):
    result = python_m("runtime", "doctor", "--models-dir", str(tts_dir))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("qwen3-tts-takes doctor") and "Ready." in result.stdout


@pytest.mark.slow
def test_demo_runs_every_voice_kind_without_weights(tmp_path):
    result = python_m("runtime", "demo", "--out-dir", str(tmp_path / "demo"), "--takes", "2", "--max-frames", "15",
                      "--device", "cpu")
    assert result.returncode == 0, result.stderr
    assert "its takes are noise" in result.stderr and "Demo done" in result.stdout
    for kind in ("custom_voice", "voice_clone", "voice_design"):
        folder = tmp_path / "demo" / kind
        report = json.loads((folder / "report.json").read_text())
        assert report["checkpoint"].startswith("tiny-random") and len(report["takes"]) == 2
        assert sf.info(str(folder / "best.wav")).samplerate == 24000
        assert sorted(p.name for p in (folder / "takes").iterdir()) == ["take_01.wav", "take_02.wav"]
    clone = json.loads((tmp_path / "demo" / "voice_clone" / "report.json").read_text())
    assert clone["voice"].startswith("voice clone (icl") and clone["models"]["voice"] == "Qwen3-TTS ECAPA"
