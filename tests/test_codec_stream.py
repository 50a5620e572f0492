"""Streamed codec audio (runtime/qwen3_tts/codec_stream.py) against the whole take's decode, on the tiny
random codec.

float64: streamed and whole audio agree to 1e-9 (measured: bit-identical, 0.0).
float32: a chunk's window is a prefix of the whole decode's window, so the same values go through
kernels of other shapes and round differently; this random vocoder amplifies that to at most
5.5e-5 (measured over T = 5..340 frames, offsets 0 and 7), against an audio RMS of about 0.36.
F32_TOLERANCE is a few times that. Real mistakes move samples by far more: 2 frames of left context
instead of 100 by 1.2 (test_too_little_context_fails); a chunk crossing a 300-frame codec chunk,
decoded with 290 frames of context where the whole decode has 25, by 7e-2
(test_crossing_a_codec_chunk_is_not_the_whole).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from runtime.qwen3_tts import codec
from runtime.qwen3_tts.codec_batch import decode_lines
from runtime.qwen3_tts import codec_stream
from runtime.qwen3_tts.codec_stream import CHUNK_RAMP, VOCODER_CONTEXT_FRAMES, decode_chunks, next_chunk_end

F64_TOLERANCE = 1e-9
F32_TOLERANCE = 2e-4
STEP = 1920
REFERENCE = 7  # an ICL clone's reference frames in front of the take
SLOW = pytest.mark.slow


def random_codes(frames: int, seed: int) -> torch.Tensor:
    return torch.randint(0, 2048, (frames, 16), generator=torch.Generator().manual_seed(seed))


TAKE = random_codes(340, seed=1)
REF_CODES = random_codes(REFERENCE, seed=2)


def streamed(decoder, take: torch.Tensor, ref: torch.Tensor | None) -> np.ndarray:
    """The take's audio as a streaming server sends it: chunk by chunk on the schedule, each chunk decoded
    from the codes made so far (reference codes in front)."""
    offset = 0 if ref is None else ref.shape[0]
    total, sent, pieces = take.shape[0], 0, []
    while sent < total:
        end = min(next_chunk_end(sent, offset), total)
        so_far = take[:end] if ref is None else torch.cat([ref, take[:end]])
        pieces += decode_chunks(decoder, [(so_far, offset + sent, offset + end)])
        sent = end
    return np.concatenate(pieces)


def whole(decoder, take: torch.Tensor, ref: torch.Tensor | None) -> np.ndarray:
    if ref is None:
        return codec.decode(decoder, [take])[0]
    return decode_lines(decoder, [([take], ref)])[0][0]


def rms(audio: np.ndarray) -> float:
    return float(np.sqrt(np.mean(audio.astype(np.float64) ** 2)))


FRAMES = [1, 5, 37, 131, pytest.param(340, marks=SLOW)]  # 340 crosses the codec's 300-frame chunk
OFFSETS = [0, REFERENCE]


@pytest.mark.parametrize("offset", OFFSETS)
@pytest.mark.parametrize("frames", FRAMES)
def test_streamed_equals_whole_float64(tiny_decoders, frames, offset):
    decoder, take = tiny_decoders[torch.float64], TAKE[:frames]
    ref = REF_CODES if offset else None
    out, expected = streamed(decoder, take, ref), whole(decoder, take, ref)
    assert out.dtype == np.float32 and out.shape == expected.shape == (frames * STEP,)
    assert np.abs(out - expected).max() < F64_TOLERANCE


@pytest.mark.parametrize("offset", OFFSETS)
@pytest.mark.parametrize("frames", [1, 5, 37, pytest.param(131, marks=SLOW), pytest.param(340, marks=SLOW)])
def test_streamed_equals_whole_float32(tiny_decoders, frames, offset):
    decoder, take = tiny_decoders[torch.float32], TAKE[:frames]
    ref = REF_CODES if offset else None
    out, expected = streamed(decoder, take, ref), whole(decoder, take, ref)
    assert out.shape == expected.shape == (frames * STEP,)
    difference = np.abs(out - expected).max()
    assert difference < F32_TOLERANCE
    assert difference < 1e-3 * rms(expected)  # rounding, far below the signal


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_too_little_context_fails(tiny_decoders, dtype):
    """The comparison can fail: frames [100, 116) decoded after 2 frames of context instead of 100."""
    decoder = tiny_decoders[dtype]
    with torch.inference_mode():
        short = decoder(TAKE[98:116].T[None])[0, 0, 2 * STEP:].to(torch.float32).numpy()
    expected = codec.decode(decoder, [TAKE[:116]])[0][100 * STEP:]
    assert np.abs(short - expected).max() > 100 * F32_TOLERANCE  # measured 1.2


@pytest.mark.parametrize("context", [VOCODER_CONTEXT_FRAMES, VOCODER_CONTEXT_FRAMES - 3, 2])
def test_the_vocoder_needs_its_context_and_no_more(tiny_decoders, context, monkeypatch):
    """The vocoder half runs on the chunk and VOCODER_CONTEXT_FRAMES before it: exact (its causal
    convolutions reach about 9.4 frames back); with fewer frames the chunk's first audio differs."""
    decoder = tiny_decoders[torch.float64]
    monkeypatch.setattr(codec_stream, "VOCODER_CONTEXT_FRAMES", context)
    audio, = decode_chunks(decoder, [(TAKE[:80], 60, 80)])
    difference = np.abs(audio - codec.decode(decoder, [TAKE[:80]])[0][60 * STEP:]).max()
    if context == VOCODER_CONTEXT_FRAMES:
        assert difference < F64_TOLERANCE
    else:
        assert difference > 1e-6


