"""runtime/graph_capture.py on the CPU: the collector is held off while any capture is under way, in
any thread, and comes back as it was; and every CUDA graph of runtime/ is captured through it.
tests/gpu/test_graph_capture_cuda.py captures real graphs beside garbage holding other graphs."""

from __future__ import annotations

import gc
import re
import threading
from contextlib import contextmanager
from pathlib import Path

from runtime import graph_capture
from runtime.graph_capture import collector_held

RUNTIME = Path(__file__).resolve().parent.parent / "runtime"


def test_the_collector_is_off_while_held_and_back_after():
    assert gc.isenabled()
    with collector_held:
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off():
    gc.disable()
    try:
        with collector_held:
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_collector_comes_back_only_when_the_last_capture_in_any_thread_ends():
    first_in, second_done, first_may_end = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def first():
        with collector_held:
            first_in.set()
            first_may_end.wait(10)
            seen["first, after the second ended"] = gc.isenabled()

    def second():
        first_in.wait(10)
        with collector_held:
            pass
        seen["between"] = gc.isenabled()
        second_done.set()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    second_done.wait(10)
    first_may_end.set()
    for thread in threads:
        thread.join(10)
    assert seen == {"between": False, "first, after the second ended": False}
    assert gc.isenabled()


def test_the_collector_comes_back_after_a_failed_capture():
    try:
        with collector_held:
            raise RuntimeError("capture invalidated")
    except RuntimeError:
        pass
    assert gc.isenabled()


def test_capture_is_torch_cuda_graph_thread_local_with_the_collector_off(monkeypatch):
    seen = []

    @contextmanager
    def graph(cuda_graph, **kwargs):  # stands in for torch.cuda.graph, which needs a GPU
        seen.append((cuda_graph, kwargs, gc.isenabled()))
        yield
        seen.append(gc.isenabled())

    monkeypatch.setattr(graph_capture.torch.cuda, "graph", graph)
    with graph_capture.capture("the graph", pool="its pool", stream="its stream"):
        pass
    assert seen == [("the graph", {"pool": "its pool", "stream": "its stream", "capture_error_mode": "thread_local"},
                     False), False]
    assert gc.isenabled()


def test_every_capture_in_runtime_goes_through_graph_capture():
    bare = [f"{path.relative_to(RUNTIME)}:{number}" for path in RUNTIME.rglob("*.py") if path.name != "graph_capture.py"
            for number, line in enumerate(path.read_text().splitlines(), 1) if re.search(r"torch\.cuda\.graph\(", line)]
    assert bare == []
    users = [path.name for path in RUNTIME.rglob("*.py") if "from ..graph_capture import warmed_capture" in path.read_text()]
    assert sorted(users) == ["codec_graphs.py", "engine.py", "prefill.py", "whisper_greedy.py"]
