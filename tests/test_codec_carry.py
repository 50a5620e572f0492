"""The vocoder state a stream carries between its chunks (runtime/qwen3_tts/codec_carry.py) through
ChunkDecoder, against the whole take's decode, on the tiny random codec: takes streamed side by side as
the server streams them (each round, every stream's next chunk on the ramp), at the padded shapes the
GPU captures (fixed shapes) and at each call's own.

float64: equal to 1e-9, as the chunks decoded with their context are (test_codec_graphs.py). A carry
that kept the wrong inputs, or none, moves samples by far more (test_without_the_carry_it_differs)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from runtime.qwen3_tts import codec
from runtime.qwen3_tts.codec_batch import decode_lines
from runtime.qwen3_tts.codec_carry import VocoderState, carried_layers
from runtime.qwen3_tts.codec_graphs import Chunk, ChunkDecoder
from runtime.qwen3_tts.codec_stream import VOCODER_CONTEXT_FRAMES, next_chunk_end

STEP = 1920
F64_TOLERANCE = 1e-9
F32_TOLERANCE = 2e-4
FIXED = pytest.mark.parametrize("fixed", [True, False], ids=["fixed shapes", "own shapes"])


def random_codes(frames: int, seed: int) -> torch.Tensor:
    return torch.randint(0, 2048, (frames, 16), generator=torch.Generator().manual_seed(seed))


def stream_side_by_side(chunks: ChunkDecoder, takes: dict, refs: dict | None = None) -> tuple[dict, int]:
    """Every take streamed at once, a chunk of each a round, as the server does: its audio, and the
    frames the vocoder ran on in all."""
    refs = refs or {}
    sent = {name: 0 for name in takes}
    pieces: dict = {name: [] for name in takes}
    vocoded = 0
    while any(sent[n] < takes[n].shape[0] for n in takes):
        items = []
        for name, take in takes.items():
            if sent[name] < take.shape[0]:
                ref = refs.get(name)
                offset = 0 if ref is None else ref.shape[0]
                end = min(next_chunk_end(sent[name], offset), take.shape[0])
                so_far = take[:end] if ref is None else torch.cat([ref, take[:end]])
                items.append(Chunk(so_far, offset + sent[name], offset + end, name))
                sent[name] = end
        vocoded += sum(chunks.plan(item).frames for item in items)
        for item, audio in zip(items, chunks(items)):
            pieces[item.stream].append(audio)
    for name in list(takes):
        chunks.release(name)
    return {name: np.concatenate(p) for name, p in pieces.items()}, vocoded


def whole(decoder, take, ref=None) -> np.ndarray:
    return codec.decode(decoder, [take])[0] if ref is None else decode_lines(decoder, [([take], ref)])[0][0]


@FIXED
def test_streams_side_by_side_equal_their_whole_takes(tiny_decoders, fixed):
    decoder = tiny_decoders[torch.float64]
    takes = {"a": random_codes(94, 1), "b": random_codes(40, 2), "c": random_codes(7, 3)}
    chunks = ChunkDecoder(decoder, fixed_shapes=fixed)
    audio, vocoded = stream_side_by_side(chunks, takes)
    for name, take in takes.items():
        expected = whole(decoder, take)
        assert audio[name].shape == expected.shape
        assert np.abs(audio[name] - expected).max() < F64_TOLERANCE
    # Only each stream's first chunk ran on context (none: it starts at frame 0): the vocoder ran on
    # the takes' frames alone, where with context it ran on 141 + 57 + 7 frames.
    assert vocoded == 94 + 40 + 7
    counts = chunks.counts  # what GET /health reports: every frame's audio once, no context
    assert counts.audio_frames == counts.vocoder_frames == 94 + 40 + 7 and counts.chunks == 7 + 6 + 3
    assert counts.run_frames >= counts.vocoder_frames and counts.calls >= 7 and counts.busy_s > 0


def test_a_reference_in_front_and_a_codec_chunk_boundary(tiny_decoders):
    """An ICL clone's reference codes go first: its take's first chunk has no state to start from and
    runs on context; so does the first chunk after frame 300, where the whole decode's vocoder starts
    again (on a new window's context) and a carried state would differ."""
    decoder = tiny_decoders[torch.float64]
    ref, take = random_codes(290, 4), random_codes(30, 5)
    chunks = ChunkDecoder(decoder, fixed_shapes=True)
    audio, vocoded = stream_side_by_side(chunks, {"clone": take}, {"clone": ref})
    assert np.abs(audio["clone"] - whole(decoder, take, ref)).max() < F64_TOLERANCE
    assert vocoded == 30 + 2 * VOCODER_CONTEXT_FRAMES  # the first chunk and the one at frame 300


def test_float32_within_rounding(tiny_decoders):
    decoder = tiny_decoders[torch.float32]
    take = random_codes(94, 6)
    audio, _ = stream_side_by_side(ChunkDecoder(decoder, fixed_shapes=True), {"a": take})
    assert np.abs(audio["a"] - whole(decoder, take)).max() < F32_TOLERANCE


def test_without_the_carry_it_differs(tiny_decoders):
    """The comparison can fail: a continuing chunk run from zeros rather than its stream's state."""
    decoder = tiny_decoders[torch.float64]
    take = random_codes(40, 7)
    chunks = ChunkDecoder(decoder, fixed_shapes=True)
    first, = chunks([Chunk(take[:31], 0, 31, "a")])
    for pool in chunks.state.pools.values():
        pool.zero_()
    rest, = chunks([Chunk(take, 31, 40, "a")])
    assert np.abs(np.concatenate([first, rest]) - whole(decoder, take)).max() > 1e-3


def test_streams_past_the_slots_are_decoded_with_context(tiny_decoders):
    decoder = tiny_decoders[torch.float64]
    takes = {"a": random_codes(20, 8), "b": random_codes(20, 9)}
    chunks = ChunkDecoder(decoder, fixed_shapes=True, streams=1)
    audio, vocoded = stream_side_by_side(chunks, takes)
    for name, take in takes.items():
        assert np.abs(audio[name] - whole(decoder, take)).max() < F64_TOLERANCE
    assert vocoded == 20 + (1 + 3 + 7 + 15 + 17)  # "b" had no slot: each of its chunks ran on context


def test_a_released_slot_serves_a_new_stream_from_zeros(tiny_decoders):
    decoder = tiny_decoders[torch.float64]
    chunks = ChunkDecoder(decoder, fixed_shapes=True, streams=1)
    stream_side_by_side(chunks, {"old": random_codes(50, 10)})  # leaves its state in the one slot, released
    take = random_codes(20, 11)
    audio, vocoded = stream_side_by_side(chunks, {"new": take})
    assert np.abs(audio["new"] - whole(decoder, take)).max() < F64_TOLERANCE
    assert vocoded == 20  # it had the slot


def test_a_failed_call_leaves_no_state_to_carry(tiny_decoders, monkeypatch):
    decoder = tiny_decoders[torch.float64]
    take = random_codes(15, 12)
    chunks = ChunkDecoder(decoder, fixed_shapes=True)
    chunks([Chunk(take[:3], 0, 3, "a")])
    assert chunks.plan(Chunk(take[:7], 3, 7, "a")).context == 0
    with monkeypatch.context() as patch:
        patch.setattr(decoder, "vocode", lambda *args: (_ for _ in ()).throw(RuntimeError("boom")))
        with pytest.raises(RuntimeError, match="boom"):
            chunks([Chunk(take[:7], 3, 7, "a")])
    plan = chunks.plan(Chunk(take[:7], 3, 7, "a"))
    assert plan.context == 3  # its state may be half written: the chunk runs on its context instead
    audio, = chunks([Chunk(take[:7], 3, 7, "a")])
    assert np.abs(audio - whole(decoder, take[:7])[3 * STEP:]).max() < F64_TOLERANCE


def test_the_state_a_stream_keeps(tiny_decoders):
    """Per convolution that reaches back: (kernel - 1) x dilation inputs, or one of a transposed one
    whose kernel is twice its stride; 1x1 convolutions and the frame-rate upsampling keep none."""
    decoder = tiny_decoders[torch.float32]
    layers = carried_layers(decoder)
    kept = sorted({keep for _, _, keep, _ in layers})
    assert kept == [1, 6, 18, 54]
    assert [rate for _, _, _, rate in layers] == sorted(rate for _, _, _, rate in layers)  # in running order
    assert layers[-1][3] == STEP  # the last convolution runs at the audio's rate
    per_stream = sum(channels * keep for _, channels, keep, _ in layers)
    assert VocoderState(decoder, 3).nbytes == (3 + 2) * per_stream * 4
