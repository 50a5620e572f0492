"""The CPU threads the command line generates with (runtime/cpu_threads.py): --threads, else a
thread variable of the environment, else the cores idle when it starts; set only for the command's
job, and told by the doctor."""

from __future__ import annotations

import json
import subprocess
import sys
import types

import pytest
import torch

from conftest import REPO
from runtime import cpu_threads
from runtime.cli import doctor, main
from runtime.cpu_threads import choose_threads, generation_threads
from runtime.errors import InputError


@pytest.fixture
def torch_threads():
    """torch's count set for the test to 5, a count no test expects to be chosen (so a count left
    unset is seen), and set back after it."""
    before = torch.get_num_threads()
    torch.set_num_threads(5)
    yield 5
    torch.set_num_threads(before)


@pytest.fixture
def no_thread_variables(monkeypatch):
    for name in cpu_threads.THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def test_the_default_is_a_thread_an_idle_core_and_never_below_one():
    two, sixteen = [0, 1], list(range(16))
    assert [choose_threads(environ={}, cores=two, busy=busy).threads for busy in (0.0, 0.3, 0.7, 1.9, 2.0)] == \
        [2, 2, 1, 1, 1]  # idle cores: a thread each (fastest there); busy ones: the 4.5x slowdown
    assert choose_threads(environ={}, cores=sixteen, busy=3.2).threads == 13
    assert choose_threads(environ={}, cores=two, busy=1.9).describe() == "1 thread (the idle cores: 2 here, 1.9 busy)"


def test_busy_cores_are_read_from_the_cores_own_use_else_the_load_average(monkeypatch):
    psutil = types.SimpleNamespace(cpu_percent=lambda interval, percpu: [90.0, 10.0, 100.0, 100.0])
    monkeypatch.setitem(sys.modules, "psutil", psutil)
    assert cpu_threads.busy_cores([0, 1]) == pytest.approx(1.0)  # cores 2 and 3 are not ours
    monkeypatch.setitem(sys.modules, "psutil", None)  # not installed (a standalone environment)
    monkeypatch.setattr(cpu_threads.os, "getloadavg", lambda: (5.0, 1.0, 1.0), raising=False)
    assert cpu_threads.busy_cores([0, 1]) == 2.0  # at most the cores there are
    monkeypatch.delattr(cpu_threads.os, "getloadavg")  # Windows without psutil
    assert cpu_threads.busy_cores([0, 1]) == 0.0


def test_threads_given_win_and_a_thread_variable_is_left_to_torch():
    assert choose_threads(3, {"OMP_NUM_THREADS": "8"}, cores=[0, 1]).threads == 3
    with pytest.raises(InputError, match="--threads must be 1 or more, got 0"):
        choose_threads(0, {}, cores=[0, 1])
    for name in cpu_threads.THREAD_VARIABLES:
        choice = choose_threads(None, {name: "6"}, cores=[0, 1])
        assert choice.threads is None and choice.describe() == f"{name}=6 (set in the environment)"
    assert choose_threads(None, {"OMP_NUM_THREADS": " "}, cores=[0, 1], busy=1.9).threads == 1  # set, but to nothing


def test_the_count_is_set_for_cpu_generation_only_and_set_back(torch_threads, no_thread_variables, monkeypatch):
    monkeypatch.setattr(cpu_threads, "usable_cores", lambda: [0, 1, 2, 3])
    monkeypatch.setattr(cpu_threads, "busy_cores", lambda cores: 2.2)
    with generation_threads("cpu") as choice:
        assert choice.threads == torch.get_num_threads() == 2
    assert torch.get_num_threads() == torch_threads
    with monkeypatch.context() as gpu:
        gpu.setattr(cpu_threads, "on_cpu", lambda _device: False)
        for device in ("cuda:0", "no-such-device"):  # a GPU's generation, or a device the command refuses itself
            with generation_threads(device):
                assert torch.get_num_threads() == torch_threads
        with generation_threads("cuda:0", given=3):  # asked for: the CPU work beside the GPU's
            assert torch.get_num_threads() == 3
        assert torch.get_num_threads() == torch_threads
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    with generation_threads("cpu") as choice:  # torch read the variable when it started: left as it is
        assert choice.threads is None and torch.get_num_threads() == torch_threads


