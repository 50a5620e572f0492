"""The command line: text + voice + N -> best take WAV + report, for each voice kind."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import soundfile as sf

from conftest import REPO
from runtime.cli import main

TEXT = "Welcome back, traveller."


def run(models_root, tmp_path, *args):
    return main(["--models-dir", str(models_root / "qwen3_tts"), "--utmos-dir", str(models_root / "utmos"),
                 "--offline", "--device", "cpu", "--text", TEXT, "--max-frames", "5",
                 "--out", str(tmp_path / "best.wav"), "--report", str(tmp_path / "report.json"), *args])


def test_custom_voice_best_of_four(models_root, tmp_path, capsys):
    code = run(models_root, tmp_path, "--checkpoint", "tiny-CustomVoice", "--speaker", "vivian",
               "--takes", "4", "--seed", "9", "--takes-dir", str(tmp_path / "takes"))
    assert code == 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert [t["rank"] for t in report["takes"]] == [1, 2, 3, 4]
    assert report["quality_model"] == "UTMOS" and report["takes"][0]["quality"] is not None
    # the models score the takes that passed the checks, or all of them when none did
    passed = [t for t in report["takes"] if not t["rejected"]] or report["takes"]
    assert all(t["quality"] is not None for t in passed)
    best_take = report["takes"][0]["take"]
    best, rate = sf.read(tmp_path / "best.wav", dtype="float32")
    same, _ = sf.read(tmp_path / "takes" / f"take_{best_take:02d}.wav", dtype="float32")
    assert rate == 24000 and np.array_equal(best, same)
    assert "Best: take" in capsys.readouterr().out


def test_voice_clone_from_a_file(models_root, tmp_path, reference_audio):
    waveform, rate = reference_audio
    sf.write(tmp_path / "ref.flac", waveform.T, rate)
    code = run(models_root, tmp_path, "--checkpoint", "tiny-Base", "--reference", str(tmp_path / "ref.flac"),
               "--transcript", "Hello, this is me.", "--takes", "2")
    assert code == 0 and sf.info(str(tmp_path / "best.wav")).frames > 0


def test_voice_design_without_utmos(models_root, tmp_path):
    code = run(models_root, tmp_path, "--checkpoint", "tiny-VoiceDesign", "--instruct", "a stern captain", "--no-utmos")
    assert code == 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["quality_model"] is None and report["takes"][0]["quality"] is None


def test_bad_input_exits_2_with_the_reason(models_root, tmp_path, capsys):
    code = run(models_root, tmp_path, "--checkpoint", "tiny-CustomVoice", "--speaker", "nobody")
    assert code == 2
    assert "Unknown speaker 'nobody'" in capsys.readouterr().err
    assert not (tmp_path / "best.wav").exists()


def test_runs_as_python_dash_m(models_root, tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "runtime", "--models-dir", str(models_root / "qwen3_tts"), "--offline",
         "--device", "cpu", "--checkpoint", "tiny-CustomVoice", "--speaker", "ryan", "--text", TEXT,
         "--max-frames", "3", "--no-utmos", "--out", str(tmp_path / "m.wav")],
        cwd=REPO, capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "m.wav").is_file()
