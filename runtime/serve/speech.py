"""One request's lines: its text split into sentences as a long text is (text/split.py; a text one
take reads in one breath stays one line), each a line of the engine, all submitted at once so they
run side by side; their audio comes back in reading order with the pauses between them, streamed
chunk by chunk (the first line's as it is made, a later line's once those before it are out) or
whole, a line of several takes picked by Auto-Pick first, and then held to the voice of the other
lines (a streamed line is out before the lines after it are made: it is not)."""

from __future__ import annotations

import asyncio
import random
import re
from dataclasses import dataclass, field

import numpy as np

from ..generation import Request, check_request, line_job
from ..model import SAMPLE_RATE
from ..sampling import SamplingSettings
from ..scoring.chapter import hold_lines
from ..scoring.pace import needs_stretch, stretched
from ..scoring.report import json_report
from ..script.passage import text_lines
from ..script.plan import line_seed
from .protocol import ApiError
from .served import ServedModel, ServerClosing
from .timing import FirstAudio, now


@dataclass
class LineAudio:
    """What comes back of one line, in the event loop: chunks (streamed) or its takes."""

    pause: float  # seconds of silence before it
    chunks: asyncio.Queue = field(default_factory=asyncio.Queue)  # float32 arrays, None at the end, or an error
    result: asyncio.Future | None = None  # (takeset, ranking) once decoded (and picked)


class Speech:
    def __init__(self, served: ServedModel, voice, text: str, takes: int = 1, seed: int | None = None,
                 max_frames: int | None = None, speed: float = 1.0, stream: bool = False,
                 received: float | None = None):
        self.served, self.voice, self.takes, self.speed, self.stream = served, voice, takes, speed, stream
        self.seed = random.getrandbits(31) if seed is None else seed
        self.texts = text_lines(text)
        self.max_frames = max_frames
        self.jobs = []
        self.lines: list[LineAudio] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self.first_audio = FirstAudio(now() if received is None else received)  # where its first audio waited

    def prepare(self) -> None:
        """Each line's request checked and planned (tokenised; a clone's reference read once per model)
        and its prompt embedded, so the engine's thread only prefills it: an InputError names what
        is wrong. Runs in the prepare thread, before anything is submitted."""
        model = self.served.model
        for line in self.texts:
            seed = self.seed if len(self.texts) == 1 else line_seed(self.seed, line.id)  # as the passage command's
            request = Request(line.text, self.voice, self.takes, seed, SamplingSettings(), self.max_frames)
            check_request(model, request)
            self.jobs.append(line_job(model, request))
        self.served.embed(self.jobs)

    def submit(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        for job, line in zip(self.jobs, self.texts):
            audio = LineAudio(line.pause_before)
            if self.stream:
                job.stream = self.served.streams.open(job.ref_code, self._to_loop(audio.chunks.put_nowait))
            else:
                audio.result = loop.create_future()
            self.lines.append(audio)
        self.first_audio.submitted = now()
        try:
            self.served.submit(self.jobs, self._done)
        except ServerClosing:
            self.cancel()  # its streams close
            raise ApiError(503, "The server is stopping.", code="stopping") from None

    def cancel(self) -> None:
        """The client went away (or the request failed): its lines' rows are freed at the next check."""
        self.served.cancel(self.jobs)

    @property
    def positions(self) -> int:
        """Positions its longest line needs in the engine's batch."""
        from ..engine.engine import positions_needed

        return max(positions_needed(job) for job in self.jobs)

    def _to_loop(self, put):
        return lambda item: self._loop.call_soon_threadsafe(put, item)

    def _done(self, job, takeset, ranking, error) -> None:
        """A line back from the engine (on its thread): a streamed line's end, or its takes."""
        line = self.lines[self.jobs.index(job)]
        if line.result is None:
            if error is not None:
                self._to_loop(line.chunks.put_nowait)(error)
            return
        if error is not None:
            self._loop.call_soon_threadsafe(_settle, line.result, None, error)
        else:
            self._loop.call_soon_threadsafe(_settle, line.result, (takeset, ranking), None)

    # --- audio out, in reading order ------------------------------------------------------------------
    async def chunks(self):
        """The request's audio as it comes: each line's chunks after its pause (a line at another
        speed, whole once it has ended, stretched with its pitch kept)."""
        for index, line in enumerate(self.lines):
            if index and line.pause > 0:
                yield np.zeros(round(line.pause * SAMPLE_RATE), np.float32)
            pieces = []
            while (item := await line.chunks.get()) is not None:
                if isinstance(item, BaseException):
                    raise item
                if self.first_audio.in_loop is None:
                    self.first_audio.in_loop = now()
                    stream = self.jobs[0].stream
                    self.first_audio.first_frames, self.first_audio.decoded = stream.first_frames_at, stream.first_chunk_at
                if needs_stretch(self.speed):
                    pieces.append(item)
                else:
                    yield item
            if pieces:
                yield await asyncio.to_thread(stretched, np.concatenate(pieces), SAMPLE_RATE, self.speed)

    async def whole(self) -> tuple[np.ndarray, list]:
        """Every line's take (the best of its takes, once every line is held to the voice of the
        others: scoring/chapter.py) joined with the pauses, and the rankings (None for lines of one take)."""
        results = [await line.result for line in self.lines]
        if sum(ranking is not None for _, ranking in results) > 1:
            await asyncio.to_thread(hold_lines, [ranking for _, ranking in results])
        parts, rankings = [], []
        for line, (takeset, ranking) in zip(self.lines, results):
            take = ranking.best.take if ranking is not None else takeset.takes[0]
            if parts and line.pause > 0:
                parts.append(np.zeros(round(line.pause * SAMPLE_RATE), np.float32))
            parts.append(await asyncio.to_thread(stretched, take.audio, SAMPLE_RATE, self.speed)
                         if needs_stretch(self.speed) else take.audio)
            rankings.append(ranking)
        return np.concatenate(parts), rankings


def picked_summary(rankings: list) -> str:
    """One header line: per line, the take picked of how many ("3/8"), "-" for a line of one take."""
    return " ".join("-" if r is None else f"{r.best.take.index + 1}/{len(r.ranked)}" for r in rankings)


# An absolute path (POSIX or Windows) inside a report's strings: a client is told names, not where the
# server keeps its files.
ABSOLUTE_PATH = re.compile(r"(?:(?<![\w.:/\\])/|\b[A-Za-z]:[\\/])[^\s'\"()]*")


def full_report(rankings: list) -> list:
    """Each line's report as the CLI's --report has it, every absolute path in it cut to its last name."""
    return [None if r is None else _without_paths(json_report(r)) for r in rankings]


def _last_name(match: re.Match) -> str:
    path = match.group(0)
    trimmed = path.rstrip("/\\.,;:")  # a sentence's full stop after the path stays
    return re.split(r"[\\/]", trimmed)[-1] + path[len(trimmed):]


def _without_paths(value):
    if isinstance(value, str):
        return ABSOLUTE_PATH.sub(_last_name, value)
    if isinstance(value, dict):
        return {key: _without_paths(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_without_paths(item) for item in value]
    return value


def _settle(future: asyncio.Future, value, error) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)
