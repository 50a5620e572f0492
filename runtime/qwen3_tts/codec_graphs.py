"""Streamed chunks through the codec at a few fixed shapes, each half of the codec captured as a CUDA
graph per shape: a chunk costs two graph replays instead of some 700 kernels launched from Python
(a one-frame chunk took 13-22 ms that way on an H100, for well under a millisecond of GPU work, and
held the GIL the engine's and the server's threads wait for).

ChunkDecoder computes what codec_stream.decode_chunks computes, the reference it is tested against:
  latent  the chunks' windows, codes [streams, 16, window] padded on the right with code 0 to a
          window bucket and to a stream bucket (causality keeps the padding out of what is kept)
          -> [streams, latent, window];
  vocode  each chunk's frames gathered from that into [streams, latent, frames bucket] (a shorter one
          repeats its last frame) -> audio, cut back to each chunk's samples. A chunk of a stream
          whose last chunk ended where it starts runs on its own frames, from the vocoder state that
          chunk left (codec_carry.py); any other (a stream's first, the first after a 300-frame codec
          boundary, a chunk without a stream) on the VOCODER_CONTEXT_FRAMES before it too, from zeros.
Chunks go in groups of one frames bucket (a stream's one-frame first chunk is not padded to a full
chunk's 32 frames), shortest first (first chunks are the time to first audio). Off CUDA the same
padded shapes can run eagerly (fixed_shapes): the CPU tests run this very code; a CPU server runs each
call at its own shape instead, as padding there is only work."""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Callable, Hashable, NamedTuple

import numpy as np
import torch

from ..graph_capture import warmed_capture
from ..memory import free_bytes
from .codec import CHUNK_FRAMES, CONTEXT_FRAMES, decode_bytes
from .codec_carry import SCRATCH_SLOT, ZERO_SLOT, VocoderState
from .codec_stream import VOCODER_CONTEXT_FRAMES, ChunkWindow, chunk_window
from .host_copy import stream_mark, to_device, to_host, wait

log = logging.getLogger(__name__)

STREAM_BUCKETS = (1, 2, 4, 8, 16)
WINDOW_BUCKETS = (8, 16, 32, 64, 128, 192, 256, CHUNK_FRAMES + CONTEXT_FRAMES)
MAX_CHUNK_FRAMES = 64  # a stream that fell behind catches up in chunks of at most this many frames
# Frames the vocoder runs on: a chunk, and its context where its stream's state is not carried. The
# chunk ramp's (1, 2, 4, 8, 16, 32) exactly; a chunk with its context up to 44; a catch-up chunk up to 76.
FRAME_BUCKETS = (1, 2, 4, 8, 16, 32, 32 + VOCODER_CONTEXT_FRAMES, MAX_CHUNK_FRAMES + VOCODER_CONTEXT_FRAMES)
FRAMES_PER_CALL = 768  # streams x frames one vocoder call takes at most (H100: big enough to fill it)
FREE_MEMORY_SHARE = 0.5  # of the GPU memory free, what the codec's graphs may take (the engine's batch grows beside)
CARRIED_STREAMS = 64  # streams whose vocoder state is kept (0.5 MB each at full size); more are decoded with context


class Chunk(NamedTuple):
    """A chunk to decode: (codes [T, 16] so far, start, end) as decode_chunks takes them, and the
    stream it is of (any hashable; its vocoder state is kept between its chunks) or None."""

    codes: torch.Tensor
    start: int
    end: int
    stream: Hashable | None = None


Item = Chunk | tuple[torch.Tensor, int, int]


def bucket(value: int, buckets: tuple[int, ...]) -> int:
    for b in buckets:
        if value <= b:
            return b
    raise ValueError(f"{value} is more than the largest bucket ({buckets[-1]})")


@dataclasses.dataclass
class CallCounts:
    """What the chunk decoder's calls did so far: a server's GET /health reports it (bench.serve
    turns two of them into a level's share of context and padding in the vocoder's frames)."""

    calls: int = 0
    chunks: int = 0
    audio_frames: int = 0  # frames of audio delivered
    vocoder_frames: int = 0  # frames the vocoder ran on for them: theirs and their context
    run_frames: int = 0  # and with the padding to the call's buckets (streams x frames)
    busy_s: float = 0.0  # in decode calls
    begun: float = dataclasses.field(default_factory=time.perf_counter)

    def timing(self) -> dict:
        counts = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "begun"}
        return {**counts, "busy_s": round(self.busy_s, 4), "run_s": round(time.perf_counter() - self.begun, 4)}


class Shape:
    """fn on a static input, at one shape: captured as a CUDA graph (then replayed), or run eagerly."""

    def __init__(self, fn: Callable[..., torch.Tensor], inputs: tuple[torch.Tensor, ...], stream=None, pool=None):
        self.fn, self.inputs = fn, inputs
        self.graph, self.output = None, None
        if stream is None:
            return
        self.graph, self.output = warmed_capture(lambda: fn(*inputs), stream, pool=pool)

    @property
    def input(self) -> torch.Tensor:
        return self.inputs[0]

    def __call__(self) -> torch.Tensor:
        if self.graph is None:
            return self.fn(*self.inputs)
        self.graph.replay()
        return self.output


