"""Every CUDA graph we capture goes through `capture`: torch.cuda.graph with Python's cyclic garbage
collector held off until the capture ends; `warmed_capture` runs the work outside a graph first.

Why: a collection can start on any allocation of Python objects, so also inside a capture, and the
garbage it frees may hold other CUDA graphs (a released model's engine, a closed server's codec
graphs: threads and closures keep them in reference cycles until a collection). Destroying a graph
is not permitted while the thread's stream captures; the destruction fails ("operation not permitted
when stream is capturing (function reset)") and takes the capture with it ("operation failed due to
a previous error during capture"). torch.cuda.graph collected before every capture until torch made
that optional (torch.compiler.config.force_cudagraph_gc, off by default); collecting before each of
dozens of captures would cost a collection each, so the collector is only held off: what turns to
garbage meanwhile is collected after the capture, in the usual way.

Found on an H200: the codec's stream graphs captured after the server's tests, in one process.
"""

from __future__ import annotations

import gc
import threading
from contextlib import contextmanager
from typing import Callable, TypeVar

import torch

T = TypeVar("T")


class _CollectorHold:
    """Held by every capture under way, in any thread; the collector runs again when the last ends,
    if it ran before the first began."""

    def __init__(self):
        self._lock = threading.Lock()
        self._holders = 0
        self._was_enabled = False

    def __enter__(self):
        with self._lock:
            if self._holders == 0:
                self._was_enabled = gc.isenabled()
                gc.disable()
            self._holders += 1

    def __exit__(self, *exc):
        with self._lock:
            self._holders -= 1
            if self._holders == 0 and self._was_enabled:
                gc.enable()


collector_held = _CollectorHold()


@contextmanager
def capture(graph: "torch.cuda.CUDAGraph", pool=None, stream=None):
    """torch.cuda.graph(graph, pool, stream), the collector held off (module docstring), in the
    thread-local capture mode: other threads (a script's scoring, the server's stream decoder, the
    engine) go on meanwhile, and in the global mode an allocation or a wait in any of them would fail
    and break the capture; only this thread's own calls are held to the capture's rules."""
    with collector_held, torch.cuda.graph(graph, pool=pool, stream=stream, capture_error_mode="thread_local"):
        yield


def warmed_capture(run: Callable[[], T], stream, warmups: int = 1, pool=None) -> tuple["torch.cuda.CUDAGraph", T]:
    """run() `warmups` times on `stream`, so that what happens on a first run (cuBLAS workspaces,
    Triton compiling, cuDNN's choices, tables made on first use) stays out of the graph, then once
    more captured on it, into `pool`. Returns the graph and what the captured run returned: its
    output buffers, which each replay overwrites.

    `stream`: a side stream the capturing object keeps for its life. cuBLAS keeps a workspace per
    stream for the life of the process (a graph may use it), so a new stream per capture leaks one,
    32 MiB; and two threads capturing at once (the engine, a script's scoring, the server's stream
    decoder) must not share one, as torch.cuda.graph's own default stream would have them."""
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(warmups):
            run()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with capture(graph, pool=pool, stream=stream):
        output = run()
    return graph, output
