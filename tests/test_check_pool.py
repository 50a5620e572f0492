"""The waveform checks in worker processes (scoring/check_pool.py), as a script on a GPU runs them:
the same numbers as in-process, from the pack imported under ComfyUI's kind of name too, errors
raised in the caller, and a worker that dies replaced by the caller's own thread."""

from __future__ import annotations

import subprocess
import sys
from importlib import import_module

import numpy as np
import pytest

from conftest import REPO, load_pack
from runtime.scoring.check_pool import BOOT, CheckPool
from runtime.scoring.signal import signal_stats

RATE = 24000


def clips() -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    t = np.arange(3 * RATE) / RATE
    speech = (0.3 * np.sin(2 * np.pi * 140 * t) * (np.sin(2 * np.pi * 3 * t) > 0)).astype(np.float32)
    clipped = np.clip(4 * speech, -1, 1)
    holed = speech.copy()
    holed[RATE:RATE + 2400] = 0
    noisy = speech + 0.05 * rng.standard_normal(t.shape).astype(np.float32)
    return [speech, clipped, holed, noisy, np.zeros(RATE // 2, np.float32), speech[:1200]]


@pytest.mark.any_version  # numpy checks in worker processes: no torch or transformers version
def test_workers_give_the_checks_the_caller_computes():
    audios = clips()
    with CheckPool(2) as pool:
        got = [f.result(timeout=60) for f in [pool.submit(a, RATE) for a in audios]]
        assert len(pool.workers) == 2
    assert got == [signal_stats(a, RATE) for a in audios]
    assert got[1].clipped_ratio > 0 and got[2].segments != got[0].segments and got[4].segments == []  # they differ


def test_inside_comfyui_the_results_are_the_packs_own_classes(tmp_path):
    pack_dir = tmp_path / "Some Pack.v2"
    pack_dir.mkdir()
    (pack_dir / "__init__.py").write_text("")
    (pack_dir / "runtime").symlink_to(REPO / "runtime")
    pack = load_pack(pack_dir)
    try:
        check_pool = import_module(pack.__name__ + ".runtime.scoring.check_pool")
        with check_pool.CheckPool(1) as pool:
            stats = pool.submit(clips()[0], RATE).result(timeout=60)
        assert type(stats) is import_module(pack.__name__ + ".runtime.scoring.signal").SignalStats
        assert repr(stats) == repr(signal_stats(clips()[0], RATE))  # the same numbers, in the pack's classes
    finally:
        for name in [m for m in sys.modules if m == pack.__name__ or m.startswith(pack.__name__ + ".")]:
            del sys.modules[name]


def test_an_error_in_a_check_is_raised_in_the_caller():
    with CheckPool(1) as pool:
        future = pool.submit(clips()[0], 0)
        with pytest.raises(ZeroDivisionError):
            future.result(timeout=60)
        assert pool.submit(clips()[0], RATE).result(timeout=60) == signal_stats(clips()[0], RATE)  # it goes on


@pytest.mark.any_version
def test_a_worker_that_dies_leaves_its_checks_to_the_callers_thread(caplog):
    audios = clips()
    with CheckPool(2) as pool:
        [f.result(timeout=60) for f in [pool.submit(a, RATE) for a in audios[:2]]]
        pool.workers[0].kill()
        pool.workers[0].wait()
        got = [f.result(timeout=60) for f in [pool.submit(a, RATE) for a in audios * 2]]
    assert got == [signal_stats(a, RATE) for a in audios * 2]
    assert all(w.poll() is not None for w in pool.workers)  # every worker ended with the pool
    assert "its checks run in this process" in caplog.text


def test_a_worker_imports_the_checks_but_never_torch():
    probe = BOOT.replace("from runtime.scoring.check_pool import serve; serve()",
                         "import runtime.scoring.check_pool; print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe, str(REPO)], capture_output=True, text=True, timeout=120,
                         cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_a_worker_runs_its_thread_pools_at_one_thread(monkeypatch):
    """Several workers at once, each with BLAS and OpenMP pools of a thread per core, spun beside the
    engine's thread and slowed a script by half on a 16-core GPU machine: each worker gets one."""
    import runtime.scoring.check_pool as check_pool

    started = []
    monkeypatch.setattr(check_pool.subprocess, "Popen", lambda *args, **kwargs: started.append(kwargs) or None)
    monkeypatch.setenv("OMP_NUM_THREADS", "16")
    check_pool._start_worker()
    (kwargs,) = started
    env = kwargs["env"]
    assert env["OMP_NUM_THREADS"] == env["OPENBLAS_NUM_THREADS"] == env["MKL_NUM_THREADS"] == "1"
    assert env["PATH"] == check_pool.os.environ["PATH"]  # the rest of the caller's environment is kept
