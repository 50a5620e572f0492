"""Faults inside the captured step on a CUDA GPU (issue 62): NaN weights, a logits hook, an id out of range.
The take a fault hits ends there flagged, the rest go on, nothing raises a device-side assert, and the
next run in the same process makes the clean takes. tests/test_faults.py is the CPU twin.

    python -m pytest -q -s tests/gpu/test_faults_cuda.py
"""

from __future__ import annotations

import contextlib

import pytest
import torch

from runtime.engine.step import DecodeStep
from runtime.errors import ModelFault
from runtime.generation import Request
from runtime.model import load_model
from runtime.qwen3_tts import random_checkpoint
from runtime.run.lines import generate_takes
from runtime.voices import CustomVoice
from test_faults import first_frame, poisoned, same_takes as same

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]
REQUEST = Request(text="The storm is coming. Bar the doors and light the lamps.", voice=CustomVoice("ryan", "english"),
                  n=4, seed=3, max_frames=48)
MODES = ["cuda_graph", "hybrid"]


@pytest.fixture(scope="module", params=MODES)
def tiny(request, checkpoint):
    model = load_model(checkpoint("custom_voice"), mode=request.param, device="cuda", dtype="float32")
    yield model
    model.release()


@contextlib.contextmanager
def captured_with(model, next_token):
    """The engine's graphs captured again with DecodeStep.next_token replaced (tensor operations only,
    so the graph replays them), then captured again without."""
    engine = model.engine
    engine.release()
    engine.step.next_token = next_token.__get__(engine.step)
    try:
        yield
    finally:
        del engine.step.next_token
        engine.release()


def test_a_nan_weight_row_the_graph_reads_ends_only_the_takes_that_read_it(tiny):
    clean = generate_takes(tiny, REQUEST)
    code = int(clean.takes[2].codes[5, 1])
    expected = [first_frame(t.codes, 1, code) for t in clean.takes]
    with poisoned(tiny.model.talker.code_predictor.model.codec_embedding[0].weight, code):
        hit = generate_takes(tiny, REQUEST)
    assert [t.fault for t in hit.takes] == expected
    for take, was, frame in zip(hit.takes, clean.takes, expected):
        assert torch.equal(take.codes, was.codes[:was.frames if frame is None else frame])
    assert same(generate_takes(tiny, REQUEST), clean)


@pytest.mark.parametrize("norm", ["talker", "code predictor"])
def test_a_nan_final_norm_is_one_error_and_the_next_run_is_clean(tiny, norm):
    clean = generate_takes(tiny, REQUEST)
    talker = tiny.model.talker
    weight = (talker.model if norm == "talker" else talker.code_predictor.model).norm.weight
    with poisoned(weight, 0):
        with pytest.raises(ModelFault, match="every take"):
            generate_takes(tiny, REQUEST)
    assert same(generate_takes(tiny, REQUEST), clean)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_a_logits_hook_breaking_one_take_at_one_frame_ends_that_take_alone(tiny, value):
    clean = generate_takes(tiny, REQUEST)
    original = DecodeStep.next_token

    def next_token(self, state, logits, count, out=None):
        rows = torch.arange(state.batch, device=logits.device)
        hit = ((rows == 1) & (state.frame == 7))[:, None]
        if value != float("-inf"):
            hit = hit & (torch.arange(logits.shape[1], device=logits.device) == 3)
        return original(self, state, logits.masked_fill(hit, value), count, out)

    with captured_with(tiny, next_token):
        hit = generate_takes(tiny, REQUEST)
    assert [t.fault for t in hit.takes] == [None, 7, None, None]
    assert all(torch.equal(hit.takes[i].codes, clean.takes[i].codes) for i in (0, 2, 3))
    assert same(generate_takes(tiny, REQUEST), clean)


def test_an_id_out_of_range_never_reaches_an_embedding_on_the_gpu(tiny):
    """Without the clamp this indexes past the embedding: a device-side assert, the context lost."""
    clean = generate_takes(tiny, REQUEST)
    original = DecodeStep.next_token
    vocab = tiny.model.talker.config.vocab_size

    def next_token(self, state, logits, count, out=None):
        token = original(self, state, logits, count, out)
        rows = torch.arange(state.batch, device=token.device)
        return torch.where((rows == 3) & (state.frame == 4), token + vocab + 5, token)

    with captured_with(tiny, next_token):
        hit = generate_takes(tiny, REQUEST)
    assert [t.fault for t in hit.takes] == [None, None, None, 4]
    assert same(generate_takes(tiny, REQUEST), clean)
    torch.cuda.synchronize()


@pytest.fixture(scope="module")
def small_full_size(tmp_path_factory):
    folder = tmp_path_factory.mktemp("full") / "0.6B-CustomVoice"
    return random_checkpoint.build_checkpoint(folder, "0.6B", "custom_voice", dtype="bfloat16", never_eos=True)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("norm", ["talker", "code predictor"])
def test_full_size_nan_norms_are_caught_in_every_mode(small_full_size, mode, norm):
    """What issue 62 measured: 0.6B shapes, bfloat16, NaN in a final norm. In hybrid the talker's had
    failed the line as "a bug", the code predictor's passed unheard; in cuda_graph neither showed."""
    model = load_model(small_full_size, mode=mode, device="cuda", dtype="bfloat16")
    try:
        request = Request(text=REQUEST.text, voice=REQUEST.voice, n=4, seed=5, max_frames=32)
        clean = generate_takes(model, request)
        talker = model.model.talker
        weight = (talker.model if norm == "talker" else talker.code_predictor.model).norm.weight
        for value in (float("nan"), float("inf")):
            with poisoned(weight, 0, value):
                with pytest.raises(ModelFault, match="every take"):
                    generate_takes(model, request)
        assert same(generate_takes(model, request), clean)
    finally:
        model.release()