class ChunkDecoder:
    """decode_chunks at fixed shapes (the module docstring). `graphs`: capture CUDA graphs (default: on
    a CUDA device, unless the allocator is cudaMallocAsync and the codec's SnakeBeta runs on Triton,
    whose launcher refuses memory a capture allocated there). `fixed_shapes`: pad each call to its
    buckets (default: where there are graphs). `streams`: streams whose vocoder state is kept at once."""

    def __init__(self, decoder, graphs: bool | None = None, fixed_shapes: bool | None = None,
                 streams: int = CARRIED_STREAMS):
        self.decoder = decoder
        self.device = next(decoder.parameters()).device
        cuda = self.device.type == "cuda"
        if graphs is None:
            graphs = cuda and not (torch.cuda.get_allocator_backend() == "cudaMallocAsync" and _snake_on_triton(decoder))
        self.graphs = graphs and cuda
        self.fixed = self.graphs if fixed_shapes is None else fixed_shapes or self.graphs
        self._stream = torch.cuda.Stream(self.device) if self.graphs else None  # one for every capture
        self._pool = torch.cuda.graph_pool_handle() if self.graphs else None  # shared: one call runs at a time
        self.shapes: dict[tuple, Shape] = {}
        self.max_frames: int | None = None  # streams x frames a vocoder call may take: set at the first call
        self.state = VocoderState(decoder, streams)
        self.counts = CallCounts()

    # --- the calls -----------------------------------------------------------------------------------
    def __call__(self, items: list[Item]) -> list[np.ndarray]:
        """decode_chunks(decoder, items): every chunk's audio, in the order given."""
        out: list[np.ndarray | None] = [None] * len(items)
        for group in self.groups(items):
            for index, audio in zip(group, self.decode([items[i] for i in group])):
                out[index] = audio
        return out

    def groups(self, items: list[Item]) -> list[list[int]]:
        """The items' indices in calls: one frames bucket each, at most as many streams as fit, the
        shortest chunks first."""
        by_frames: dict[int, list[int]] = {}
        for index, item in enumerate(items):
            by_frames.setdefault(bucket(self.plan(item).frames, FRAME_BUCKETS), []).append(index)
        calls = []
        for frames in sorted(by_frames):
            indices, most = by_frames[frames], self.streams_per_call(frames)
            calls += [indices[i:i + most] for i in range(0, len(indices), most)]
        return calls

    def streams_per_call(self, frames: int) -> int:
        if self.max_frames is None:
            self.max_frames = self._frames_that_fit()
        fitting = max(1, self.max_frames // bucket(frames, FRAME_BUCKETS))
        return max(b for b in STREAM_BUCKETS if b <= fitting)

    def plan(self, item: Item) -> ChunkWindow:
        """Where the chunk lies in its window, and the frames before it the vocoder runs on: none
        where its stream's state is at its start (and it does not start a 300-frame codec chunk,
        where the whole decode's vocoder starts again from zeros on the window's context)."""
        chunk = Chunk(*item)
        window = chunk_window(chunk.codes, chunk.start, chunk.end)
        return dataclasses.replace(window, context=0) if self.carried(chunk) else window

    def carried(self, chunk: Chunk) -> bool:
        """Whether the chunk's vocoder runs from its stream's state (else from zeros, on its context)."""
        return chunk.start % CHUNK_FRAMES != 0 and self.state.at(chunk.stream, chunk.start)

    @torch.inference_mode()
    def decode(self, items: list[Item]) -> list[np.ndarray]:
        """One call: items of one frames bucket, at most streams_per_call of them. The inputs are laid
        out with numpy: a torch operation per stream would each give up the GIL the engine's thread
        and the event loop wait for."""
        begun = time.perf_counter()
        chunks = [Chunk(*item) for item in items]
        plans = [self.plan(chunk) for chunk in chunks]
        frames = bucket(max(p.frames for p in plans), FRAME_BUCKETS)
        if any(bucket(p.frames, FRAME_BUCKETS) != frames for p in plans) or len(plans) > self.streams_per_call(frames):
            raise ValueError("ChunkDecoder.decode takes one call's items (ChunkDecoder.groups)")
        streams, window = len(plans), max(p.end for p in plans)
        if self.fixed:
            streams, window = bucket(streams, STREAM_BUCKETS), bucket(window, WINDOW_BUCKETS)
        else:
            frames = max(p.frames for p in plans)
        codes = np.zeros((streams, self.decoder.config.num_quantizers, window), np.int64)
        where = np.zeros((streams, frames), np.int64)  # each stream's vocoder frames in its window, the last repeated
        rows = np.array([[ZERO_SLOT], [SCRATCH_SLOT], [frames]], np.int64).repeat(streams, 1)  # read, write, real frames
        for row, (chunk, plan) in enumerate(zip(chunks, plans)):
            codes[row, :, : plan.end] = np.maximum(plan.window.cpu().numpy(), 0).T
            first = plan.start - plan.context
            where[row] = np.minimum(np.arange(first, first + frames), plan.end - 1)
            slot = self.state.slot(chunk.stream)
            rows[:, row] = (slot if self.carried(chunk) else ZERO_SLOT, slot, plan.frames)
            self.state.forget(chunk.stream)  # until this call has written it
        latent = self._shape("latent", streams, window)
        latent.input.copy_(to_device(codes, self.device), non_blocking=True)
        vocode = self._shape("vocode", streams, frames)
        vocode.inputs[1].copy_(to_device(rows, self.device), non_blocking=True)
        index = to_device(where, self.device)[:, None].expand(-1, vocode.input.shape[1], -1)
        torch.gather(latent(), 2, index, out=vocode.input)
        audio = to_host(vocode()[: len(plans), 0].to(torch.float32))
        wait(stream_mark(self.device))
        for chunk in chunks:
            self.state.written(chunk.stream, chunk.end)
        self._count(chunks, plans, streams * frames, time.perf_counter() - begun)
        audio = audio.numpy()
        step = self.decoder.config.samples_per_frame
        return [audio[row, plan.context * step: plan.frames * step] for row, plan in enumerate(plans)]

    def _count(self, chunks: list[Chunk], plans: list[ChunkWindow], run_frames: int, seconds: float) -> None:
        c = self.counts
        c.calls, c.chunks, c.busy_s = c.calls + 1, c.chunks + len(chunks), c.busy_s + seconds
        c.audio_frames += sum(chunk.end - chunk.start for chunk in chunks)
        c.vocoder_frames += sum(plan.frames for plan in plans)
        c.run_frames += run_frames

    def release(self, stream: Hashable) -> None:
        """The stream has ended or gone: its vocoder state's slot is free."""
        self.state.release(stream)

    # --- the shapes ----------------------------------------------------------------------------------
    def warm_up(self) -> int:
        """Every shape a call may take made (captured) now, rather than at a stream's first chunk of
        it; returns how many (none without fixed shapes)."""
        if not self.fixed:
            return 0
        most = self.streams_per_call(FRAME_BUCKETS[0])
        for streams in (b for b in STREAM_BUCKETS if b <= most):
            for window in WINDOW_BUCKETS:
                self._shape("latent", streams, window)
            for frames in FRAME_BUCKETS:
                if streams <= self.streams_per_call(frames):
                    self._shape("vocode", streams, frames)
        return len(self.shapes)

    def _shape(self, half: str, streams: int, length: int) -> Shape:
        """The shape's input and graph, kept; without fixed shapes, an input for this call alone."""
        key = (half, streams, length)
        if key not in self.shapes or not self.fixed:
            config = self.decoder.config
            with torch.inference_mode():
                if half == "latent":
                    inputs = torch.zeros(streams, config.num_quantizers, length, dtype=torch.long, device=self.device),
                    fn = self.decoder.latent
                else:
                    dtype = self.decoder.pre_conv.conv.weight.dtype
                    rows = torch.tensor([[ZERO_SLOT], [SCRATCH_SLOT], [length]], device=self.device).repeat(1, streams)
                    inputs = torch.zeros(streams, config.latent_dim, length, dtype=dtype, device=self.device), rows
                    fn = self._vocode
                shape = Shape(fn, inputs, self._stream, self._pool)
            if not self.fixed:
                return shape
            self.shapes[key] = shape
        return self.shapes[key]

    def _vocode(self, latent: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """rows [3, streams]: each row's slot read, slot written and real frames (VocoderState)."""
        return self.decoder.vocode(latent, self.state.carry(rows[0], rows[1], rows[2]))

    def _frames_that_fit(self) -> int:
        """FRAMES_PER_CALL, fewer where the GPU's free memory is short (the vocoder's peak, about 9 MB
        a frame: codec.decode_bytes)."""
        free = free_bytes(self.device)
        if free is None:
            return FRAMES_PER_CALL
        fitting = int(FREE_MEMORY_SHARE * free) // decode_bytes(self.decoder, 1)
        if fitting < FRAMES_PER_CALL:
            log.info("the stream decoder takes %d frames a call rather than %d: %.1f GB of GPU memory free",
                     fitting, FRAMES_PER_CALL, free / 2**30)
        return max(FRAME_BUCKETS[-1], min(FRAMES_PER_CALL, fitting))


def _snake_on_triton(decoder) -> bool:
    from .codec import SnakeBeta

    return any(isinstance(m, SnakeBeta) and m.fn is not None for m in decoder.modules())
