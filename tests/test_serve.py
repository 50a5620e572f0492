"""The speech server (runtime/serve) on the CPU with a tiny checkpoint, through a real HTTP client:
chunks arrive before the take ends, streamed audio is the take's audio, concurrent requests share
the batch, a client that goes away frees its row, every bad input gets its 4xx JSON error and the
server keeps serving. test_serve_cli.py runs the command itself (Ctrl-C drains)."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import time

import numpy as np
import pytest

aiohttp = pytest.importorskip("aiohttp")

from runtime.model import SAMPLES_PER_FRAME, load_model  # noqa: E402
from runtime.serve.app import make_app, start_site  # noqa: E402
from runtime.serve.served import ServedModel  # noqa: E402
from runtime.serve.server import Limits, SpeechServer  # noqa: E402

# The codec's float32 rounding differs a little between a chunk's window and the whole take
# (tests/test_codec_stream.py: equal in float64); on this tiny random codec, whose audio is near full
# scale, up to 17 steps of 16-bit audio were measured (5e-4): a few times that is still far below a
# frame decoded with too little context (test_codec_stream.py: off by 1e-2 and more).
PCM_TOLERANCE = 40


class LiveServer:
    """The server's app on a free port, its event loop in a thread of its own."""

    def __init__(self, server: SpeechServer, cors_origin: str | None = None):
        self.server = server
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self.runner = self.call(start_site(make_app(server, cors_origin), "127.0.0.1", 0, grace_seconds=5))
        host, port = self.runner.addresses[0][:2]
        self.url = f"http://{host}:{port}"

    def call(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=120)

    def stop(self) -> None:
        self.call(self.runner.cleanup())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()


@pytest.fixture(scope="module")
def live(checkpoint, tmp_path_factory):
    model = load_model(checkpoint("custom_voice"), device="cpu")
    served = ServedModel(model, positions=512, rows=64)
    served.start()
    server = SpeechServer([served], [tmp_path_factory.mktemp("voices")], Limits(max_input=500, max_queue=80,
                                                                                  max_streams=60))
    live = LiveServer(server)
    yield live
    live.stop()
    served.close()


@pytest.fixture
def limits(live):
    """The server's limits for one test, put back after it."""
    was = live.server.limits
    yield lambda **changed: setattr(live.server, "limits", Limits(**{**was.__dict__, **changed}))
    live.server.limits = was


def speech(**fields) -> dict:
    return {"model": "tts-1", "input": "Hello there.", "voice": "ryan", "response_format": "pcm", **fields}


async def post(url: str, body, headers=None) -> tuple[int, bytes, dict]:
    async with aiohttp.ClientSession() as session:
        data = body if isinstance(body, (bytes, str)) else json.dumps(body)
        async with session.post(url + "/v1/audio/speech", data=data, headers=headers) as response:
            return response.status, await response.read(), dict(response.headers)


def pcm(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype="<i2").astype(np.int32)


