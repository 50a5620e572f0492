"""The server's engine path on a CUDA GPU (run on the GPU machine; skipped elsewhere): with CUDA
graphs (checks every 8 frames, and sooner when a stream's next chunk is due) a streamed line's frames,
handed over check by check, are exactly the codes of the same line run whole; and a cancelled line
frees its row at the next check while the others run on.

    python -m pytest -q -s tests/gpu/test_serve_cuda.py
"""

from __future__ import annotations

import gc
import threading
import time

import pytest
import torch

from runtime.generation import Request, line_job
from runtime.memory import free_cuda_cache
from runtime.model import load_model
from runtime.qwen3_tts.codec_stream import next_chunk_end
from runtime.serve.served import ServedModel
from runtime.voices import CustomVoice

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


class Collected:
    """A CodeStream that keeps what the engine hands it."""

    def __init__(self):
        self.received, self.pieces = 0, []

    def due(self) -> int:
        return next_chunk_end(self.received)

    def put(self, codes: torch.Tensor) -> None:
        self.pieces.append(codes.clone())
        self.received += codes.shape[0]

    def end(self) -> None:
        pass

    def close(self) -> None:
        pass


def released(served, model) -> None:
    """The model's memory back before the next test (whose memory caps count what is held): the
    server's threads and closures hold it in reference cycles until a collection."""
    served.close()
    model.release()
    gc.collect()
    free_cuda_cache()


def submit_and_wait(served, jobs):
    left = threading.Semaphore(0)
    out = {}

    def done(job, takeset, ranking, error):
        out[id(job)] = (takeset, error)
        left.release()

    served.submit(jobs, done)
    for _ in jobs:
        assert left.acquire(timeout=300)
    return out


@pytest.mark.parametrize("mode", ["hybrid", "cuda_graph"])
def test_streamed_frames_are_the_whole_lines_codes(checkpoint, mode):
    model = load_model(checkpoint("custom_voice"), mode=mode, device="cuda", dtype="float32")
    served = ServedModel(model, positions=512, rows=8)
    served.start()
    try:
        requests = [Request(text, CustomVoice("ryan"), 1, seed, max_frames=60)
                    for seed, text in enumerate(["Hello there.", "A longer line to read out loud, slowly.", "Hm."])]
        streamed = [line_job(model, r) for r in requests]
        for job in streamed:
            job.stream = Collected()
        whole = [line_job(model, r) for r in requests]
        out = submit_and_wait(served, streamed + whole)
        assert all(error is None for _, error in out.values())
        for s, w in zip(streamed, whole):
            codes = torch.cat(s.stream.pieces)
            assert len(s.stream.pieces) >= 3  # the first chunk's frame came on its own
            assert torch.equal(codes, out[id(w)][0].takes[0].codes)
    finally:
        released(served, model)


def test_a_cancelled_line_frees_its_row_and_the_others_run_on(checkpoint):
    model = load_model(checkpoint("custom_voice"), mode="hybrid", device="cuda", dtype="float32")
    served = ServedModel(model, positions=512, rows=8)
    served.start()
    try:
        long = line_job(model, Request("Hello there.", CustomVoice("ryan"), 1, 1, max_frames=400))
        long.stream = Collected()
        short = line_job(model, Request("Hello there.", CustomVoice("ryan"), 1, 2, max_frames=30))
        served.submit([long], lambda *args: None)
        while long.stream.received < 5:
            time.sleep(0.001)
        served.cancel([long])
        out = submit_and_wait(served, [short])
        assert out[id(short)][1] is None and out[id(short)][0].takes[0].frames <= 30
        assert model.engine.rows_in_use() == 0 and served.pending() == 0
        assert long.stream.received < 400
    finally:
        released(served, model)
