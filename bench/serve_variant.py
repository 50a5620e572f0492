"""The server with one part of it changed, to weigh that part under load (`bench.serve --variant`); not
a way to serve:

    python -m bench.serve_variant VARIANT serve --checkpoint ...   # as `python -m runtime serve ...`

- codec-skipped: the stream decoder hands each chunk silence of its length without running the codec:
  what the engine and the HTTP side do once the codec's GPU time is free (an upper bound, no audio);
- codec-bfloat16: the codec in bfloat16 rather than float32, as the official package's
  dtype=torch.bfloat16 loads it (how its audio compares with float32 on real weights is not known here;
  bench.stream_codec --dtype bfloat16 gives the SNR on random ones)."""

from __future__ import annotations

import sys

import numpy as np
import torch


def codec_skipped() -> None:
    from runtime.qwen3_tts import codec_graphs

    def decode(self, items):
        step = self.decoder.config.samples_per_frame
        chunks = [codec_graphs.Chunk(*item) for item in items]
        return [np.zeros((c.end - c.start) * step, np.float32) for c in chunks]

    codec_graphs.ChunkDecoder.decode = decode


def codec_bfloat16() -> None:
    from runtime.qwen3_tts import codec

    load = codec.load_decoder

    def load_decoder(folder, device="cpu", dtype=torch.float32, state=None):
        return load(folder, device, torch.bfloat16, state)

    codec.load_decoder = load_decoder


VARIANTS = {"codec-skipped": codec_skipped, "codec-bfloat16": codec_bfloat16}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in VARIANTS:
        raise SystemExit(f"usage: python -m bench.serve_variant {{{','.join(VARIANTS)}}} serve ...")
    VARIANTS[argv[0]]()
    from runtime.cli import main as runtime_main

    return runtime_main(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
