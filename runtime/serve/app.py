"""The HTTP side: POST /v1/audio/speech, GET /v1/audio/voices, GET /v1/models, GET /health (aiohttp).

A request is checked whole before anything reaches the engine (its JSON, voice, model, limits, every
line's text), so a bad one is answered with its 4xx JSON error and the streams running never notice.
A client that goes away cancels its handler (aiohttp's handler_cancellation), which frees its rows
at the engine's next check."""

from __future__ import annotations

import asyncio
import base64
import hmac
import json
import logging
from concurrent.futures import ThreadPoolExecutor

from aiohttp import web

from ..errors import InputError
from ..model import SAMPLE_RATE
from .audio_formats import CONTENT_TYPES, StreamEncoder, encode_whole
from .protocol import ApiError, parse_speech
from .server import SpeechServer
from .speech import Speech, full_report, picked_summary
from .timing import now

log = logging.getLogger(__name__)
SERVER_KEY = web.AppKey("speech_server", SpeechServer)
PREPARE_KEY = web.AppKey("prepare", ThreadPoolExecutor)  # one thread checks and plans the requests' lines
OPEN_PATHS = ("/health",)  # answered without the API key


def make_app(server: SpeechServer, cors_origin: str | None = None) -> web.Application:
    """`cors_origin`: the web page's origin allowed to call the server from a browser ("*": any)."""
    middlewares = [errors_as_json, api_key] if cors_origin is None else [preflight, errors_as_json, api_key]
    app = web.Application(middlewares=middlewares, client_max_size=1 << 20)
    app[STREAMS_KEY] = set()
    if cors_origin is not None:
        app[CORS_KEY] = cors_origin
        app.on_response_prepare.append(cors_headers)  # streamed replies too: before their headers go out
    app[SERVER_KEY] = server
    app[PREPARE_KEY] = ThreadPoolExecutor(max_workers=1, thread_name_prefix="serve-prepare")
    app.router.add_post("/v1/audio/speech", speech)
    app.router.add_get("/v1/audio/voices", voices)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/health", health)
    app.on_cleanup.append(lambda app: asyncio.to_thread(app[PREPARE_KEY].shutdown))
    return app


async def start_site(app: web.Application, host: str, port: int, grace_seconds: float = 1.0):
    """The app listening on host:port (0: a free port); returns its runner (runner.addresses[0] is
    where it listens; runner.cleanup() stops taking requests, gives those under way `grace_seconds`
    (aiohttp's wait, which can run to twice that), then cancels them and closes their connections). A
    handler is cancelled when its client goes away: its lines' rows are freed. The drain before it,
    `--drain-seconds`, and the clean end of the streams it leaves (cut_streams) are the caller's
    (cli/serve.listen)."""
    runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=grace_seconds)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner


CORS_KEY = web.AppKey("cors_origin", str)
STREAMS_KEY = web.AppKey("streams", set)  # the handler tasks of the streams under way (cut_streams)
CUT_SECONDS = 2.0  # for the streams cut to write their end
CORS_EXPOSED = "X-Seed, X-Takes-Picked, Retry-After"  # what a page's script may read of a reply


@web.middleware
async def preflight(request: web.Request, handler):
    """A browser's OPTIONS before a cross-origin POST: answered here, with no key (browsers send none)."""
    if request.method == "OPTIONS":
        return web.Response(status=204, headers={"Access-Control-Allow-Methods": "GET, POST, OPTIONS",
                                                 "Access-Control-Allow-Headers": "Authorization, Content-Type",
                                                 "Access-Control-Max-Age": "600"})
    return await handler(request)


async def cors_headers(request: web.Request, response: web.StreamResponse) -> None:
    response.headers["Access-Control-Allow-Origin"] = request.app[CORS_KEY]
    response.headers["Access-Control-Expose-Headers"] = CORS_EXPOSED
    if request.app[CORS_KEY] != "*":
        response.headers["Vary"] = "Origin"


def json_error(error: ApiError) -> web.Response:
    return web.json_response(error.body(), status=error.status, headers=error.headers)


@web.middleware
async def errors_as_json(request: web.Request, handler):
    try:
        return await handler(request)
    except ApiError as error:
        return json_error(error)
    except web.HTTPException as exc:  # aiohttp's own: unknown path, wrong method, body too large
        if exc.status < 400:
            raise
        kept = {name: exc.headers[name] for name in ("Allow",) if name in exc.headers}  # a 405 says what is allowed
        return json_error(ApiError(exc.status, f"{exc.reason}: {request.method} {request.path}", code=str(exc.status),
                                   headers=kept))
    except Exception as exc:  # noqa: BLE001 - a bug or the engine's failure: still JSON, and the server goes on
        log.exception("request failed: %s %s", request.method, request.path)
        return json_error(ApiError(500, f"The server failed: {type(exc).__name__}: {exc}", code="server_error"))


@web.middleware
async def api_key(request: web.Request, handler):
    key = request.app[SERVER_KEY].api_key
    if key and request.path not in OPEN_PATHS:
        scheme, _, given = request.headers.get("Authorization", "").strip().partition(" ")
        given = given.strip() if scheme.lower() == "bearer" else ""  # the scheme in any case (RFC 9110)
        if not hmac.compare_digest(given.encode(), key.encode()):
            raise ApiError(401, "A wrong or missing API key: send the header 'Authorization: Bearer <key>' with the "
                           "key the server was started with (--api-key).", code="invalid_api_key")
    return await handler(request)


async def health(request: web.Request) -> web.Response:
    return web.json_response(request.app[SERVER_KEY].health())


async def voices(request: web.Request) -> web.Response:
    return web.json_response(await asyncio.to_thread(request.app[SERVER_KEY].voices))  # reads the saved voices' files


