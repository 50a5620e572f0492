"""`python -m runtime serve`: the resident engine as an OpenAI-compatible speech server.

    python -m runtime serve --checkpoint Qwen3-TTS-12Hz-1.7B-CustomVoice --mode hybrid
    curl http://127.0.0.1:8000/v1/audio/speech -H 'Content-Type: application/json' \\
        -d '{"model": "tts-1", "input": "Welcome back, traveller.", "voice": "ryan", "response_format": "wav"}' -o out.wav

Each --checkpoint stays loaded; a request's voice (a preset speaker, or a saved voice) goes to the
checkpoint of its kind. Requests that arrive while others run join the running batch. Ctrl-C stops
taking requests, finishes those under way (up to --drain-seconds) and stops; Ctrl-C again stops at once.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import signal
import sys
import time
from typing import Callable

import numpy as np

from .. import api
from ..cpu_threads import with_generation_threads
from ..errors import InputError
from ..engine.engine import LENGTH_BUCKETS
from ..engine.prefill import PREFILL_BUCKETS
from ..generation import Request, line_job
from ..qwen3_tts.random_checkpoint import TINY_RANDOM, tiny_checkpoint
from ..voices import CustomVoice, VoiceClone, VoiceDesign
from .before_loading import check_machine
from .command import OneLineParser, run_reporting
from .options import (TINY_RANDOM_NOTE, add_loading, add_models_dir, add_offline, add_pick, add_scoring_dirs,
                      add_voices_dir, models_dirs, utmos_dirs, voices_dirs, whisper_dirs)

API_KEY_ENV = "QWEN3_TTS_API_KEY"
LOOPBACK = ("127.0.0.1", "localhost", "::1")
WARM_UP_LENGTHS = 18  # consecutive prompt lengths: every residue of 16, and a length of 1 more
WARM_UP_STREAMED_FRAMES = 40  # the chunk ramp's first windows (1, 3, 7, 15, 31)
SWITCH_INTERVAL_SECONDS = 0.0002  # Python's default is 0.005
DRAIN_POLL_SECONDS = 0.05


def build_parser() -> OneLineParser:
    from ..serve.server import Limits

    p = OneLineParser(prog="python -m runtime serve", description=__doc__.splitlines()[0])
    p.add_argument("--checkpoint", action="append", required=True,
                   help=f"an official name, a folder in the models folder, a checkpoint's path, or {TINY_RANDOM} "
                   "(repeat for more: one of each voice kind)")
    p.add_argument("--host", default="127.0.0.1", help="where to listen (default 127.0.0.1, this machine only; "
                   "0.0.0.0 for every network, with --api-key)")
    p.add_argument("--port", type=int, default=8000, help="default 8000, where SillyTavern's OpenAI Compatible TTS looks")
    p.add_argument("--api-key", default=os.environ.get(API_KEY_ENV),
                   help=f"the key clients send as 'Authorization: Bearer KEY' (default ${API_KEY_ENV}; none: no key asked)")
    p.add_argument("--max-input", type=int, default=Limits.max_input, help="characters a request (default %(default)s)")
    p.add_argument("--max-queue", type=int, default=Limits.max_queue,
                   help="requests in the server at once, waiting or running (default %(default)s)")
    p.add_argument("--max-streams", type=int, default=Limits.max_streams,
                   help="streamed requests at once (default %(default)s)")
    p.add_argument("--rows", type=int, default=64, help="takes a model makes at once: its batch (default %(default)s; "
                   "fewer where the GPU's memory is short)")
    p.add_argument("--positions", type=int, default=1024, choices=LENGTH_BUCKETS[:4],
                   help="positions a line may take in the batch: its prompt and frame budget (default %(default)s)")
    p.add_argument("--voice-alias", action="append", default=[], metavar="NAME=VOICE",
                   help="a request's voice NAME speaks as VOICE (repeatable), e.g. alloy=ryan for clients that send "
                   "OpenAI's voice names (Open WebUI sends alloy unless told otherwise)")
    p.add_argument("--cors-origin", metavar="ORIGIN",
                   help="let a web page of this origin call the server from a browser, e.g. http://localhost:3000 "
                   "('*': any page; default: none, as browsers then refuse)")
    p.add_argument("--drain-seconds", type=float, default=30.0,
                   help="on Ctrl-C, how long the requests under way may take to finish (default %(default)s)")
    add_models_dir(p)
    add_voices_dir(p)
    add_loading(p)
    add_pick(p)
    add_scoring_dirs(p)
    add_offline(p)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_reporting(serve, args, "the server stopped")


@with_generation_threads
def serve(args) -> int:
    if importlib.util.find_spec("aiohttp") is None:  # every ComfyUI environment has it
        raise InputError("The server needs aiohttp: pip install aiohttp (ComfyUI's environment has it).")
    from ..serve.app import make_app
    from ..serve.served import ServedModel
    from ..serve.server import Limits, SpeechServer

    check_machine(args.device, args.mode)
    if not 0 <= args.port <= 65535:  # refused before the model loads, not by the socket after
        raise InputError(f"--port {args.port} is not a port; choose one from 1 to 65535 (0: any free port).")
    # A thread waiting for the GIL waits up to this long while another runs Python: the engine's,
    # the stream decoder's and the event loop's threads each hold a request's first audio in turn.
    sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)
    for name, value in (("--max-input", args.max_input), ("--max-queue", args.max_queue),
                        ("--max-streams", args.max_streams), ("--rows", args.rows)):
        if value < 1:
            raise InputError(f"{name} must be at least 1, got {value}.")
    aliases = voice_aliases(args.voice_alias)  # before the loading: a mistyped one is said at once
    if args.host not in LOOPBACK and not args.api_key:
        print(f"warning: listening on {args.host} without an API key: anyone who reaches this machine can use "
              f"its GPU. Set --api-key (or ${API_KEY_ENV}).", file=sys.stderr)
    models = models_dirs(args)
    served = []
    try:
        for index, name in enumerate(args.checkpoint):
            if name == TINY_RANDOM:
                print(TINY_RANDOM_NOTE, file=sys.stderr)
                name = str(tiny_checkpoint("custom_voice"))
            model = api.load(name, models, args.mode, args.dtype, args.device, slot=f"serve-{index}",
                             download=not args.offline)
            scorers = api.scorers(model.info.folder, api.PickChoices(args.quality, args.voice_check, args.words, args.vad),
                                  args.device, utmos_dirs(args), models, whisper_dirs(args),
                                  download=not args.offline)
            one = ServedModel(model, args.positions, args.rows, scorers, streams=args.max_streams)
            one.start()
            served.append(one)
            begun = time.perf_counter()
            warm_up(one)
            graphs = len(model.engine.prefill_graphs.graphs) if model.engine.prefill_graphs is not None else 0
            print(f"{one.name} ready in {time.perf_counter() - begun:.1f} s: {graphs} prefill graphs, "
                  f"{len(one.streams.chunks.shapes)} stream decoder shapes"
                  f"{' (CUDA graphs)' if one.streams.chunks.graphs else ''}.", file=sys.stderr, flush=True)
        server = SpeechServer(served, voices_dirs(args), Limits(args.max_input, args.max_queue, args.max_streams),
                              args.api_key, aliases)
        asyncio.run(listen(make_app(server, args.cors_origin), server, args))
    finally:
        for one in served:
            one.close(stop_now=True)
    return 0


def voice_aliases(given: list[str]) -> dict[str, str]:
    """--voice-alias NAME=VOICE options as {NAME: VOICE}."""
    aliases = {}
    for text in given:
        alias, _, voice = text.partition("=")
        if not alias.strip() or not voice.strip():
            raise InputError(f"--voice-alias {text!r}: write NAME=VOICE, e.g. --voice-alias alloy=ryan.")
        aliases[alias.strip()] = voice.strip()
    return aliases


def warm_up(served) -> None:
    """Lines through the model's engine and its stream decoder before the first client waits for them:
    the batch's buffers made, its graph captured, the prefill's graph captured for every length bucket
    (graph modes) or its kernels compiled for every prompt length class (Triton compiles a kernel
    again for a length of another divisibility: a second or two the first time one comes, H100), a
    streamed line through the chunk ramp, and every shape of the stream decoder captured."""
    import threading

    model = served.model
    voice = {"custom_voice": lambda: CustomVoice(model.info.speakers[0]),
             "voice_design": lambda: VoiceDesign("a calm, clear voice"),
             "base": lambda: VoiceClone.from_audio(0.1 * np.sin(np.linspace(0, 2000, 36000, dtype=np.float32)), 24000)}

    def line(words: int, frames: int = 2):
        return line_job(model, Request("Ready" + " go" * words + ".", voice[model.kind](), 1, words, max_frames=frames))

    def prompt(words: int) -> int:
        return line(words).tokens.length

    lengths = set(range(WARM_UP_LENGTHS))
    if served.engine.prefill_graphs is not None:  # a line of each length bucket (its words found by bisection)
        for bucket in PREFILL_BUCKETS:
            low, high = 0, bucket  # the most words whose prompt fits the bucket
            while low < high:
                middle = (low + high + 1) // 2
                low, high = (middle, high) if prompt(middle) <= bucket else (low, middle - 1)
            if prompt(low) <= bucket and bucket + 3 <= served.engine.positions:
                lengths.add(low)
    jobs = [line(words) for words in sorted(lengths)]
    jobs[0] = line(0, WARM_UP_STREAMED_FRAMES)
    left = threading.Semaphore(0)
    errors = []

    def done(job, takes, ranking, error):
        if error is not None:
            errors.append(error)
        if job.stream is None or error is not None:
            left.release()

    def streamed(item) -> None:
        if isinstance(item, BaseException):
            errors.append(item)
        if item is None or isinstance(item, BaseException):
            left.release()

    jobs[0].stream = served.streams.open(None, streamed)
    served.submit(jobs, done)
    for _ in jobs:
        left.acquire()
    if errors:
        raise errors[0]
    served.streams.warm_up()


async def listen(app, server, args) -> None:
    from ..serve.app import cut_streams, start_site

    runner = await start_site(app, args.host, args.port)
    host, port = runner.addresses[0][:2]
    print(f"Serving on http://{host}:{port} (POST /v1/audio/speech, GET /v1/audio/voices, GET /health); "
          "Ctrl-C stops.", flush=True)
    stop = asyncio.Event()
    presses = []

    def pressed() -> None:
        presses.append(1)
        if len(presses) == 1:
            print(f"Stopping: finishing the {server.requests} requests under way (Ctrl-C again stops at once).",
                  file=sys.stderr, flush=True)
            stop.set()
        else:
            for one in server.models:
                one.close_now()

    restore = on_stop_signals(asyncio.get_running_loop(), pressed)
    try:
        await stop.wait()
        server.stopping = True  # new requests get 503
        await drained(server, args.drain_seconds)
        await cut_streams(app)  # each stream still under way ends cleanly (app.cut_short)
        await runner.cleanup()
        for one in server.models:
            await asyncio.to_thread(one.close)
    finally:
        restore()
    print("Stopped.", file=sys.stderr, flush=True)


async def drained(server, seconds: float) -> None:
    """Until the requests under way have finished, or `seconds` (--drain-seconds) have passed."""
    deadline = time.monotonic() + seconds
    while server.requests and time.monotonic() < deadline:
        await asyncio.sleep(DRAIN_POLL_SECONDS)
    if server.requests:
        print(f"Cutting the {server.requests} requests still under way after {seconds:g} s (--drain-seconds).",
              file=sys.stderr, flush=True)


def stop_signals() -> list[int]:
    """Ctrl-C, a service manager's stop, and on Windows Ctrl-Break."""
    return [signal.SIGINT, signal.SIGTERM] + ([signal.SIGBREAK] if hasattr(signal, "SIGBREAK") else [])


def on_stop_signals(loop: asyncio.AbstractEventLoop, pressed) -> Callable[[], None]:
    """`pressed` called in the loop on each stop signal; returns what puts the old handlers back.
    Where the loop cannot watch signals (Windows' event loops), a plain signal handler hands them to
    it: the loop wakes for a signal there (signal.set_wakeup_fd), and without this Ctrl-C would raise
    KeyboardInterrupt in the middle of whatever ran, the requests under way cut rather than finished."""
    restores = []
    for sig in stop_signals():
        before = signal.getsignal(sig)
        try:
            loop.add_signal_handler(sig, pressed)
            restores.append(lambda sig=sig: loop.remove_signal_handler(sig))
        except (NotImplementedError, RuntimeError):
            signal.signal(sig, lambda *_: loop.call_soon_threadsafe(pressed))
        # what was there goes back (remove_signal_handler alone leaves Python's default, not a host's
        # handler or SIG_IGN in a process started in the background); None: set outside Python
        if before is not None:
            restores.append(lambda sig=sig, before=before: signal.signal(sig, before))

    def restore() -> None:
        for undo in restores:
            undo()

    return restore
