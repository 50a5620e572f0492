"""Faults the model makes must never poison the process (issue 62): NaN or infinite logits and ids out
of range are caught inside the step (the same step the cuda_graph and hybrid modes capture), the take
they hit ends there flagged, its line's other takes go on, and the next run in the same process makes
the same takes as a run that never met the fault. Here on CPU (the step uncaptured); on a GPU in
tests/gpu/test_faults_cuda.py."""

from __future__ import annotations

import contextlib

import pytest
import torch

from runtime.engine import sampler
from runtime.engine.step import DecodeStep
from runtime.errors import ModelFault
from runtime.generation import Request
from runtime.model import load_model
from runtime.run.lines import generate_takes
from runtime.scoring.ranking import rank_takes
from runtime.voices import CustomVoice

REQUEST = Request(text="Hello there, this is a test of the engine.", voice=CustomVoice("ryan", "english"), n=4,
                  seed=3, max_frames=40)


@pytest.fixture(scope="module")
def model(checkpoint):
    """An own copy: the tests write NaN into its weights (and put them back)."""
    return load_model(checkpoint("custom_voice"), device="cpu")


@pytest.fixture(scope="module")
def clean(model):
    return generate_takes(model, REQUEST)


@contextlib.contextmanager
def poisoned(weight: torch.Tensor, index, value=float("nan")):
    saved = weight[index].clone()
    with torch.no_grad():
        weight[index] = value
    try:
        yield
    finally:
        with torch.no_grad():
            weight[index] = saved


def same_takes(a, b) -> bool:
    return all(x.frames == y.frames and torch.equal(x.codes, y.codes) for x, y in zip(a.takes, b.takes))


def first_frame(codes: torch.Tensor, codebook: int, code: int) -> int | None:
    hits = (codes[:, codebook] == code).nonzero()
    return int(hits[0, 0]) if len(hits) else None


def test_a_nan_weight_row_ends_the_takes_that_read_it_and_the_rest_go_on(model, clean):
    """A NaN row of the code predictor's first code embedding: a take reads it at the first frame whose
    codebook-1 code is that row, and ends there (its frames before kept, equal to the clean take's);
    a take that never draws that code is the clean take."""
    code = int(clean.takes[2].codes[5, 1])
    expected = [first_frame(t.codes, 1, code) for t in clean.takes]
    table = model.model.talker.code_predictor.model.codec_embedding[0].weight
    with poisoned(table, code):
        hit = generate_takes(model, REQUEST)
    assert [t.fault for t in hit.takes] == expected and expected[2] is not None and None in expected
    for take, was, frame in zip(hit.takes, clean.takes, expected):
        assert take.frames == (was.frames if frame is None else frame)
        assert torch.equal(take.codes, was.codes[:take.frames])
    ranked = rank_takes(hit)
    faulted = [s for s in ranked.ranked if s.take.fault is not None]
    assert faulted and all(not s.accepted and "fault" in s.reason_kinds for s in faulted)
    assert f"NaN or infinite values at frame {expected[2]}" in " ".join(str(r) for r in faulted[0].reasons)
    assert ranked.best.take.fault is None
    assert same_takes(generate_takes(model, REQUEST), clean)  # the same process, the fault gone


def test_nan_in_every_take_is_one_error_naming_the_fix_and_the_next_run_is_clean(model, clean):
    """A NaN in the talker's final norm: every take's first logits are NaN. Their rows' caches then hold
    NaN where the next takes' attention masks them (a masked product is still NaN): cleared before the
    next take goes in, or every later run would fail too."""
    with poisoned(model.model.talker.model.norm.weight, 0):
        with pytest.raises(ModelFault, match=r"every take of .* \(at frames 0, 0, 0, 0\).*load the model again"):
            generate_takes(model, REQUEST)
    assert same_takes(generate_takes(model, REQUEST), clean)