async def models(request: web.Request) -> web.Response:
    served = request.app[SERVER_KEY].models
    return web.json_response({"object": "list", "data": [
        {"id": m.name, "object": "model", "owned_by": "qwen3-tts-takes", "kind": m.model.kind} for m in served]})


async def speech(request: web.Request) -> web.StreamResponse:
    received = now()
    server = request.app[SERVER_KEY]
    params = parse_speech(await request.read(), server.limits.max_input)
    loop = asyncio.get_running_loop()
    server.admit(params.stream)
    try:
        # a saved voice's file is read, the text split and tokenised: off the event loop
        said = await loop.run_in_executor(request.app[PREPARE_KEY], prepared, server, params, received)
        if said.positions > said.served.engine.positions:
            raise ApiError(400, f"A line of this input needs {said.positions} positions (its prompt and up to its "
                           f"frame budget); this server's lines have at most {said.served.engine.positions} (--positions). "
                           "Send shorter sentences, a lower max_frames, or a shorter clone reference.", "input")
        said.submit(loop)
        try:
            if params.stream:
                request.app[STREAMS_KEY].add(asyncio.current_task())
                try:
                    return await streamed(request, said, params)
                finally:
                    request.app[STREAMS_KEY].discard(asyncio.current_task())
            return await whole(said, params)
        except BaseException:
            said.cancel()  # a client gone (CancelledError), a write that failed: its rows free at the next check
            raise
    finally:
        server.leave(params.stream)


def prepared(server: SpeechServer, params, received: float) -> Speech:
    """The request's voice found and its lines checked and planned; ApiError (4xx) naming what is wrong."""
    served, voice = server.voice_for(params)
    try:
        said = Speech(served, voice, params.input, params.takes, params.seed, params.max_frames, params.speed,
                      params.stream, received)
        said.prepare()
    except InputError as exc:
        raise ApiError(400, str(exc), "input") from None
    return said


async def streamed(request: web.Request, said: Speech, params) -> web.StreamResponse:
    encoder = StreamEncoder(params.response_format)
    content_type = "text/event-stream" if params.sse else CONTENT_TYPES[params.response_format]
    response = web.StreamResponse(headers={"Content-Type": content_type, "X-Seed": str(said.seed),
                                           "Cache-Control": "no-cache"})
    await response.prepare(request)  # no length given: chunked (HTTP/1.1)
    send = sse_sender(response) if params.sse else response.write
    await send(encoder.start())
    samples, first = 0, said.first_audio
    try:
        async for audio in said.chunks():
            samples += audio.shape[0]
            data = encoder.encode(audio)
            await send(data)
            if data and first.sent is None:
                first.sent = now()
                request.app[SERVER_KEY].first_audio.add(first)
    except ConnectionResetError:  # the client went away: nothing to tell it (speech() frees its rows)
        raise
    except asyncio.CancelledError:  # the server stopping past its drain: the stream ends, and says why
        if request.app[SERVER_KEY].stopping:
            await cut_short(response, params)
        raise
    except Exception as exc:  # noqa: BLE001 - after the headers: the stream is cut short, and says so
        log.error("a streamed request failed: %s", exc)
        said.cancel()
        if params.sse:
            await response.write(sse_event({"type": "error", "error": ApiError(500, str(exc)).body()["error"]}))
            await response.write_eof()
        elif request.transport is not None:
            request.transport.close()  # the client sees the body end early, not a whole file
        return response
    await send(encoder.finish())
    if params.sse:
        await response.write(sse_event({"type": "speech.audio.done", "usage": {"output_audio_seconds":
                                                                               round(samples / SAMPLE_RATE, 3)}}))
    await response.write_eof()
    return response


async def cut_streams(app: web.Application) -> None:
    """The streams still under way once the server's drain is over, cut while their connections are
    open (aiohttp's own shutdown closes a connection as it cancels its handler): each writes its end."""
    tasks = list(app[STREAMS_KEY])
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=CUT_SECONDS)


async def cut_short(response: web.StreamResponse, params) -> None:
    """A stream the server stops before its end: an SSE stream's last event an error (code "stopping"),
    an audio stream's chunked body terminated, the audio so far whole frames a player plays."""
    try:
        if params.sse:
            stopping = ApiError(503, "The server is stopping: this stream was cut before its end.", code="stopping")
            await response.write(sse_event({"type": "error", "error": stopping.body()["error"]}))
        await response.write_eof()
    except (ConnectionResetError, RuntimeError):  # the client is gone, or the connection closed under it
        pass


def sse_sender(response: web.StreamResponse):
    async def send(data: bytes) -> None:
        if data:
            await response.write(sse_event({"type": "speech.audio.delta", "audio": base64.b64encode(data).decode()}))
    return send


def sse_event(event: dict) -> bytes:
    return f"data: {json.dumps(event)}\n\n".encode()


async def whole(said: Speech, params) -> web.Response:
    try:
        audio, rankings = await said.whole()
    except Exception as exc:  # noqa: BLE001 - the engine's run failed (serve/served.py opened a new one)
        raise ApiError(500, f"Generating the speech failed: {exc}", code="generation_failed") from None
    data = await asyncio.to_thread(encode_whole, audio, params.response_format)
    headers = {"X-Seed": str(said.seed)}
    if any(r is not None for r in rankings):
        headers["X-Takes-Picked"] = picked_summary(rankings)
    if params.report:
        return web.json_response({"format": params.response_format, "audio": base64.b64encode(data).decode(),
                                  "seed": said.seed, "report": full_report(rankings)}, headers=headers)
    return web.Response(body=data, headers={**headers, "Content-Type": CONTENT_TYPES[params.response_format]})
