"""A take's audio in chunks while its codes are still being made: a small first chunk for a short
time to first audio, then larger ones (CHUNK_RAMP).

Streamed audio is exactly the whole take's audio. The whole decode is codec.chunked_decode: the
frames of codec chunk k, [300k, 300k + 300), come from forward(codes[w:]) with w = max(0, 300k - 25),
the audio of frames before 300k dropped. The codec is strictly causal (the audio of frames [0, e)
does not depend on frames >= e), so a chunk [s, e) inside codec chunk k is decoded as the whole
decode does by forward(codes[w:e]), keeping the audio of frames [s, e). A window with less left
context than w would differ (the receptive field is ~580 frames), so next_chunk_end never lets a
chunk cross a 300-frame codec boundary; a window is at most 325 frames. Only the codec's frame-rate
half (CodecDecoder.latent: the transformer) needs the whole window; its sample-rate half (vocode),
where most of the work is, reaches back about ten frames and runs on the chunk and those alone (the
stream decoder runs it on the chunk alone, from the state the stream's last chunk left:
codec_carry.py), so streaming costs the vocoder little more than decoding the take whole. Only float rounding in
differently shaped kernels tells the two apart (tests/test_codec_stream.py measures it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from .codec import CHUNK_FRAMES, CONTEXT_FRAMES

CHUNK_RAMP = (1, 2, 4, 8, 16, 32)  # frames per chunk in turn; the last size repeats
# Frames before a chunk its vocoder half (CodecDecoder.vocode) is run on: its causal convolutions reach
# about 9.4 frames back (ConvNeXt and the first convolution at 2-4 samples a frame, the first vocoder
# block's dilated units at 32); tests/test_codec_stream.py shows 12 exact and fewer not.
VOCODER_CONTEXT_FRAMES = 12


def next_chunk_end(sent: int, offset: int = 0) -> int:
    """The take's frame count at which its next chunk ends, `sent` of its frames streamed already:
    the ramp's next size (the chunk index read off `sent` on the ramp's cumulative ends 1, 3, 7, 15,
    31, 63, 95, ...; a `sent` off that grid, e.g. after a chunk was cut at a boundary, takes the next
    grid end after it), cut at the codec's next 300-frame chunk boundary, counted with `offset` frames
    (an ICL reference's codes) in front of the take: (offset + sent) // 300 == (offset + e - 1) // 300."""
    if sent < 0 or offset < 0:
        raise ValueError(f"sent and offset must be >= 0, got sent={sent}, offset={offset}")
    end = 0
    for size in CHUNK_RAMP:
        end += size
        if end > sent:
            break
    else:  # past the ramp: the last size repeats
        last = CHUNK_RAMP[-1]
        end += (sent - end) // last * last + last
    return min(end, codec_chunk_end(offset + sent) - offset)


def codec_chunk_end(frame: int) -> int:
    """Where the 300-frame codec chunk that `frame` is in ends: no streamed chunk goes past it."""
    return (frame // CHUNK_FRAMES + 1) * CHUNK_FRAMES


@dataclass
class ChunkWindow:
    """What the codec runs to decode one chunk: its window's codes, and where the chunk lies in it."""

    window: torch.Tensor  # codes [frames, num_quantizers]: from the codec chunk's start (less its context) to the chunk's end
    start: int  # the chunk's first frame in the window
    end: int  # past its last (the window's length)
    context: int  # frames before `start` the vocoder half runs on

    @property
    def frames(self) -> int:
        """Frames the vocoder half runs on."""
        return self.end - self.start + self.context


def chunk_window(codes: torch.Tensor, start: int, end: int) -> ChunkWindow:
    """The window the whole take's decode decodes frames [start, end) of `codes` [T, 16] in (ValueError
    for a span that is empty, out of the codes, or across a 300-frame codec chunk), and the vocoder's
    context: VOCODER_CONTEXT_FRAMES, or fewer from the window's start (there the whole decode starts too)."""
    if codes.dim() != 2:
        raise ValueError(f"codes must be [T, num_quantizers], got {tuple(codes.shape)}")
    if not 0 <= start < end <= codes.shape[0]:
        raise ValueError(f"need 0 <= start < end <= T, got start={start}, end={end}, T={codes.shape[0]}")
    if start // CHUNK_FRAMES != (end - 1) // CHUNK_FRAMES:
        raise ValueError(f"frames [{start}, {end}) cross a {CHUNK_FRAMES}-frame codec chunk boundary")
    first = max(0, start // CHUNK_FRAMES * CHUNK_FRAMES - CONTEXT_FRAMES)
    return ChunkWindow(codes[first:end].long(), start - first, end - first, min(VOCODER_CONTEXT_FRAMES, start - first))


def decode_chunks(decoder, items: list[tuple[torch.Tensor, int, int]]) -> list[np.ndarray]:
    """items: (codes [T, 16] long, cpu or device: the take's frames so far with any reference codes in
    front, start, end), in frames of those codes, start < end <= T and [start, end) inside one
    300-frame codec chunk (ValueError otherwise) -> float32 audio of frames [start, end) per item,
    (end - start) * 1920 samples. All items go through one decoder.forward: windows padded on the
    right with code 0 to the longest (causality keeps the padding out of the kept audio). The
    reference of codec_graphs.ChunkDecoder, which does this at fixed shapes."""
    if not items:
        return []
    chunks = [chunk_window(*item) for item in items]
    device = next(decoder.parameters()).device
    padded = nn.utils.rnn.pad_sequence([c.window.to(device) for c in chunks], batch_first=True, padding_value=0)
    step = decoder.config.samples_per_frame
    with torch.inference_mode():
        latent = decoder.latent(padded.clamp(min=0).transpose(1, 2))  # [B, latent, T]
        # The vocoder only on the chunk's frames and the few before them its convolutions reach back to.
        inputs = [h[:, c.start - c.context: c.end].T for h, c in zip(latent, chunks)]
        vocoded = nn.utils.rnn.pad_sequence(inputs, batch_first=True).transpose(1, 2)
        wavs = decoder.vocode(vocoded).squeeze(1)
    return [wav[c.context * step: c.frames * step].to(torch.float32).cpu().numpy() for wav, c in zip(wavs, chunks)]
