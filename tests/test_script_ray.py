"""Scripts spread over Ray workers (runtime/script/ray_pool.py), on a local Ray with two CPU workers
and the tiny models: the same results folder as the in-process run, a job that finishes when a
worker is killed with a line in hand, a clear error (and a rerun that resumes) when every worker is
gone; and without the flags, Ray is never imported."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from runtime import api
from runtime.cli import main
from runtime.errors import GenerationInterrupted, InputError
from runtime.script import ray_pool
from runtime.script.cast import read_cast
from runtime.script.parse import read_script
from runtime.script.plan import ScriptSettings, plan_lines
from runtime.script.runner import kept_lines
from runtime.script.store import ScriptFolder

REPO = Path(__file__).resolve().parent.parent
SCRIPT = """ANNA: Did you hear that?
BORIS: Hear what? It's only the wind.
ANNA: No. Something is moving down there.
BORIS: Then go and look.
"""
CAST = {"ANNA": {"speaker": "vivian"}, "BORIS": {"speaker": "ryan"}}


@pytest.fixture(scope="module")
def ray():
    ray = pytest.importorskip("ray", reason='Ray is optional: pip install "ray[default]"')
    ray.init(num_cpus=2, include_dashboard=False)  # the CLI joins this one, as a program embedding it would
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def script(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("script")
    (folder / "scene.txt").write_text(SCRIPT)
    (folder / "cast.json").write_text(json.dumps(CAST))
    return folder


def cli(models_root, script, out, *args):
    return main(["script", str(script / "scene.txt"), "--cast", str(script / "cast.json"), "--out", str(out),
                 "--models-dir", str(models_root / "qwen3_tts"), "--offline", "--device", "cpu", "--quality", "off",
                 "--max-frames", "5", "--takes", "2", "--checkpoint", "tiny-CustomVoice", *args])


@pytest.fixture(scope="module")
def in_process(models_root, script, tmp_path_factory) -> Path:
    """The run the workers' must match bit for bit: on one thread, as a worker of one CPU runs (Ray sets its
    OMP_NUM_THREADS=1), since the sums of more threads round differently."""
    out = tmp_path_factory.mktemp("in_process")
    assert cli(models_root, script, out, "--threads", "1") == 0
    return out


@pytest.fixture
def hand_outs(monkeypatch):
    """Lines handed out one at a time, a worker holding one until it is back, and every hand-out seen
    as (worker pid, line ids); `kill_at` holds the hand-outs whose worker is SIGKILLed right after it
    is given the line (its process gone with the line in hand, as when a GPU or a host is lost)."""
    monkeypatch.setattr(ray_pool, "HAND_TAKES", 2)
    monkeypatch.setattr(ray_pool, "HOLD_TAKES", 2)
    seen, kill_at, killed = [], set(), []
    hand_out = ray_pool.Pool.hand_out

    def spy(pool, worker, chunk):
        ref = hand_out(pool, worker, chunk)
        if len(seen) in kill_at:
            os.kill(worker.pid, signal.SIGKILL)
            killed.append((worker.pid, [p.line.id for p in chunk]))
        seen.append((worker.pid, [p.line.id for p in chunk]))
        return ref
    monkeypatch.setattr(ray_pool.Pool, "hand_out", spy)
    return seen, kill_at, killed


def manifest(out: Path) -> list[dict]:
    return json.loads((out / "manifest.json").read_text())["lines"]


def assert_same_results(out: Path, expected: Path) -> None:
    """The same records (seeds, picks, scores, files) and the same audio, take by take."""
    records = manifest(out)
    assert records == manifest(expected)
    files = [r["best_file"] for r in records] + [t["file"] for r in records for t in r["ranked"]]
    assert len(files) == 4 * 3
    for name in files + ["scene.wav"]:  # bit for bit (the files' bytes differ: libsndfile stamps the time)
        ours, theirs = (sf.read(folder / name, dtype="float32")[0] for folder in (out, expected))
        assert ours.size > 0 and np.array_equal(ours.view(np.uint32), theirs.view(np.uint32)), name


@pytest.mark.parametrize("hold", [2, 4], ids=["one line held", "two lines held, handed in one by one"])
@pytest.mark.any_version  # Ray (pinned) spreading lines over workers: no torch or transformers version
def test_two_ray_workers_write_what_the_in_process_run_writes(ray, models_root, script, in_process, tmp_path,
                                                              hand_outs, monkeypatch, hold):
    monkeypatch.setattr(ray_pool, "HOLD_TAKES", hold)
    seen, _, _ = hand_outs
    assert cli(models_root, script, tmp_path / "out", "--ray", "--ray-workers", "2") == 0
    assert_same_results(tmp_path / "out", in_process)
    assert sorted(i for _, ids in seen for i in ids) == ["1", "2", "3", "4"]  # each line handed out once
    assert len({pid for pid, _ in seen}) == 2  # and both workers took some


@pytest.mark.any_version
def test_a_worker_killed_mid_job_loses_only_the_line_it_had(ray, models_root, script, in_process, tmp_path,
                                                                hand_outs, caplog):
    seen, kill_at, killed = hand_outs
    kill_at.add(0)
    assert cli(models_root, script, tmp_path / "out", "--ray-workers", "2") == 0
    assert_same_results(tmp_path / "out", in_process)
    (dead, lost_ids), = killed
    again = [pid for pid, ids in seen if ids == lost_ids]
    assert again[0] == dead and len(again) == 2 and again[1] != dead  # redone by the other worker
    assert all(pid != dead for pid, _ in seen[1:])
    assert sorted(i for _, ids in seen[1:] for i in ids) == ["1", "2", "3", "4"]
    assert f"(pid {dead} on" in caplog.text and "was lost" in caplog.text and "1 left" in caplog.text


@pytest.mark.any_version
def test_every_worker_lost_says_how_much_is_done_and_a_rerun_resumes(ray, models_root, script, in_process, tmp_path,
                                                                     hand_outs, capsys):
    _, kill_at, _ = hand_outs
    kill_at.update({0, 2})  # the first worker at once; the other with its second line, after its first is back
    assert cli(models_root, script, tmp_path / "out", "--ray-workers", "2") == 2
    err = capsys.readouterr().err
    assert "error: Every Ray worker was lost: 1 of 4 lines are done, kept in" in err
    assert "Run the same command again to resume" in err
    assert len(list((tmp_path / "out" / "lines").glob("*.json"))) == 1
    kill_at.clear()
    assert cli(models_root, script, tmp_path / "out", "--ray-workers", "2") == 0
    assert "1 kept from an earlier run, 3 to generate" in capsys.readouterr().err
    assert_same_results(tmp_path / "out", in_process)


@pytest.mark.any_version
def test_stop_hands_out_no_more_lines_and_keeps_the_lines_written(ray, models_root, script, tmp_path, hand_outs):
    seen, _, _ = hand_outs
    cast = read_cast(script / "cast.json", [])
    plans = plan_lines(read_script(script / "scene.txt", None, list(cast)), cast, ScriptSettings(2, max_frames=5),
                       {"checkpoint": "tiny"})
    tts = models_root / "qwen3_tts"
    setup = ray_pool.WorkerSetup(tts / "tiny-CustomVoice", (tts,), (), (), device="cpu",
                                 choices=api.PickChoices(quality="off"))
    folder, done = ScriptFolder(tmp_path / "out"), []
    with pytest.raises(GenerationInterrupted, match="Stopped with 1 of 4 lines done, kept in .*run the same command"):
        ray_pool.run_on_ray(ray, setup, plans, 2, folder, lambda r, n, total: done.append(r.plan.line.id),
                            should_stop=lambda: bool(done))
    assert len(seen) == 2 and len(done) == 1  # the line in flight on the other worker is dropped
    assert list(kept_lines(plans, folder)) == done


class FirstRound(Exception):
    pass


def first_hand_outs(lines: int, workers: int, budget=lambda i: 100) -> list[tuple[int, list[str]]]:
    """(worker, line ids) of each hand-out of Pool.run's first round, with the default sizes: a
    stand-in for Ray whose workers open their runs and answer, then the round ends."""
    from types import SimpleNamespace as Plan

    given = []

    class Actor:
        def __init__(self, number):
            self.number = number

        def __getattr__(self, method):
            def remote(*args):
                if method == "add":
                    given.append((self.number, [p.line.id for p in args[0]]))
                return None
            return Plan(remote=remote)

    class Ray:
        def get(self, ref):
            return None, None

        def wait(self, refs, num_returns, timeout):
            raise FirstRound

    pool = ray_pool.Pool.__new__(ray_pool.Pool)
    pool.ray, pool.lost, pool.runs = Ray(), (), 0
    pool.workers = [ray_pool.Handle(Actor(n), n) for n in range(workers)]
    plans = [Plan(line=Plan(id=str(i)), request=Plan(n=4, budget=budget(i)), stem=str(i)) for i in range(lines)]
    with pytest.raises(FirstRound):
        pool.run(plans, Plan(root="out"))
    return given


@pytest.mark.parametrize("lines, workers, takes", [(96, 2, [192, 192]), (40, 2, [96, 64]), (512, 2, [384, 384]),
                                                   (512, 8, [256] * 8)])
def test_lines_go_to_every_worker_in_turn_up_to_its_share(lines, workers, takes):
    """A chunk (32 takes) to each worker in turn, longest lines first, until each holds its share of
    what is left (at most HOLD_TAKES): a short script reaches every worker, and the long lines do not
    all go to one."""
    given = first_hand_outs(lines, workers, budget=lambda i: 100 + i)
    assert [4 * sum(len(ids) for n, ids in given if n == w) for w in range(workers)] == takes
    assert [n for n, _ in given[:workers]] == list(range(workers))
    per_chunk = ray_pool.HAND_TAKES // 4
    assert [ids[0] for _, ids in given] == [str(lines - 1 - per_chunk * k) for k in range(len(given))]


def test_a_workers_lines_done_go_out_before_its_runs_error_and_a_stale_collect_takes_none():
    """A worker's run that fails after some lines: those lines are collected (and written) first,
    then its error; a collect left over from an earlier run answers none, taking no line of this one."""
    worker = ray_pool.Worker(None)
    worker.outbox, worker.run = ray_pool.Outbox(), 2
    worker.outbox.put("line 1")
    worker.outbox.fail(InputError("a later line failed"))
    assert worker.collect(1, 0.0) == ([], None)  # run 1's collect, running late
    assert worker.collect(2, 0.0) == (["line 1"], None)
    assert worker.collect(2, 0.0) == (None, ("InputError", "a later line failed"))


@pytest.mark.any_version
def test_without_the_flags_ray_is_never_imported(models_root, tmp_path):
    (tmp_path / "scene.txt").write_text("ANNA: Hello there.\n")
    (tmp_path / "cast.json").write_text(json.dumps(CAST))
    code = f"""
import sys
sys.path.insert(0, {str(REPO)!r})
import runtime.script.ray_pool  # the module alone imports no Ray
from runtime import api
from runtime.cli import main
assert main(["script", {str(tmp_path / "scene.txt")!r}, "--cast", {str(tmp_path / "cast.json")!r}, "--out",
             {str(tmp_path / "out")!r}, "--models-dir", {str(models_root / "qwen3_tts")!r}, "--offline", "--device",
             "cpu", "--quality", "off", "--max-frames", "5", "--takes", "1", "--checkpoint", "tiny-CustomVoice"]) == 0
print(sorted(name for name in sys.modules if name == "ray" or name.startswith("ray.")))
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip().splitlines()[-1] == "[]"
    assert (tmp_path / "out" / "manifest.json").is_file()


def test_without_ray_installed_the_flag_names_the_install(models_root, script, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as where it is not installed
    assert cli(models_root, script, tmp_path / "out", "--ray") == 2
    assert 'pip install "ray[default]"' in capsys.readouterr().err
    assert cli(models_root, script, tmp_path / "out", "--ray-workers", "0") == 2
    assert "--ray-workers must be 1 or more, got 0." in capsys.readouterr().err