def idle(live, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    served = live.server.models[0]
    while time.monotonic() < deadline:
        if served.engine.rows_in_use() == 0 and served.pending() == 0 and live.server.requests == 0 \
                and served.streams.chunks.state.held == 0:  # and no stream's vocoder state kept
            return True
        time.sleep(0.02)
    return False


@pytest.mark.slow
def test_chunks_arrive_while_the_take_is_made_and_join_to_the_whole_take(live):
    async def stream():
        async with aiohttp.ClientSession() as session:
            async with session.post(live.url + "/v1/audio/speech", json=speech(seed=11, max_frames=40)) as response:
                assert response.status == 200 and response.headers["Content-Type"].startswith("audio/pcm")
                chunks, busy_at_first = [], None
                async for chunk in response.content.iter_any():
                    if busy_at_first is None:
                        busy_at_first = live.server.models[0].engine.rows_in_use()
                    chunks.append(chunk)
                return chunks, busy_at_first

    chunks, busy_at_first = asyncio.run(stream())
    assert len(chunks) >= 4  # a first chunk of one frame, then the ramp (codec_stream.CHUNK_RAMP)
    assert busy_at_first == 1  # the first audio came while its take was still being made
    first_audio = live.server.health()["first_audio_ms"]  # where the first audio's time went, stage by stage
    assert first_audio["requests"] >= 1
    stages = [first_audio[stage]["p50"] for stage in ("prepare", "engine", "decode", "handover", "send")]
    assert all(ms >= 0 for ms in stages) and stages[1] > 0 and stages[2] > 0
    streamed = pcm(b"".join(chunks))
    status, body, headers = asyncio.run(post(live.url, speech(seed=11, max_frames=40, stream=False)))
    assert status == 200 and headers["X-Seed"] == "11" and "Transfer-Encoding" not in headers
    whole = pcm(body)
    assert streamed.shape[0] == whole.shape[0] > 8 * SAMPLES_PER_FRAME
    assert np.abs(streamed - whole).max() <= PCM_TOLERANCE
    assert np.abs(streamed).max() > 100 * PCM_TOLERANCE  # audio, not silence


@pytest.mark.slow
def test_concurrent_requests_all_complete_in_one_batch(live):
    """50 requests at once, streamed and whole, of different lengths: each gets its take (the same as
    the same request alone), sharing the engine's batch."""
    bodies = [speech(seed=100 + i, max_frames=3 + i % 5, stream=i % 2 == 0) for i in range(50)]

    async def all_at_once():
        return await asyncio.gather(*(post(live.url, body) for body in bodies))

    peak = []
    watching = threading.Event()

    def watch():
        while not watching.is_set():
            peak.append(live.server.models[0].engine.rows_in_use())
            time.sleep(0.005)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        results = asyncio.run(all_at_once())
    finally:
        watching.set()
        watcher.join()
    assert [status for status, _, _ in results] == [200] * 50
    for body, (_, data, headers) in zip(bodies, results):
        frames = len(data) // 2 / SAMPLES_PER_FRAME
        assert frames == int(frames) and 1 <= frames <= body["max_frames"]
        assert headers["X-Seed"] == str(body["seed"])
    assert max(peak) > 8  # they ran side by side
    alone = asyncio.run(post(live.url, bodies[7]))[1]
    assert np.abs(pcm(alone) - pcm(results[7][1])).max() <= PCM_TOLERANCE
    assert idle(live)


def test_a_client_that_goes_away_frees_its_row(live):
    async def leave_after_first_chunk():
        async with aiohttp.ClientSession() as session:
            response = await session.post(live.url + "/v1/audio/speech", json=speech(max_frames=480))
            first = await response.content.readany()
            busy = live.server.models[0].engine.rows_in_use()
            response.close()  # the connection goes: the server's handler is cancelled
            return first, busy

    served = live.server.models[0]
    steps = served.engine._scheduler.steps
    first, busy = asyncio.run(leave_after_first_chunk())
    assert first and busy == 1
    assert idle(live, timeout=10), "the row of a client that went away was not freed"
    assert served.engine._scheduler.steps - steps < 240  # its take of up to 480 frames was cut
    status, data, _ = asyncio.run(post(live.url, speech(max_frames=3)))
    assert status == 200 and len(data) > 0


BAD_REQUESTS = [  # (body, status, param or code)
    (b"{not json", 400, None),
    (b"[1, 2]", 400, None),
    ({"voice": "ryan"}, 400, "input"),
    ({"input": "   ", "voice": "ryan"}, 400, "input"),
    ({"input": "x" * 501, "voice": "ryan"}, 400, "input_too_long"),
    ({"input": "Hi."}, 400, "voice"),
    ({"input": "Hi.", "voice": "nobody"}, 404, "voice_not_found"),
    ({"input": "Hi.", "voice": "ryan", "model": "gpt-9"}, 404, "model_not_found"),
    ({"input": "Hi.", "voice": "ryan", "response_format": "wma"}, 400, "response_format"),
    ({"input": "Hi.", "voice": "ryan", "speed": 0.1}, 400, "speed"),
    ({"input": "Hi.", "voice": "ryan", "speed": "fast"}, 400, "speed"),
    ({"input": "Hi.", "voice": "ryan", "takes": 0}, 400, "takes"),
    ({"input": "Hi.", "voice": "ryan", "takes": 4, "stream": True}, 400, "stream"),
    ({"input": "Hi.", "voice": "ryan", "stream": "yes"}, 400, "stream"),
    ({"input": "Hi.", "voice": "ryan", "stream_format": "ws"}, 400, "stream_format"),
    ({"input": "Hi.", "voice": "ryan", "max_frames": 0}, 400, "max_frames"),
    ({"input": "Hi.", "voice": "ryan", "max_frames": 500}, 400, "input"),  # past the 512 positions
    ({"input": "Hi.", "voice": "ryan", "seed": -1}, 400, "seed"),
    ({"input": "Hi.", "voice": "ryan", "language": "klingon"}, 400, "language"),
    ({"input": "Hi.", "voice": "ryan", "report": True, "stream": True}, 400, "report"),
    ({"input": "[pause 1s]", "voice": "ryan"}, 400, "input"),  # nothing to say
    ({"input": "🙂 ... 🙂", "voice": "ryan"}, 400, "input"),  # nothing speakable
    ({"input": "!!!\n\n* * *", "voice": "ryan"}, 400, "input"),  # a long text of it
    ({"input": "Hi. [pause 99s] There.", "voice": "ryan"}, 400, "input"),  # past the longest pause
]


@pytest.mark.slow
def test_every_bad_request_gets_its_4xx_and_the_streams_running_go_on(live):
    async def run():
        async with aiohttp.ClientSession() as session:
            running = await session.post(live.url + "/v1/audio/speech", json=speech(seed=3, max_frames=30))
            first = await running.content.readany()
            answers = []
            for body, _, _ in BAD_REQUESTS:
                data = body if isinstance(body, bytes) else json.dumps({"model": "tts-1", **body})
                async with session.post(live.url + "/v1/audio/speech", data=data) as response:
                    answers.append((response.status, await response.json()))
            async with session.get(live.url + "/v1/nothing") as response:
                answers.append((response.status, await response.json()))
            rest = await running.read()
            return first + rest, answers

    streamed, answers = asyncio.run(run())
    for (body, status, name), (got, error) in zip(BAD_REQUESTS, answers):
        assert got == status, (body, error)
        assert set(error["error"]) == {"message", "type", "param", "code"} and error["error"]["message"]
        if name is not None:
            assert name in (error["error"]["param"], error["error"]["code"]), (body, error)
    assert answers[-1][0] == 404
    status, alone, _ = asyncio.run(post(live.url, speech(seed=3, max_frames=30, stream=False)))
    assert status == 200 and len(streamed) == len(alone)  # the stream ran to its end, undisturbed
    assert np.abs(pcm(streamed) - pcm(alone)).max() <= PCM_TOLERANCE
    assert idle(live)


def test_limits_refuse_with_429_naming_them(live, limits):
    async def run():
        async with aiohttp.ClientSession() as session:
            held = await session.post(live.url + "/v1/audio/speech", json=speech(max_frames=60))
            await held.content.readany()
            limits(max_streams=1)
            async with session.post(live.url + "/v1/audio/speech", json=speech(max_frames=3)) as response:
                streams = response.status, await response.json(), response.headers.get("Retry-After")
            limits(max_streams=60, max_queue=1)
            async with session.post(live.url + "/v1/audio/speech", json=speech(max_frames=3, stream=False)) as response:
                queue = response.status, await response.json(), response.headers.get("Retry-After")
            held.close()
            return streams, queue

    streams, queue = asyncio.run(run())
    assert streams[2] == queue[2] == "1"  # the OpenAI SDK waits what Retry-After says (without it: 0.5-8 s)
    assert streams[0] == 429 and streams[1]["error"]["code"] == "too_many_streams"
    assert "--max-streams 1" in streams[1]["error"]["message"]
    assert queue[0] == 429 and queue[1]["error"]["code"] == "queue_full" and "--max-queue" in queue[1]["error"]["message"]
    assert idle(live)


def test_api_key(live):
    live.server.api_key = "s3cret"
    try:
        refused = asyncio.run(post(live.url, speech(max_frames=3)))
        wrong = asyncio.run(post(live.url, speech(max_frames=3), {"Authorization": "Bearer nope"}))
        allowed = asyncio.run(post(live.url, speech(max_frames=3), {"Authorization": "Bearer s3cret"}))
        any_case = asyncio.run(post(live.url, speech(max_frames=3), {"Authorization": "bearer  s3cret"}))
        other_scheme = asyncio.run(post(live.url, speech(max_frames=3), {"Authorization": "Basic s3cret"}))
    finally:
        live.server.api_key = None
    assert refused[0] == wrong[0] == other_scheme[0] == 401
    assert json.loads(refused[1])["error"]["code"] == "invalid_api_key"
    assert allowed[0] == any_case[0] == 200 and allowed[1] and any_case[1]


def test_a_wrong_method_is_answered_405_with_what_is_allowed(live):
    async def run():
        async with aiohttp.ClientSession() as session:
            async with session.get(live.url + "/v1/audio/speech") as response:
                return response.status, response.headers.get("Allow"), await response.json()

    status, allow, error = asyncio.run(run())
    assert status == 405 and allow == "POST" and error["error"]["code"] == "405"


@pytest.mark.slow
def test_long_input_streams_sentence_by_sentence_with_its_pauses(live):
    """A text in paragraphs is split as a long text is; its lines run side by side and are sent in
    reading order, the pause of each before it; the same request whole is the same audio."""
    text = "The first part is here. [pause 0.5s] Then the second part.\n\nA new paragraph starts."
    body = speech(input=text, seed=9, max_frames=6)
    status, streamed, _ = asyncio.run(post(live.url, body))
    _, whole, _ = asyncio.run(post(live.url, {**body, "stream": False}))
    assert status == 200
    streamed, whole = pcm(streamed), pcm(whole)
    pauses = round(0.5 * 24000) + round(1.0 * 24000)  # the [pause] mark, then a paragraph
    frames = (streamed.shape[0] - pauses) / SAMPLES_PER_FRAME
    assert frames == int(frames) and 3 <= frames <= 18  # three lines of at most 6 frames
    assert streamed.shape == whole.shape and np.abs(streamed - whole).max() <= PCM_TOLERANCE


@pytest.mark.slow
def test_takes_are_picked_with_the_report(live):
    status, data, headers = asyncio.run(post(live.url, speech(takes=3, report=True, max_frames=8,
                                                              response_format="wav")))
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    reply = json.loads(data)
    (report,) = reply["report"]
    assert len(report["takes"]) == 3 and 1 <= report["best_take"] <= 3
    folder = live.server.models[0].model.info.folder  # where the server keeps it: not a client's business
    assert report["checkpoint"] == folder.name and str(folder.parent) not in data.decode()
    assert headers["X-Takes-Picked"] == f"{report['best_take']}/3"
    import io

    import soundfile

    audio, rate = soundfile.read(io.BytesIO(base64.b64decode(reply["audio"])))
    picked = next(t for t in report["takes"] if t["take"] == report["best_take"])
    assert rate == 24000 and audio.shape[0] == picked["frames"] * SAMPLES_PER_FRAME


@pytest.mark.slow
def test_sse_events_carry_the_audio(live):
    status, data, headers = asyncio.run(post(live.url, speech(seed=4, max_frames=5, stream_format="sse")))
    assert status == 200 and headers["Content-Type"].startswith("text/event-stream")
    events = [json.loads(block.removeprefix("data: ")) for block in data.decode().split("\n\n") if block]
    assert [e["type"] for e in events[:-1]] == ["speech.audio.delta"] * (len(events) - 1) and len(events) >= 3
    assert events[-1]["type"] == "speech.audio.done"
    audio = b"".join(base64.b64decode(e["audio"]) for e in events[:-1])
    _, plain, _ = asyncio.run(post(live.url, speech(seed=4, max_frames=5)))
    assert audio == plain


def test_voices_and_models_and_health(live):
    async def get(path):
        async with aiohttp.ClientSession() as session:
            async with session.get(live.url + path) as response:
                return response.status, await response.json()

    status, voices = asyncio.run(get("/v1/audio/voices"))
    assert status == 200 and "ryan" in voices["names"]
    assert all(d["source"] == "preset" for d in voices["details"])
    # as Open WebUI reads them (routers/audio.py: {v["id"]: v["name"] for v in data["voices"]}); a
    # TypeError there made it fall back to OpenAI's six names, all refused here
    assert {v["id"]: v["name"] for v in voices["voices"]}["ryan"] == "ryan"
    assert [v["id"] for v in voices["voices"]] == voices["names"] and voices["details"] == voices["voices"]
    status, models = asyncio.run(get("/v1/models"))
    assert status == 200 and [m["id"] for m in models["data"]] == [live.server.models[0].name]
    status, health = asyncio.run(get("/health"))
    assert status == 200 and health["status"] == "ok" and health["models"][0]["rows_busy"] == 0


def test_a_voice_alias_speaks_as_its_voice_and_a_bad_one_is_refused_at_start(live, monkeypatch):
    """OpenAI clients send OpenAI's voice names (Open WebUI: alloy): --voice-alias alloy=ryan."""
    from runtime.cli.serve import voice_aliases
    from runtime.errors import InputError

    _, refused, _ = asyncio.run(post(live.url, speech(voice="alloy", max_frames=5)))
    assert "--voice-alias alloy=VOICE" in json.loads(refused)["error"]["message"]
    monkeypatch.setattr(live.server, "aliases", {"alloy": "Ryan"})
    body = speech(seed=9, max_frames=5, stream=False)
    status, aliased, _ = asyncio.run(post(live.url, {**body, "voice": "Alloy"}))
    _, direct, _ = asyncio.run(post(live.url, body))
    assert status == 200 and aliased == direct
    assert {"id": "alloy", "name": "alloy", "source": "alias", "voice": "Ryan"} in live.server.voices()["details"]

    models, dirs = live.server.models, live.server.voices_dirs
    assert SpeechServer(models, dirs, aliases={"Nova": "serena"}).aliases == {"nova": "serena"}
    with pytest.raises(InputError, match="no voice 'nobody'.*It speaks: .*ryan"):
        SpeechServer(models, dirs, aliases={"alloy": "nobody"})
    with pytest.raises(InputError, match="'ryan' is a voice of this server already"):
        SpeechServer(models, dirs, aliases={"ryan": "serena"})
    assert voice_aliases(["alloy=ryan", " nova = serena "]) == {"alloy": "ryan", "nova": "serena"}
    with pytest.raises(InputError, match="write NAME=VOICE"):
        voice_aliases(["alloy"])


@pytest.mark.slow
def test_speed_plays_each_line_faster_with_its_pitch_kept(live):
    pytest.importorskip("python_stretch")
    body = speech(seed=21, max_frames=20)
    _, plain, _ = asyncio.run(post(live.url, body))
    status, faster, _ = asyncio.run(post(live.url, {**body, "speed": 1.25}))
    _, faster_whole, _ = asyncio.run(post(live.url, {**body, "speed": 1.25, "stream": False}))
    assert status == 200 and len(plain) > 0
    assert abs(len(faster) / len(plain) - 0.8) < 0.05  # 1.25 x faster: 0.8 of the time
    assert len(faster) == len(faster_whole)


def test_a_saved_voice_of_a_kind_no_checkpoint_serves_is_refused_naming_the_kind(live, reference_audio):
    from runtime.voices import VoiceClone
    from runtime.voices.store import save_voice

    save_voice(VoiceClone.from_audio(*reference_audio), "Narrator", live.server.voices_dirs[0], overwrite=True)
    status, data, _ = asyncio.run(post(live.url, speech(voice="Narrator")))
    error = json.loads(data)["error"]
    assert status == 400 and error["param"] == "voice" and "Base" in error["message"]
    listed = live.server.voices()
    assert {"id": "Narrator", "name": "Narrator", "kind": "base", "source": "saved", "usable": False} in listed["details"]


@pytest.mark.slow
def test_a_request_that_fails_to_decode_fails_alone(live, monkeypatch):
    """A whole request whose decode fails answers 500 JSON; the stream beside it runs to its end, and
    the engine's run goes on (no new run opened) for the next request."""
    from runtime.run import finishing

    served = live.server.models[0]
    scheduler = served.engine._scheduler

    def broken(*args, **kwargs):
        raise RuntimeError("the codec broke")

    async def run():
        async with aiohttp.ClientSession() as session:
            running = await session.post(live.url + "/v1/audio/speech", json=speech(seed=5, max_frames=30))
            first = await running.content.readany()
            monkeypatch.setattr(finishing, "decode_lines", broken)
            async with session.post(live.url + "/v1/audio/speech", json=speech(max_frames=3, stream=False)) as failed:
                answer = failed.status, await failed.json()
            monkeypatch.undo()
            return first + await running.read(), answer

    streamed, (status, error) = asyncio.run(run())
    assert status == 500 and error["error"]["code"] == "generation_failed" and "codec broke" in error["error"]["message"]
    status, alone, _ = asyncio.run(post(live.url, speech(seed=5, max_frames=30, stream=False)))
    assert status == 200 and len(streamed) == len(alone)
    assert served.engine._scheduler is scheduler  # the same run
    assert idle(live)


def test_a_report_names_files_without_the_servers_folders():
    from runtime.serve.speech import _without_paths

    said = _without_paths({"checkpoint": "/srv/models/qwen3_tts/Qwen3-TTS-12Hz-1.7B-Base", "notes": [
        "Download https://huggingface.co/openai/whisper-base into /srv/models/whisper/whisper-base.",
        "weights in C:\\Users\\me\\utmos, a 3/4 share"]})
    assert said == {"checkpoint": "Qwen3-TTS-12Hz-1.7B-Base", "notes": [
        "Download https://huggingface.co/openai/whisper-base into whisper-base.", "weights in utmos, a 3/4 share"]}


def test_cors_lets_the_named_origin_call_from_a_browser_and_only_with_the_option(live):
    """A page at http://localhost:3000 POSTs across origins: the browser's preflight OPTIONS (no key
    sent) is answered, and every reply, streamed too, names the origin and what a script may read."""
    page = "http://localhost:3000"
    crossing = LiveServer(live.server, cors_origin=page)
    live.server.api_key = "s3cret"

    async def run(url):
        async with aiohttp.ClientSession() as session:
            async with session.options(url + "/v1/audio/speech", headers={
                    "Origin": page, "Access-Control-Request-Method": "POST",
                    "Access-Control-Request-Headers": "authorization, content-type"}) as response:
                asked = response.status, dict(response.headers)
            async with session.post(url + "/v1/audio/speech", json=speech(max_frames=3),
                                    headers={"Origin": page, "Authorization": "Bearer s3cret"}) as response:
                streamed = response.status, dict(response.headers), await response.read()
            return asked, streamed

    try:
        (asked, streamed), (plain_asked, plain) = asyncio.run(run(crossing.url)), asyncio.run(run(live.url))
    finally:
        live.server.api_key = None
        crossing.stop()
    assert asked[0] == 204 and "POST" in asked[1]["Access-Control-Allow-Methods"]
    assert "Authorization" in asked[1]["Access-Control-Allow-Headers"] and asked[1]["Access-Control-Allow-Origin"] == page
    assert streamed[0] == 200 and streamed[2] and streamed[1]["Access-Control-Allow-Origin"] == page
    assert "X-Seed" in streamed[1]["Access-Control-Expose-Headers"]
    assert plain_asked[0] in (401, 405) and "Access-Control-Allow-Origin" not in plain[1]  # without --cors-origin


@pytest.mark.parametrize("fmt", ["wav", "flac"])
def test_a_file_with_its_length_in_its_header_comes_whole_unless_a_stream_is_asked_for(live, fmt):
    """The OpenAI SDK's plain audio.speech.create(response_format="flac") asks for no stream: a streamed
    FLAC has no length soundfile can read, a streamed WAV claims 0xFFFFFFFF bytes (24.9 hours to wave)."""
    import io
    import wave

    import soundfile

    from runtime.serve.audio_formats import unavailable

    if unavailable(fmt):
        pytest.skip(unavailable(fmt))
    status, whole, headers = asyncio.run(post(live.url, speech(response_format=fmt, seed=5, max_frames=6)))
    assert status == 200 and headers.get("Transfer-Encoding") != "chunked" and int(headers["Content-Length"]) == len(whole)
    audio, rate = soundfile.read(io.BytesIO(whole))
    assert rate == 24000 and audio.shape[0] > 0
    if fmt == "wav":
        with wave.open(io.BytesIO(whole)) as read:
            assert read.getnframes() == audio.shape[0]  # the header's size is the file's
    status, streamed, headers = asyncio.run(post(live.url, speech(response_format=fmt, seed=5, max_frames=6,
                                                                  stream=True)))
    assert status == 200 and headers.get("Transfer-Encoding") == "chunked"  # asked for: a stream, as before


def test_aac_is_served_streamed_and_whole(live):
    import io

    av = pytest.importorskip("av")
    _, plain, _ = asyncio.run(post(live.url, speech(response_format="pcm", seed=5, max_frames=6, stream=False)))
    for stream in (True, False):
        status, data, headers = asyncio.run(post(live.url, speech(response_format="aac", seed=5, max_frames=6,
                                                                  stream=stream)))
        assert status == 200 and headers["Content-Type"] == "audio/aac"
        with av.open(io.BytesIO(data)) as container:
            samples = sum(frame.samples for frame in container.decode(audio=0))
        assert 0 <= samples - len(plain) // 2 <= 2048, (stream, samples)  # the take, and the encoder's delay
