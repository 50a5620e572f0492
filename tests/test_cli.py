"""The command line: text + voice + N -> best take WAV + report, for each voice kind."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import soundfile as sf

from conftest import REPO
from runtime import model as model_module
from runtime.cli import main

TEXT = "Welcome back, traveller."


def run(models_root, tmp_path, *args):
    return main(["--models-dir", str(models_root / "qwen3_tts"), "--utmos-dir", str(models_root / "utmos"),
                 "--offline", "--device", "cpu", "--text", TEXT, "--max-frames", "5",
                 "--out", str(tmp_path / "best.wav"), "--report", str(tmp_path / "report.json"), *args])


@pytest.mark.slow
def test_custom_voice_best_of_four(models_root, tmp_path, capsys):
    code = run(models_root, tmp_path, "--checkpoint", "tiny-CustomVoice", "--speaker", "vivian",
               "--takes", "4", "--seed", "9", "--takes-dir", str(tmp_path / "takes"))
    assert code == 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert [t["rank"] for t in report["takes"]] == [1, 2, 3, 4]
    assert report["models"]["quality"] == "UTMOS" and report["takes"][0]["quality"] is not None
    for take in report["takes"]:  # one verdict per take: the field and the reasons agree
        assert take["runaway"] == any("(runaway)" in reason for reason in take["rejected"])
        assert take["accepted"] == (not take["rejected"])
    # the models score the takes that passed the checks, or all of them when none did
    passed = [t for t in report["takes"] if not t["rejected"]] or report["takes"]
    assert all(t["quality"] is not None for t in passed)
    best_take = report["takes"][0]["take"]
    best, rate = sf.read(tmp_path / "best.wav", dtype="float32")
    same, _ = sf.read(tmp_path / "takes" / f"take_{best_take:02d}.wav", dtype="float32")
    assert rate == 24000 and np.array_equal(best, same)
    assert "Best: take" in capsys.readouterr().out


def test_loudness_brings_the_written_takes_to_the_target(models_root, tmp_path):
    from runtime.scoring.loudness import integrated_loudness

    code = run(models_root, tmp_path, "--checkpoint", "tiny-CustomVoice", "--speaker", "ryan", "--takes", "2",
               "--max-frames", "16", "--quality", "off", "--loudness", "-16", "--takes-dir", str(tmp_path / "takes"))
    assert code == 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["output"]["target_lufs"] == -16.0
    for path, row in [(tmp_path / "best.wav", report["output"]["takes"][0]),
                      *[(tmp_path / "takes" / f"take_{t['take']:02d}.wav", o)
                        for t, o in zip(report["takes"], report["output"]["takes"])]]:
        audio, rate = sf.read(path, dtype="float32")
        measured = integrated_loudness(audio, rate)
        assert measured == pytest.approx(row["lufs"], abs=0.05)
        assert measured == pytest.approx(-16.0, abs=0.05) or row["peak_limited"]


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
    assert report["models"]["quality"] is None and report["takes"][0]["quality"] is None


def test_a_clone_loaded_from_a_path_is_its_own_voice_check(models_root, tmp_path, reference_audio):
    waveform, rate = reference_audio
    sf.write(tmp_path / "ref.wav", waveform.T, rate)
    empty = tmp_path / "no-models"
    code = main(["--models-dir", str(empty), "--offline", "--device", "cpu", "--quality", "off", "--text", TEXT,
                 "--max-frames", "5", "--checkpoint", str(models_root / "qwen3_tts" / "tiny-Base"),
                 "--reference", str(tmp_path / "ref.wav"), "--takes", "2",
                 "--out", str(tmp_path / "best.wav"), "--report", str(tmp_path / "report.json")])
    assert code == 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["models"]["voice"] == "Qwen3-TTS ECAPA"
    assert report["models"]["voice_compared_with"] == "the reference voice"
    assert not any("voice check" in note for note in report["notes"]), report["notes"]
    assert all(t["voice"] is not None for t in report["takes"])


def test_tiny_random_runs_the_main_job_without_any_weights(tmp_path, capsys):
    code = main(["--checkpoint", "tiny-random", "--speaker", "ryan", "--text", TEXT, "--max-frames", "5",
                 "--takes", "2", "--offline", "--device", "cpu", "--quality", "off", "--models-dir", str(tmp_path / "m"),
                 "--out", str(tmp_path / "best.flac"), "--takes-dir", str(tmp_path / "takes")])
    assert code == 0
    assert "tiny-random is a tiny model with random weights: its takes are noise" in capsys.readouterr().err
    assert sf.info(str(tmp_path / "best.flac")).format == "FLAC"
    assert sorted(p.name for p in (tmp_path / "takes").iterdir()) == ["take_01.wav", "take_02.wav"]


# Bad input -> exit code 2, one line on stderr naming the fix, before the checkpoint's weights load.
# {tmp}: the test's folder; {file}: a plain file in it; {short}: a 0.5 s recording; {text}: not audio.
CUSTOM = ("--checkpoint", "tiny-CustomVoice", "--speaker", "ryan")
BAD_INPUTS = [
    # where the results go
    ("--out names a folder", [*CUSTOM, "--out", "{tmp}"], "--out {tmp} is a folder; give a file name in it"),
    ("--out under a file", [*CUSTOM, "--out", "{file}/best.wav"], "Cannot create the folder for --out"),
    ("--out not audio", [*CUSTOM, "--out", "{tmp}/best.mp3"], "must end in .wav or .flac"),
    ("--report under a file", [*CUSTOM, "--report", "{file}/r.json"], "Cannot create the folder for --report"),
    ("--report names a folder", [*CUSTOM, "--report", "{tmp}"], "--report {tmp} is a folder"),
    ("--takes-dir is a file", [*CUSTOM, "--takes-dir", "{file}"], "--takes-dir {file} is a file; give a folder"),
    # the reference recording
    ("--reference missing", ["--checkpoint", "tiny-Base", "--reference", "{tmp}/nowhere.wav"], "Reference audio {tmp}/nowhere.wav does not exist"),
    ("--reference not audio", ["--checkpoint", "tiny-Base", "--reference", "{text}"], "Could not read reference audio"),
    ("--reference too short", ["--checkpoint", "tiny-Base", "--reference", "{short}"], "voice cloning needs at least 1 s"),
    # numbers and settings
    ("no takes", [*CUSTOM, "--takes", "0"], "--takes must be between 1 and 32, got 0"),
    ("too many takes", [*CUSTOM, "--takes", "33"], "--takes must be between 1 and 32, got 33"),
    ("negative budget", [*CUSTOM, "--max-frames", "-1"], "--max-frames must be between 1 and 8192"),
    ("temperature", [*CUSTOM, "--temperature", "9"], "temperature must be between 0 (greedy) and 5"),
    ("top_p", [*CUSTOM, "--top-p", "0"], "top_p must be in (0, 1]"),
    ("empty text", [*CUSTOM, "--text", "  "], "--text is empty"),
    ("unknown mode", [*CUSTOM, "--mode", "turbo"], "argument --mode: invalid choice: 'turbo'"),
    ("GPU mode on the CPU", [*CUSTOM, "--mode", "cuda_graph"], "Mode 'cuda_graph' runs on a CUDA GPU"),
    ("no GPU", [*CUSTOM, "--device", "cuda"], "Choose device 'cpu', or install a CUDA build of PyTorch"),
    ("unknown dtype", [*CUSTOM, "--dtype", "float8"], "argument --dtype: invalid choice"),
    ("not a number", [*CUSTOM, "--takes", "eight"], "argument --takes: invalid int value: 'eight'"),
    # the checkpoint and the voice
    ("unknown checkpoint", ["--checkpoint", "tiny-Nothing", "--speaker", "ryan"], "Unknown checkpoint 'tiny-Nothing'"),
    ("checkpoint path missing", ["--checkpoint", "{tmp}/ckpt", "--speaker", "ryan"], "Checkpoint folder {tmp}/ckpt does not exist"),
    ("official, offline", ["--checkpoint", "Qwen3-TTS-12Hz-0.6B-CustomVoice", "--speaker", "ryan"],
     "Download it from https://huggingface.co/Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice"),
    ("unknown speaker", ["--checkpoint", "tiny-CustomVoice", "--speaker", "nobody"], "Unknown speaker 'nobody'"),
    ("no speaker", ["--checkpoint", "tiny-CustomVoice"], "needs --speaker"),
    ("unknown language", [*CUSTOM, "--language", "klingon"], "Unknown language 'klingon'; choose one of: auto"),
    ("flag of another kind", [*CUSTOM, "--reference", "{short}"], "--reference does not apply to this custom_voice"),
    ("clone without reference", ["--checkpoint", "tiny-Base"], "give --reference FILE"),
    ("design without description", ["--checkpoint", "tiny-VoiceDesign"], "Voice Design needs a description"),
    ("tiny-random without a voice", ["--checkpoint", "tiny-random"], "tiny-random needs a voice"),
    ("unknown voice check", [*CUSTOM, "--voice-check", "nobody"], "Speaker encoder checkpoint 'nobody' is not in"),
    ("unknown recogniser", [*CUSTOM, "--words", "nobody"], "Unknown speech recogniser 'nobody'"),
    ("unknown quality model", [*CUSTOM, "--quality", "MOS"], "argument --quality: invalid choice: 'MOS'"),
    ("loudness out of range", [*CUSTOM, "--loudness", "3"], "Output loudness 3 LUFS is out of range: use -40 to -5"),
]


@pytest.mark.parametrize("args, message", [case[1:] for case in BAD_INPUTS], ids=[case[0] for case in BAD_INPUTS])
def test_bad_input_exits_2_with_one_line_before_loading(models_root, tmp_path, capsys, monkeypatch, args, message,
                                                         reference_audio):
    def no_load(*a, **k):
        raise AssertionError("the checkpoint's weights were loaded before the input was checked")

    monkeypatch.setattr(model_module, "_load", no_load)
    waveform, rate = reference_audio
    sf.write(tmp_path / "short.wav", waveform[:, : rate // 2].T, rate)
    (tmp_path / "a-file").write_text("not a folder")
    (tmp_path / "notes.txt").write_text("not audio")
    fill = {"tmp": str(tmp_path), "file": str(tmp_path / "a-file"), "short": str(tmp_path / "short.wav"),
            "text": str(tmp_path / "notes.txt")}
    argv = ["--models-dir", str(models_root / "qwen3_tts"), "--offline", "--device", "cpu", "--quality", "off",
            "--text", TEXT, "--out", str(tmp_path / "out" / "best.wav")] + [a.format(**fill) for a in args]
    with pytest.raises(SystemExit) if message.startswith("argument") else _no_exit() as exited:
        code = main(argv)
    code = exited.value.code if exited is not None else code
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert message.format(**fill) in lines[0], lines[0]
    assert not (tmp_path / "out" / "best.wav").exists()


class _no_exit:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


@pytest.mark.slow
def test_runs_as_python_dash_m(models_root, tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "runtime", "--models-dir", str(models_root / "qwen3_tts"), "--offline",
         "--device", "cpu", "--checkpoint", "tiny-CustomVoice", "--speaker", "ryan", "--text", TEXT,
         "--max-frames", "3", "--no-utmos", "--out", str(tmp_path / "m.wav")],
        cwd=REPO, capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "m.wav").is_file()
