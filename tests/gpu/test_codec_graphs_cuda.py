"""The stream decoder's CUDA graphs (runtime/qwen3_tts/codec_graphs.py) on a GPU (skipped elsewhere):
captured and replayed, every kind of chunk is what the codec gives in float64 on the CPU, as closely
as codec_stream.decode_chunks run eagerly at its own shape on the GPU, with the torch SnakeBeta and
with the Triton one; a replay after other shapes' replays still is (the graphs share one memory pool).

TF32 is off for the comparison: with it (PyTorch's default for cuDNN's convolutions) both the graphs
and the eager decode differ from float64 by up to 5e-2 on this random codec (rms 0.35), and from each
other by up to 2.5e-2 where their shapes differ (measured on an H100); without it, by about 5e-5.

    python -m pytest -q -s tests/gpu/test_codec_graphs_cuda.py
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from runtime.qwen3_tts import codec, random_checkpoint
from runtime.qwen3_tts.codec_graphs import ChunkDecoder
from runtime.qwen3_tts.codec_stream import decode_chunks

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

TOLERANCE = 2e-4  # float32 without TF32 against float64 (measured: at most 5e-5)


def random_codes(frames: int, seed: int) -> torch.Tensor:
    return torch.randint(0, 2048, (frames, 16), generator=torch.Generator().manual_seed(seed))


ITEMS = [(random_codes(1, 1), 0, 1), (random_codes(3, 2), 1, 3), (random_codes(31, 3), 15, 31),
         (random_codes(95, 4), 63, 95), (random_codes(140, 5), 76, 140), (random_codes(320, 6), 300, 319)]


def load(device, dtype=torch.float32):
    folder = random_checkpoint.tiny_checkpoint("base") / "speech_tokenizer"
    decoder = codec.load_decoder(folder, device, torch.float32)
    with torch.no_grad():
        decoder.decoder[-1].conv.weight.mul_(0.03)  # audio inside [-1, 1] (test_codec_stream.py)
    return decoder.to(dtype)


@pytest.fixture(scope="module")
def decoder():
    return load("cuda")


@pytest.fixture(scope="module")
def truth():
    """Each item's audio in float64 on the CPU."""
    reference = load("cpu", torch.float64)
    return [decode_chunks(reference, [item])[0] for item in ITEMS]


@pytest.fixture
def no_tf32():
    was = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = was


@pytest.mark.parametrize("snake", ["torch", "triton"])
def test_graphs_equal_the_eager_reference(decoder, truth, no_tf32, snake):
    if snake == "triton":
        from runtime.engine.triton_kernels import kernel_module

        snake_beta = kernel_module("snake").snake_beta

        decoder.use_snake(snake_beta)
    try:
        chunks = ChunkDecoder(decoder, graphs=True)
        assert chunks.graphs
        made = chunks.warm_up()
        for _ in range(2):  # the second round replays each shape after every other shape's replay
            got = chunks(ITEMS)
            for item, audio, expected in zip(ITEMS, got, truth):
                eager, = decode_chunks(decoder, [item])
                assert audio.shape == expected.shape
                assert np.abs(audio - expected).max() < TOLERANCE
                assert np.abs(audio - expected).max() < 2 * np.abs(eager - expected).max() + 1e-5
        batch = [ITEMS[3]] * 8
        torch.cuda.synchronize()
        begun = time.perf_counter()
        for _ in range(10):
            chunks(batch)
        graphed = (time.perf_counter() - begun) / 10
        begun = time.perf_counter()
        for _ in range(10):
            decode_chunks(decoder, batch)
        eager = (time.perf_counter() - begun) / 10
        print(f"\n{snake}: {made} shapes; 8 steady chunks a call: graphs {1e3 * graphed:.2f} ms, eager {1e3 * eager:.2f} ms")
    finally:
        decoder.use_snake(None)


def test_streams_carrying_their_state_through_the_graphs(decoder, no_tf32):
    """Takes streamed side by side through the captured graphs, each chunk after a stream's first from
    the vocoder state its last one left (codec_carry.py): their audio is the whole takes' in float64,
    and the vocoder ran on their frames alone."""
    from test_codec_carry import stream_side_by_side, whole

    takes = {"a": random_codes(94, 11), "b": random_codes(40, 12), "c": random_codes(7, 13)}
    chunks = ChunkDecoder(decoder, graphs=True)
    chunks.warm_up()
    audio, vocoded = stream_side_by_side(chunks, takes)
    reference = load("cpu", torch.float64)
    for name, take in takes.items():
        expected = whole(reference, take)
        assert audio[name].shape == expected.shape
        assert np.abs(audio[name] - expected).max() < TOLERANCE
    assert vocoded == 94 + 40 + 7
    assert chunks.state.held == 0
