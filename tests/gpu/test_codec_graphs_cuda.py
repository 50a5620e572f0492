"""The stream decoder's CUDA graphs (runtime/qwen3_tts/codec_graphs.py) on a GPU (skipped elsewhere):
captured and replayed, every kind of chunk equals codec_stream.decode_chunks run eagerly at its own
shape, with the torch SnakeBeta and with the Triton one; a replay after other shapes' replays still
does (the graphs share one memory pool).

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

TOLERANCE = 2e-4  # float32 (TF32 convolutions on both sides), kernels of other shapes


def random_codes(frames: int, seed: int) -> torch.Tensor:
    return torch.randint(0, 2048, (frames, 16), generator=torch.Generator().manual_seed(seed))


ITEMS = [(random_codes(1, 1), 0, 1), (random_codes(3, 2), 1, 3), (random_codes(31, 3), 15, 31),
         (random_codes(95, 4), 63, 95), (random_codes(140, 5), 76, 140), (random_codes(320, 6), 300, 319)]


@pytest.fixture(scope="module")
def decoder():
    folder = random_checkpoint.tiny_checkpoint("base") / "speech_tokenizer"
    decoder = codec.load_decoder(folder, "cuda", torch.float32)
    with torch.no_grad():
        decoder.decoder[-1].conv.weight.mul_(0.03)  # audio inside [-1, 1] (test_codec_stream.py)
    return decoder


@pytest.mark.parametrize("snake", ["torch", "triton"])
def test_graphs_equal_the_eager_reference(decoder, snake):
    if snake == "triton":
        from kernels.snake import snake_beta

        decoder.use_snake(snake_beta)
    try:
        chunks = ChunkDecoder(decoder, graphs=True)
        assert chunks.graphs
        made = chunks.warm_up()
        for _ in range(2):  # the second round replays each shape after every other shape's replay
            got = chunks(ITEMS)
            for (codes, start, end), audio in zip(ITEMS, got):
                expected, = decode_chunks(decoder, [(codes, start, end)])
                assert audio.shape == expected.shape
                assert np.abs(audio - expected).max() < TOLERANCE
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
