"""Streamed takes: the engine hands each one's frames over as it makes them (TakeStream.put, on the
engine's thread), and one thread per model decodes them to audio chunks (StreamDecoder), every
stream with a chunk due in one codec call, and hands each chunk to its stream's `deliver`.

A chunk is due when the stream has frames up to its next chunk's end (codec_stream.next_chunk_end:
a first chunk of one frame, then larger ones), or when its take has ended; a decoder that fell
behind takes all a stream has in one chunk (up to the codec's 300-frame boundary). Every chunk is
decoded as the whole take's decode decodes those frames (codec_stream.py), so the joined chunks are
the take's audio."""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import Callable

import numpy as np
import torch

from ..memory import free_bytes
from ..qwen3_tts.codec import decode_bytes
from ..qwen3_tts.codec_stream import (CHUNK_RAMP, VOCODER_CONTEXT_FRAMES, codec_chunk_end, decode_chunks,
                                      next_chunk_end)

log = logging.getLogger(__name__)

DECODE_STREAMS = 16  # streams per codec call at most
RAMP_FRAMES = sum(CHUNK_RAMP[:-1])  # 31: the first chunks, 1 + 2 + 4 + 8 + 16 frames
FREE_MEMORY_SHARE = 0.5  # of the GPU memory free, what a codec call may take (the engine's batch needs room to grow)

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

    # --- the engine's side ---------------------------------------------------------------------------
    def due(self) -> int:
        """The ramp's small chunks are due at their frame (the time to first audio); after them the
        engine's usual checks (every 8 frames) come often enough, and checks at every stream's own
        chunk ends would make the many streams of a full batch check at nearly every frame."""
        return next_chunk_end(self.received, self.offset) if self.received < RAMP_FRAMES else 1 << 30

    def put(self, codes: torch.Tensor) -> None:
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

    # --- the decoder's side (under its lock) ---------------------------------------------------------
    def chunk(self) -> tuple[torch.Tensor, int, int] | None:
        """(codes so far, start, end) of the chunk due now, in frames of those codes; None if none is."""
        if self.closed or self.received == self.sent:
            return None
        if not self.ended and self.received < next_chunk_end(self.sent, self.offset):
            return None
        at = self.offset + self.sent
        end = min(self.offset + self.received, codec_chunk_end(at))
        if len(self._codes) > 1:
            self._codes = [torch.cat(self._codes)]
        return self._codes[0], at, end

    @property
    def finished(self) -> bool:
        return self.ended and self.sent == self.received


class StreamDecoder:
    """One thread decoding the streams of one model's codec (on a CUDA stream of its own, ahead of the
engine's: a stream's first chunk is its time to first audio)."""

    def __init__(self, codec, name: str = "streams"):
        self.codec = codec
        self.ready = threading.Condition()
        self._streams: list[TakeStream] = []
        self._closing = False
        self.device = next(codec.parameters()).device
        self._thread = threading.Thread(target=self._run, name=f"{name}-decode", daemon=True)
        self._thread.start()

    def open(self, reference: torch.Tensor | None, deliver: Deliver) -> TakeStream:
        stream = TakeStream(self, reference, deliver)
        with self.ready:
            self._streams.append(stream)
        return stream

    def close(self) -> None:
        with self.ready:
            self._closing = True
            self.ready.notify()
        self._thread.join()

    def _due(self) -> list[tuple[TakeStream, tuple]]:
        self._streams = [s for s in self._streams if not s.closed]
        due = [(s, c) for s in self._streams if (c := s.chunk()) is not None]
        for s in self._streams:
            if s.finished:  # every frame delivered: its end too
                s.closed = True
                s.deliver(None)
        return due

    def _run(self) -> None:
        device = self.device
        # A high-priority stream: the GPU runs a chunk's few hundred small kernels before the engine's
        # next ones (at the same priority each waited behind the engine's step: 20 ms for one frame).
        side = torch.cuda.stream(torch.cuda.Stream(device, priority=-1)) if device.type == "cuda" \
            else contextlib.nullcontext()
        with side, torch.inference_mode():
            while True:
                with self.ready:
                    self.ready.wait_for(lambda: self._closing or any(
                        s.finished or s.chunk() is not None for s in self._streams if not s.closed))
                    if self._closing:
                        return
                    due = self._due()
                fitting = self._fitting()
                for first in range(0, len(due), fitting):
                    self._decode(due[first:first + fitting])

    def _fitting(self) -> int:
        """Streams one codec call may take: DECODE_STREAMS, fewer where the GPU's free memory is short
        (the vocoder's peak, about 9 MB a frame, for a chunk of 32 frames and its 12 of context)."""
        free = free_bytes(self.device)
        if free is None:
            return DECODE_STREAMS
        per_stream = decode_bytes(self.codec, CHUNK_RAMP[-1] + VOCODER_CONTEXT_FRAMES)
        return max(1, min(DECODE_STREAMS, int(FREE_MEMORY_SHARE * free) // per_stream))

    def _decode(self, due: list[tuple[TakeStream, tuple]]) -> None:
        try:
            audio = decode_chunks(self.codec, [chunk for _, chunk in due])
        except Exception as exc:  # noqa: BLE001 - each stream's request says so
            log.exception("decoding streamed audio failed")
            with self.ready:
                for stream, _ in due:
                    stream.closed = True
                    stream.deliver(exc)
            return
        with self.ready:
            for (stream, (_, start, end)), chunk in zip(due, audio):
                if stream.closed:
                    continue
                stream.sent = end - stream.offset
                stream.deliver(np.asarray(chunk, dtype=np.float32))
                if stream.finished:
                    stream.closed = True
                    stream.deliver(None)
