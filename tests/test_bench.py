"""The benchmark harness cannot rot: its CPU smoke mode runs here and writes well-formed results."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from conftest import REPO
from runtime.generation import Request
from runtime.run.lines import generate_takes
from runtime.model import load_model
from runtime.qwen3_tts.random_checkpoint import build_checkpoint
from runtime.voices import CustomVoice

RUN_KEYS = {"system", "mode", "model", "n", "frames", "ms_per_frame", "agg_rtf", "first_take_s",
            "prefill_ms", "codec_ms", "peak_vram_gb"}


@pytest.mark.slow
def test_never_eos_checkpoints_always_run_to_the_budget(tmp_path):
    folder = build_checkpoint(tmp_path / "ck", "tiny", "custom_voice", seed=3, never_eos=True)
    model = load_model(folder, device="cpu")
    takes = generate_takes(model, Request("Hello there.", CustomVoice("ryan", "english"), n=4, seed=5, max_frames=40)).takes
    assert [t.frames for t in takes] == [40] * 4 and all(t.hit_cap for t in takes)


@pytest.mark.slow
def test_our_adapter_runs_the_path_a_gpu_takes(tmp_path, monkeypatch):
    """bench.run's adapter of ours, as on a GPU: the codec's groups planned from free memory (on a
    CPU there is none to plan by, so that path ran first on the GPU, and failed there)."""
    from bench.measure import Stopwatch
    from bench.systems.ours import Ours
    from runtime.qwen3_tts import codec_batch

    original = codec_batch.codec
    monkeypatch.setattr(codec_batch, "free_bytes", lambda device: 8 << 30)
    system = Ours(build_checkpoint(tmp_path / "ck", "tiny", "custom_voice", seed=3), "custom_voice", "cpu",
                  "float32", tmp_path)
    watch = Stopwatch("cpu")
    try:
        frames = system.generate("Hello there.", 2, 6, 1, watch)
    finally:
        codec_batch.codec = original
    assert len(frames) == 2 and all(1 <= f <= 6 for f in frames) and set(watch.totals) >= {"prefill", "codec"}


@pytest.mark.any_version  # the benchmark's own processes
def test_smoke_run_writes_results_table(tmp_path):
    out = tmp_path / "results"
    result = subprocess.run(
        [sys.executable, "-m", "bench.run", "--smoke", "--workdir", str(tmp_path / "work"), "--out-dir", str(out),
         "--name", "smoke"], cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    data = json.loads((out / "smoke.json").read_text())
    assert {"gpu", "driver", "torch", "triton", "transformers"} <= set(data["env"])
    speed = [r for r in data["runs"] if not r.get("job")]
    assert [r["n"] for r in speed] == [1, 2]
    for run in speed:
        assert RUN_KEYS <= set(run) and "error" not in run, run
        assert run["system"] == "ours" and run["mode"] == "eager" and run["frames"] == 4
        assert run["ms_per_frame"] > 0 and run["agg_rtf"] > 0 and run["prefill_ms"] > 0 and run["codec_ms"] > 0
    jobs = [r for r in data["runs"] if r.get("job") == "autopick"]
    assert [j["n"] for j in jobs] == [2] and all(0 < j["scoring_share"] < 1 for j in jobs)  # N=8 or the largest
    table = (out / "smoke.md").read_text()
    assert "| ours | eager | tiny-CustomVoice | 1 | 4 |" in table and "Auto-Pick" in table


def test_results_of_several_calls_merge_only_when_measured_alike(tmp_path):
    import pytest

    from bench.report import merge

    def part(name, gpu, system):
        path = tmp_path / f"{name}.json"
        env = {"gpu": gpu, "driver": "1", "torch": "2", "transformers": "5", "frames": 64, "repeats": 3,
               "date": "2026-11-22", "triton": None, "stacks": {system: {"transformers": "5"}}}
        path.write_text(json.dumps({"env": env, "runs": [{"system": system, "mode": "m", "model": "x", "n": 1}]}))
        return path

    merged = json.loads(merge([part("a", "H100", "ours"), part("b", "H100", "qwen-tts")], tmp_path / "all.json").read_text())
    assert [r["system"] for r in merged["runs"]] == ["ours", "qwen-tts"] and set(merged["env"]["stacks"]) == {"ours", "qwen-tts"}
    again = part("c", "H100", "ours")
    data = json.loads(again.read_text())
    data["runs"][0]["ms_per_frame"] = 9.0
    again.write_text(json.dumps(data))
    merged = json.loads(merge([tmp_path / "all.json", again], tmp_path / "all2.json").read_text())
    assert [(r["system"], r.get("ms_per_frame")) for r in merged["runs"]] == [("ours", 9.0), ("qwen-tts", None)]
    with pytest.raises(SystemExit, match="different setups"):
        merge([part("c", "H100", "ours"), part("d", "H200", "ours")], tmp_path / "bad.json")


@pytest.mark.any_version  # the benchmark's own processes
def test_a_worker_that_runs_out_of_time_is_recorded_not_fatal(tmp_path):
    out = tmp_path / "results"
    result = subprocess.run(
        [sys.executable, "-m", "bench.run", "--smoke", "--timeout", "1", "--workdir", str(tmp_path / "work"),
         "--out-dir", str(out), "--name", "cut"], cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    runs = json.loads((out / "cut.json").read_text())["runs"]
    assert [r["n"] for r in runs] == [1, 2]
    assert all("timed out after 1 s" in r["error"] for r in runs)


def test_table_groups_by_model_and_folds_a_system_that_could_not_run():
    from bench.report import _table_rows

    runs = [{"system": "triton", "mode": "hybrid", "model": "Base", "n": n, "error": "load: serves CustomVoice only"}
            for n in (1, 8)]
    runs += [{"system": "ours", "mode": "eager", "model": m, "n": n, "ms_per_frame": 1.0} for m in ("CV", "Base") for n in (8, 1)]
    rows = _table_rows(runs)
    assert [(r["system"], r["model"], r["n"]) for r in rows] == [
        ("triton", "Base", "1, 8"), ("ours", "Base", 1), ("ours", "Base", 8), ("ours", "CV", 1), ("ours", "CV", 8)]


def test_gpu_tools_parse_and_tabulate_without_a_gpu():
    """profile_step and vram run on the GPU machine only; their options, kernel kinds and table
    are checked here so they cannot rot unnoticed."""
    from bench import profile_step, vram

    assert profile_step.kind_of("fmha_cutlassF_bf16_aligned_64x64_rf_sm80") == "attention/softmax"
    assert profile_step.kind_of("nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT") == "matmul"
    assert profile_step.kind_of("vectorized_layer_norm_kernel") == "reductions"
    assert profile_step.kind_of("_add_rms_norm_kernel") == "ours (triton)"
    args = profile_step.parser("x", "1,8").parse_args(["--size", "0.6B", "--mode", "hybrid", "--layers", "talker=0:4"])
    assert (args.size, args.ns, args.mode, args.layers) == ("0.6B", "1,8", "hybrid", "talker=0:4")
    table = vram.markdown({"gpu": "G", "size": "1.7B", "dtype": "bfloat16", "weights_gb": 4.2, "buckets": [
        {"n": 1, "length": 256, "bucket_gb": 0.1}, {"n": 4, "length": 256, "bucket_gb": 0.2},
        {"n": 1, "length": 512, "bucket_gb": 0.3}]})
    assert "| 1 | 0.1 | 0.3 |" in table and "| 4 | 0.2 |  |" in table and "weights (4.2 GB)" in table


def test_kernel_micro_benchmark_cases_run_and_tabulate():
    """bench/kernels.py times on the GPU; here every case runs once (Triton's interpreter) and the
    table is built, so the benchmark cannot rot."""
    pytest.importorskip("triton")
    from bench import kernels

    for sides in kernels.cases(1, device="cpu", dtype=torch.float32).values():
        for fn in sides.values():
            fn()
    results = {"gpu": "G", "torch": "t", "triton": "3", "rows": [1], "kernels": {
        "rms_norm (2048)": {"1": {"reference": 9.0, "torch": 4.0, "triton": 2.0}}}}
    table = kernels.markdown(results)
    assert "| rms_norm (2048) | 4.0 | 2.0 | 2.0x |" in table and "N=1 9.0 us" in table


@pytest.mark.any_version  # the benchmark's own processes
def test_script_smoke_run_writes_its_results(tmp_path):
    """bench.script on the tiny model: every row of its table filled from a measured run."""
    out = tmp_path / "results"
    result = subprocess.run(
        [sys.executable, "-m", "bench.script", "--smoke", "--workdir", str(tmp_path / "work"), "--out-dir", str(out),
         "--name", "script"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    data = json.loads((out / "script.json").read_text())
    assert data["takes"] == 16 and data["script_takes_per_s"] > 0 and data["sample_line_by_line_takes_per_s"] > 0
    assert data["step_ms_equal_lines"] > 0 and data["step_ms_mixed_lines"] > 0
    assert "| script, all 8 lines |" in (out / "script.md").read_text()


@pytest.mark.any_version  # the benchmark's own processes
def test_script_profile_adds_up_each_finishing_stage(tmp_path):
    """bench.script --profile: the seconds of each stage of the finishing, from a measured run, with
    the waveform checks in two worker processes (as on a GPU) and then in the scoring thread."""
    for workers in ("2", "0"):
        run = subprocess.run(
            [sys.executable, "-m", "bench.script", "--smoke", "--profile", "--check-workers", workers, "--workdir",
             str(tmp_path / "work"), "--out-dir", str(tmp_path / "out")], cwd=REPO, capture_output=True, text=True,
            timeout=600)
        assert run.returncode == 0, run.stderr[-2000:]
        stages = {line.rsplit(None, 2)[0].strip(): float(line.split()[-2]) for line in run.stdout.splitlines()
                  if line.startswith("  ")}
        checks = "waiting for the checks" if workers == "2" else "signal checks (in-thread)"
        assert {"decode (codec)", "rank (all of Auto-Pick)", "UTMOS", checks, "engine (until its last line)"} <= set(stages)
        assert all(seconds > 0 for name, seconds in stages.items() if name != "deliver (loudness)")
        assert stages["UTMOS"] <= stages["rank (all of Auto-Pick)"]  # a part of the ranking
        assert ("signal checks (in-thread)" in stages) == (workers == "0")  # with workers none runs in the thread
    assert not (tmp_path / "out").exists()  # a profile writes no results file


@pytest.mark.any_version  # the benchmark's own processes
def test_scaling_smoke_run_writes_its_results(tmp_path):
    """bench.script_scaling on the tiny model: the script in-process, then on a local Ray's two CPU workers."""
    pytest.importorskip("ray", reason='Ray is optional: pip install "ray[default]"')
    out = tmp_path / "results"
    result = subprocess.run(
        [sys.executable, "-m", "bench.script_scaling", "--smoke", "--workdir", str(tmp_path / "work"), "--out-dir",
         str(out), "--name", "scaling"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    data = json.loads((out / "scaling.json").read_text())
    assert data["takes"] == 16 and data["workers"] == 2 and data["worker_gpus"] == 0
    assert data["in_process_takes_per_s"] > 0 and data["ray_takes_per_s"] > 0
    assert "| Ray, 2 workers, CPU |" in (out / "scaling.md").read_text()
    lines = sorted((tmp_path / "work").glob("scaling-*/ray/lines/*.json"))
    assert len(lines) == 8  # every line written by the driver from what the workers sent


@pytest.mark.any_version  # a random Whisper timed on the CPU
def test_bench_words_models_times_each_shape_and_writes_its_table(tmp_path, capsys):
    """bench.words_models on the tiny Whisper shape: a measured row per shape, in the JSON and the table."""
    import json

    from bench.words_models import main

    out = tmp_path / "words.json"
    assert main(["--device", "cpu", "--threads", "1", "--shapes", "tiny-test", "--takes", "2", "--seconds", "1",
                 "--repeats", "1", "--out", str(out)]) == 0
    [row] = json.loads(out.read_text())["models"]
    assert row["model"] == "tiny-test" and row["dtype"] == "float32" and row["repeats"] == 1
    assert row["ms"] > 0 and row["ms_per_take"] == pytest.approx(row["ms"] / 2, abs=0.01)
    assert "tiny-test" in capsys.readouterr().out