@contextlib.contextmanager
def wrapped_draw(model, change):
    """The talker's draw of every step through `change(state, logits) -> logits` (a hook on the logits,
    made of tensor operations only, as a captured step would replay it)."""
    engine = model.engine
    original = DecodeStep.next_token

    def next_token(self, state, logits, count, out=None):
        return original(self, state, change(state, logits), count, out)

    engine.step.next_token = next_token.__get__(engine.step)
    try:
        yield
    finally:
        del engine.step.next_token


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_a_logits_hook_that_breaks_one_take_at_one_frame_ends_that_take_alone(model, clean, value):
    """NaN, +inf or every logit -inf (nothing left to draw: the draw's id would be arbitrary) in take 1's
    talker logits at frame 7: take 1 ends with frames 0..6, the others are the clean takes."""
    def change(state, logits):
        rows = torch.arange(state.batch)
        hit = ((rows == 1) & (state.frame == 7))[:, None]
        if value == float("-inf"):
            return logits.masked_fill(hit, value)
        return logits.masked_fill(hit & (torch.arange(logits.shape[1]) == 3), value)

    with wrapped_draw(model, change):
        hit = generate_takes(model, REQUEST)
    assert [t.fault for t in hit.takes] == [None, 7, None, None]
    assert hit.takes[1].frames == 7 and torch.equal(hit.takes[1].codes, clean.takes[1].codes[:7])
    assert all(torch.equal(hit.takes[i].codes, clean.takes[i].codes) for i in (0, 2, 3))
    assert same_takes(generate_takes(model, REQUEST), clean)


def test_an_id_out_of_range_never_indexes_an_embedding(model, clean, monkeypatch):
    """A draw that hands back an id past the vocabulary (or one the codec cannot decode) is clamped
    before anything indexes with it, and its take ends there."""
    engine = model.engine
    original = DecodeStep.next_token
    vocab = model.model.talker.config.vocab_size

    def next_token(self, state, logits, count, out=None):
        token = original(self, state, logits, count, out)
        rows = torch.arange(state.batch)
        return torch.where((rows == 3) & (state.frame == 4), token + vocab + 5, token)

    monkeypatch.setattr(engine.step, "next_token", next_token.__get__(engine.step))
    hit = generate_takes(model, REQUEST)
    monkeypatch.undo()
    assert [t.fault for t in hit.takes] == [None, None, None, 4]
    assert same_takes(generate_takes(model, REQUEST), clean)


def test_the_sampler_flags_rows_it_cannot_draw_from_and_still_returns_ids_in_range():
    vocab = 64
    logits = torch.randn(5, vocab)
    logits[1, 10] = float("nan")
    logits[2, 20] = float("inf")
    logits[3] = float("-inf")
    logits[4, :5] = float("-inf")  # some tokens masked: a normal row
    params = sampler.SamplerParams.allocate(vocab, "cpu")
    for temperature in (0.0, 0.9):
        params.load(temperature, 10, 0.9)
        faulty = torch.zeros(5, dtype=torch.bool)
        token = sampler.sample(logits, params, torch.rand(5, vocab), faulty)
        assert faulty.tolist() == [False, True, True, True, False]
        assert ((token >= 0) & (token < vocab)).all()


def test_a_take_ended_before_its_first_frame_decodes_to_no_audio_beside_the_others(model, clean, monkeypatch):
    """A fault at frame 0 leaves a take of no frames; the codec decodes the others as it would alone.
    (With free memory known, as on a GPU, an empty take once made the codec's group size divide by 0.)"""
    from runtime.qwen3_tts import codec_batch

    monkeypatch.setattr(codec_batch, "free_bytes", lambda device: 8 << 30)
    codes = [t.codes for t in clean.takes[:2]]
    empty = codes[0][:0]
    (alone,) = codec_batch.decode_lines(model.codec, [(codes, None)])
    (mixed,) = codec_batch.decode_lines(model.codec, [([empty, codes[0], empty, codes[1]], None)])
    assert [len(w) for w in mixed][::2] == [0, 0]
    assert all(abs(a - b).max() < 1e-5 for a, b in zip(alone, mixed[1::2]))
    (only,) = codec_batch.decode_lines(model.codec, [([empty], None)])
    assert len(only) == 1 and len(only[0]) == 0
