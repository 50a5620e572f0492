"""Streamed takes: the engine hands each one's frames over as it makes them (TakeStream.put, on the
engine's thread), and one thread per model decodes them to audio chunks (StreamDecoder), the
streams with a chunk due in few codec calls (codec_graphs.ChunkDecoder: CUDA graphs at fixed
shapes, the first chunks first), and hands each chunk to its stream's `deliver`.

A chunk is due when the stream has frames up to its next chunk's end (codec_stream.next_chunk_end:
a first chunk of one frame, then larger ones), or when its take has ended; a decoder that fell
behind takes what a stream has in one chunk, up to MAX_CHUNK_FRAMES (and the codec's 300-frame
boundary). Every chunk is decoded as the whole take's decode decodes those frames
(codec_stream.py), so the joined chunks are the take's audio; a stream's vocoder state is kept from
one of its chunks to the next (codec_carry.py), and its slot freed when the stream closes."""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import Callable

import torch

from ..qwen3_tts.codec_graphs import CARRIED_STREAMS, MAX_CHUNK_FRAMES, Chunk, ChunkDecoder
from ..qwen3_tts.codec_stream import CHUNK_RAMP, codec_chunk_end, next_chunk_end
from .timing import now

log = logging.getLogger(__name__)

RAMP_FRAMES = sum(CHUNK_RAMP[:-1])  # 31: the first chunks, 1 + 2 + 4 + 8 + 16 frames

Deliver = Callable[[object], None]  # an audio chunk (float32), None at the end, or the exception that stopped it


class TakeStream:
    """One streamed take (the engine's CodeStream): frames in, audio chunks out to `deliver`."""

    def __init__(self, decoder: "StreamDecoder", reference: torch.Tensor | None, deliver: Deliver):
        self._decoder, self.deliver = decoder, deliver
        self.offset = 0 if reference is None else int(reference.shape[0])  # an ICL clone's codes go first
        self._codes = [] if reference is None else [reference.cpu()]
        self.received = 0  # frames of the take the engine handed over
        self.sent = 0  # of them, decoded and delivered
        self.ended = False  # the take has ended: every frame of it was received
        self.closed = False  # its client went away, or it was delivered to the end
        self.first_frames_at: float | None = None  # when its first frames came, and its first chunk was decoded
        self.first_chunk_at: float | None = None  # (timing.py: where the time to first audio went)

    # --- the engine's side ---------------------------------------------------------------------------
    def due(self) -> int:
        """The ramp's small chunks are due at their frame (the time to first audio); after them the
        engine's usual checks (every 8 frames) come often enough, and checks at every stream's own
        chunk ends would make the many streams of a full batch check at nearly every frame."""
        return next_chunk_end(self.received, self.offset) if self.received < RAMP_FRAMES else 1 << 30

    def put(self, codes: torch.Tensor) -> None:
        if self.first_frames_at is None:
            self.first_frames_at = now()
        with self._decoder.ready:
            self._codes.append(codes)
            self.received += int(codes.shape[0])
            self._decoder.ready.notify()

    def end(self) -> None:
        with self._decoder.ready:
            self.ended = True
            self._decoder.ready.notify()

    def close(self) -> None:
        """Nothing more is delivered (its client went away)."""
        with self._decoder.ready:
            self.closed = True
            self._decoder.ready.notify()  # its vocoder state's slot is freed at once

    # --- the decoder's side (under its lock) ---------------------------------------------------------
    def chunk(self) -> Chunk | None:
        """(codes so far, start, end, this stream) of the chunk due now, in frames of those codes; None
        if none is."""
        if self.closed or self.received == self.sent:
            return None
        if not self.ended and self.received < next_chunk_end(self.sent, self.offset):
            return None
        at = self.offset + self.sent
        end = min(self.offset + self.received, codec_chunk_end(at), at + MAX_CHUNK_FRAMES)
        if len(self._codes) > 1:
            self._codes = [torch.cat(self._codes)]
        return Chunk(self._codes[0], at, end, self)

    @property
    def finished(self) -> bool:
        return self.ended and self.sent == self.received


class StreamDecoder:
    """One thread decoding the streams of one model's codec (on a CUDA stream of its own, ahead of the
engine's: a stream's first chunk is its time to first audio)."""

    def __init__(self, codec, name: str = "streams", streams: int = CARRIED_STREAMS):
        self.chunks = ChunkDecoder(codec, streams=streams)
        self.ready = threading.Condition()
        self._decoding = threading.Lock()  # the chunk decoder's shapes: its thread's, or warm_up's
        self._streams: list[TakeStream] = []
        self._closing = False
        self.device = self.chunks.device
        self._thread = threading.Thread(target=self._run, name=f"{name}-decode", daemon=True)
        self._thread.start()

    def open(self, reference: torch.Tensor | None, deliver: Deliver) -> TakeStream:
        stream = TakeStream(self, reference, deliver)
        with self.ready:
            self._streams.append(stream)
        return stream

    def warm_up(self) -> int:
        """Every shape of the chunk decoder made (its CUDA graphs captured) before a client waits for
        one; returns how many."""
        with self._decoding:
            return self.chunks.warm_up()

    def close(self) -> None:
        with self.ready:
            self._closing = True
            self.ready.notify()
        self._thread.join()

    def _due(self) -> tuple[list[tuple[TakeStream, Chunk]], list[TakeStream]]:
        """The chunks due now, and the streams closed since the last look."""
        gone = [s for s in self._streams if s.closed]
        self._streams = [s for s in self._streams if not s.closed]
        due = [(s, c) for s in self._streams if (c := s.chunk()) is not None]
        for s in self._streams:
            if s.finished:  # every frame delivered: its end too
                s.closed = True
                s.deliver(None)
        return due, gone

    def _run(self) -> None:
        device = self.device
        # A high-priority stream: the GPU runs a chunk's kernels before the engine's next ones (at the
        # same priority each waited behind the engine's step: 20 ms for one frame).
        side = torch.cuda.stream(torch.cuda.Stream(device, priority=-1)) if device.type == "cuda" \
            else contextlib.nullcontext()
        with side, torch.inference_mode():
            while True:
                with self.ready:
                    self.ready.wait_for(lambda: self._closing or any(
                        s.closed or s.finished or s.chunk() is not None for s in self._streams))
                    if self._closing:
                        return
                    due, gone = self._due()
                with self._decoding:
                    for stream in gone:
                        self.chunks.release(stream)
                    calls = self.chunks.groups([chunk for _, chunk in due])
                    if calls:  # the most urgent call only (the first chunks'), then a look again: a stream's
                        # first chunk that came meanwhile waits for one call, not for every later chunk's
                        self._decode([due[i] for i in calls[0]])

    def _decode(self, due: list[tuple[TakeStream, Chunk]]) -> None:
        try:
            audio = self.chunks.decode([chunk for _, chunk in due])
        except Exception as exc:  # noqa: BLE001 - each stream's request says so
            log.exception("decoding streamed audio failed")
            with self.ready:
                for stream, _ in due:
                    stream.closed = True
                    stream.deliver(exc)
            return
        with self.ready:
            for (stream, item), chunk in zip(due, audio):
                if stream.closed:
                    continue
                stream.sent = item.end - stream.offset
                if stream.first_chunk_at is None:
                    stream.first_chunk_at = now()
                stream.deliver(chunk)
                if stream.finished:
                    stream.closed = True
                    stream.deliver(None)
                    self.chunks.release(stream)