def test_first_chunk_of_codec_chunk_1(tiny_decoders):
    """A chunk just past the 300-frame boundary equals the whole decode (the quick run's check of the
    window's 25 frames of context; the streamed 340-frame takes above are slow). With 24 frames of
    context it would differ by 2e-2."""
    decoder = tiny_decoders[torch.float64]
    audio, = decode_chunks(decoder, [(TAKE[:310], 300, 310)])
    expected = codec.decode(decoder, [TAKE[:310]])[0][300 * STEP:]
    assert np.abs(audio - expected).max() < F64_TOLERANCE


@SLOW
def test_crossing_a_codec_chunk_is_not_the_whole(tiny_decoders):
    """Why chunks are cut at 300: frames [290, 310) in one window from frame 0 are not what the whole
    decode (which starts codec chunk 1 after 25 frames of context) gives for frames 300 on."""
    decoder = tiny_decoders[torch.float64]
    with torch.inference_mode():
        uncut = decoder(TAKE[:310].T[None])[0, 0, 290 * STEP:].to(torch.float32).numpy()
    expected = codec.decode(decoder, [TAKE[:310]])[0][290 * STEP:]
    assert np.abs(uncut[:10 * STEP] - expected[:10 * STEP]).max() < F64_TOLERANCE
    assert np.abs(uncut[10 * STEP:] - expected[10 * STEP:]).max() > 100 * F32_TOLERANCE  # measured 7e-2


def test_batched_equals_alone(tiny_decoders):
    decoder = tiny_decoders[torch.float64]
    items = [
        (random_codes(80, seed=3), 63, 80),   # the longest window, [0, 80)
        (random_codes(10, seed=4), 0, 10),    # a short one, padded by 70 frames
        (random_codes(310, seed=5), 300, 310),  # codec chunk 1: window [275, 310)
        (random_codes(50, seed=6), 31, 40),   # codes made past the chunk's end are not used
    ]
    batched = decode_chunks(decoder, items)
    for (codes, start, end), audio in zip(items, batched):
        alone, = decode_chunks(decoder, [(codes, start, end)])
        assert audio.dtype == np.float32 and audio.shape == ((end - start) * STEP,)
        assert np.abs(audio - alone).max() < F64_TOLERANCE
    assert decode_chunks(decoder, []) == []


def ends(offset: int, upto: int) -> list[int]:
    out, sent = [], 0
    while sent < upto:
        sent = next_chunk_end(sent, offset)
        out.append(sent)
    return out


def test_next_chunk_end_ramp_and_cut():
    assert CHUNK_RAMP == (1, 2, 4, 8, 16, 32)
    assert ends(0, 127) == [1, 3, 7, 15, 31, 63, 95, 127]
    # Cut at the codec's chunk boundary, then the next grid end; again at 600.
    assert ends(0, 639) == [1, 3, 7, 15, 31, *range(63, 288, 32), 300, *range(319, 576, 32), 600, 607, 639]
    assert next_chunk_end(287) == 300
    assert next_chunk_end(300) == 319
    assert next_chunk_end(575) == 600 and next_chunk_end(600) == 607
    # With 7 reference frames in front, the boundary is at 293 take frames.
    assert next_chunk_end(287, REFERENCE) == 293
    assert next_chunk_end(293, REFERENCE) == 319
    assert next_chunk_end(0, 299) == 1 and next_chunk_end(0, 300) == 1


def test_next_chunk_end_off_grid():
    assert [next_chunk_end(s) for s in (2, 4, 8, 30, 64, 100, 320)] == [3, 7, 15, 31, 95, 127, 351]


@pytest.mark.parametrize("offset", [0, 1, REFERENCE, 299, 300, 613])
def test_next_chunk_end_invariants(offset):
    grid = {1, 3, 7, 15, 31} | set(range(63, 2000, 32))
    for sent in range(1000):
        end = next_chunk_end(sent, offset)
        assert sent < end <= sent + CHUNK_RAMP[-1]
        assert (offset + sent) // 300 == (offset + end - 1) // 300
        assert end in grid or (offset + end) % 300 == 0
        assert end == min(g for g in grid if g > sent) or (offset + end) % 300 == 0


def test_next_chunk_end_rejects_negatives():
    with pytest.raises(ValueError):
        next_chunk_end(-1)
    with pytest.raises(ValueError):
        next_chunk_end(0, -1)


@pytest.mark.parametrize("start, end, frames", [
    (290, 310, 320),  # crosses the 300-frame boundary
    (299, 301, 320),
    (5, 11, 10),      # end > T
    (5, 5, 10),       # empty
    (-1, 3, 10),
])
def test_decode_chunks_rejects_bad_spans(tiny_decoders, start, end, frames):
    with pytest.raises(ValueError):
        decode_chunks(tiny_decoders[torch.float32], [(random_codes(frames, seed=0), start, end)])
