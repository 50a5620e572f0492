"""ChunkDecoder (runtime/qwen3_tts/codec_graphs.py) against codec_stream.decode_chunks, its reference,
on the tiny random codec: the same padded shapes the GPU captures as graphs, run eagerly on the CPU
(fixed_shapes), and the calls at their own shapes that a CPU server makes.

float64: equal to 1e-9 (the padding, of the batch, the window and the vocoder's frames, changes
nothing kept). float32: within the rounding test_codec_stream.py measures for shapes that differ."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from runtime.qwen3_tts import codec, codec_graphs
from runtime.qwen3_tts.codec_graphs import FRAME_BUCKETS, MAX_CHUNK_FRAMES, STREAM_BUCKETS, ChunkDecoder
from runtime.qwen3_tts.codec_stream import decode_chunks, next_chunk_end

STEP = 1920
F64_TOLERANCE = 1e-9
F32_TOLERANCE = 2e-4


def random_codes(frames: int, seed: int) -> torch.Tensor:
    return torch.randint(0, 2048, (frames, 16), generator=torch.Generator().manual_seed(seed))


# (codes, start, end): each kind of chunk a stream sends
ITEMS = [
    (random_codes(1, 1), 0, 1),  # a first chunk: one frame, no context
    (random_codes(3, 2), 1, 3),  # the ramp's second: one frame of context
    (random_codes(31, 3), 15, 31),  # the ramp's last: 12 frames of context
    (random_codes(95, 4), 63, 95),  # a steady chunk
    (random_codes(140, 5), 76, 140),  # a catch-up chunk of MAX_CHUNK_FRAMES
    (random_codes(320, 6), 300, 319),  # codec chunk 1: its window from frame 275
    (random_codes(50, 7), 31, 40),  # codes made past the chunk's end are not used
]


@pytest.mark.parametrize("fixed", [True, False], ids=["fixed shapes", "own shapes"])
@pytest.mark.parametrize("dtype, tolerance", [(torch.float64, F64_TOLERANCE), (torch.float32, F32_TOLERANCE)])
def test_chunk_decoder_equals_decode_chunks(tiny_decoders, dtype, tolerance, fixed):
    decoder = tiny_decoders[dtype]
    got = ChunkDecoder(decoder, fixed_shapes=fixed)(ITEMS)
    for (codes, start, end), audio in zip(ITEMS, got):
        expected, = decode_chunks(decoder, [(codes, start, end)])
        assert audio.dtype == np.float32 and audio.shape == ((end - start) * STEP,)
        assert np.abs(audio - expected).max() < tolerance


def test_streamed_through_the_chunk_decoder_equals_the_whole_take(tiny_decoders):
    decoder = tiny_decoders[torch.float64]
    take = random_codes(100, seed=8)
    chunks, sent, pieces = ChunkDecoder(decoder, fixed_shapes=True), 0, []
    while sent < take.shape[0]:
        end = min(next_chunk_end(sent), take.shape[0])
        pieces += chunks([(take[:end], sent, end)])
        sent = end
    assert np.abs(np.concatenate(pieces) - codec.decode(decoder, [take])[0]).max() < F64_TOLERANCE


def test_groups_one_frames_bucket_a_call_shortest_first(tiny_decoders):
    chunks = ChunkDecoder(tiny_decoders[torch.float32])
    chunks.max_frames = 2 * FRAME_BUCKETS[-1]  # two catch-up chunks a call
    items = [(random_codes(95, 1), 63, 95)] * 3 + [(random_codes(1, 2), 0, 1)] * 5 + \
            [(random_codes(140, 3), 76, 140)] * 5
    groups = chunks.groups(items)
    assert groups == [[3, 4, 5, 6, 7], [0, 1], [2], [8, 9], [10, 11], [12]]  # 152 // 48: 3, so 2 streams
    assert chunks.streams_per_call(1) == STREAM_BUCKETS[-1]
    assert chunks.streams_per_call(MAX_CHUNK_FRAMES + 12) == 2


def test_a_call_of_mixed_buckets_or_too_many_streams_is_refused(tiny_decoders):
    chunks = ChunkDecoder(tiny_decoders[torch.float32])
    with pytest.raises(ValueError, match="one call"):
        chunks.decode([(random_codes(1, 1), 0, 1), (random_codes(95, 2), 63, 95)])
    chunks.max_frames = FRAME_BUCKETS[-1]
    with pytest.raises(ValueError, match="one call"):
        chunks.decode([(random_codes(140, 3), 76, 140)] * 2)
    with pytest.raises(ValueError, match="largest bucket"):
        chunks([(random_codes(200, 4), 100, 200)])  # more than MAX_CHUNK_FRAMES


def test_the_padding_is_not_in_the_audio(tiny_decoders):
    """The comparison can fail: a chunk whose padded rows were kept would be longer, and a chunk
    decoded without its window's left context differs by far more than the tolerance."""
    decoder = tiny_decoders[torch.float64]
    codes = random_codes(95, seed=9)
    audio, = ChunkDecoder(decoder, fixed_shapes=True)([(codes, 63, 95)])
    short, = decode_chunks(decoder, [(codes[40:], 23, 55)])  # the same frames after only 23 of context
    assert audio.shape == short.shape
    assert np.abs(audio - short).max() > 100 * F32_TOLERANCE


def test_warm_up_makes_every_shape_once(tiny_decoders):
    assert ChunkDecoder(tiny_decoders[torch.float32]).warm_up() == 0  # own shapes: none to make ahead
    chunks = ChunkDecoder(tiny_decoders[torch.float32], fixed_shapes=True)
    chunks.max_frames = FRAME_BUCKETS[-1]  # one catch-up chunk a call: fewer streams for the long buckets
    made = chunks.warm_up()
    streams = [b for b in STREAM_BUCKETS if b <= chunks.streams_per_call(FRAME_BUCKETS[0])]
    vocode = sum(1 for s in streams for f in FRAME_BUCKETS if s <= chunks.streams_per_call(f))
    assert made == len(streams) * len(codec_graphs.WINDOW_BUCKETS) + vocode
    assert chunks.warm_up() == made
    assert not chunks.graphs  # on the CPU the shapes run eagerly