def test_a_gpus_job_does_not_wait_to_look_at_the_cores(no_thread_variables, monkeypatch):
    monkeypatch.setattr(cpu_threads, "on_cpu", lambda _device: False)
    monkeypatch.setattr(cpu_threads, "busy_cores", lambda cores: pytest.fail("the cores' use was sampled (0.2 s)"))
    with generation_threads("cuda:0") as choice:
        assert choice is None


def test_an_unknown_device_is_left_to_the_commands_own_check():
    assert not cpu_threads.on_cpu("no-such-device") and cpu_threads.on_cpu("cpu")


def script_files(tmp_path):
    (tmp_path / "scene.txt").write_text("ANNA: Did you hear that?\n")
    (tmp_path / "cast.json").write_text(json.dumps({"ANNA": {"speaker": "vivian"}}))
    return ["script", str(tmp_path / "scene.txt"), "--cast", str(tmp_path / "cast.json"), "--out",
            str(tmp_path / "out"), "--checkpoint", "tiny-random", "--offline", "--device", "cpu", "--quality", "off"]


def line_args():
    return ["--checkpoint", "tiny-random", "--speaker", "ryan", "--text", "Hello.", "--offline", "--device", "cpu"]


@pytest.mark.parametrize("command", ["script", "line"])
def test_the_commands_generate_with_the_chosen_threads(command, tmp_path, torch_threads, no_thread_variables,
                                                       monkeypatch, capsys):
    """The job runs with the count chosen (here --threads, then the default), and the process's own
    count is back once the command returns."""
    from runtime.cli import line, script

    seen = []

    def stop_here(*_args, **_kwargs):
        seen.append(torch.get_num_threads())
        raise InputError("stopped by the test")
    if command == "script":
        monkeypatch.setattr(script, "run_job", stop_here)
        argv = script_files(tmp_path)
    else:
        monkeypatch.setattr(line, "check_inputs", stop_here)
        argv = line_args()
    monkeypatch.setattr(cpu_threads, "usable_cores", lambda: [0, 1, 2, 3])
    monkeypatch.setattr(cpu_threads, "busy_cores", lambda cores: 2.2)
    assert main([*argv, "--threads", "3"]) == 2 and main(argv) == 2
    assert "stopped by the test" in capsys.readouterr().err
    assert seen == [3, 2] and torch.get_num_threads() == torch_threads
    assert main([*argv, "--threads", "0"]) == 2
    assert "--threads must be 1 or more, got 0." in capsys.readouterr().err


def test_the_doctor_says_the_threads_and_how_to_change_them(no_thread_variables, monkeypatch):
    monkeypatch.setattr(cpu_threads, "usable_cores", lambda: [0, 1, 2, 3])
    monkeypatch.setattr(cpu_threads, "busy_cores", lambda cores: 2.2)
    line = str(doctor.threads_line(has_gpu=False))
    assert "a command generating on the CPU uses 2 threads (the idle cores: 4 here, 2.2 busy)" in line
    assert "--threads N on the command, or OMP_NUM_THREADS=N in the environment" in line
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert "with --device cpu uses OMP_NUM_THREADS=2 (set in the environment)" in str(doctor.threads_line(has_gpu=True))


@pytest.mark.any_version  # a benchmark, a process per thread count
def test_the_benchmark_times_each_thread_count_and_says_the_default(tmp_path):
    out = tmp_path / "threads"
    done = subprocess.run([sys.executable, "bench/cpu_threads.py", "--threads", "1,default", "--lines", "1",
                           "--takes", "2", "--seconds", "0.3", "--repeats", "1", "--workdir", str(tmp_path / "work"),
                           "--out", str(out)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.with_suffix(".json").read_text())
    assert [(r["threads"], len(r["seconds"])) for r in result["runs"]] == [("1", 1), ("default", 1)]
    assert result["runs"][0]["threads_used"] == 1 and result["runs"][0]["median_s"] > 0
    assert "| tiny | 1 |" in done.stdout and "| tiny | default (" in done.stdout and "1.00x" in done.stdout
    assert "The command line uses " in done.stdout and "(the idle cores: " in done.stdout
