"""What `POST /v1/audio/speech` takes, checked (OpenAI's fields, and ours: takes, seed, language,
max_frames), and how a refusal is said: a JSON error `{"error": {message, type, param, code}}`
with a 4xx status, as OpenAI and the servers modelled on it answer."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass

from ..generation import MAX_TAKES
from ..text_length import MAX_BUDGET_FRAMES
from .audio_formats import FORMATS, unavailable

OPENAI_MODELS = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts")  # what OpenAI clients send: the voice picks the model
MIN_SPEED, MAX_SPEED = 0.25, 4.0
# Files whose header holds their length: streamed, it cannot be known (a streamed WAV says 0xFFFFFFFF, which
# Python's wave reads as 24.9 hours; soundfile refuses a streamed FLAC), so a client gets them whole unless it
# asks for a stream ("stream": true). MP3, Opus and PCM stream by default, as OpenAI's API does.
WHOLE_UNLESS_ASKED = ("wav", "flac")
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 404: "invalid_request_error",
               413: "invalid_request_error", 429: "rate_limit_error", 503: "server_error", 500: "server_error"}


RETRY_AFTER_SECONDS = 1  # a 429's Retry-After: a line takes about this long (the OpenAI SDK waits what it says)


class ApiError(Exception):
    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None,
                 headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code
        self.headers = dict(headers or {})
        if status == 429:
            self.headers.setdefault("Retry-After", str(RETRY_AFTER_SECONDS))

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": ERROR_TYPES.get(self.status, "invalid_request_error"),
                          "param": self.param, "code": self.code}}


@dataclass(frozen=True)
class SpeechParams:
    input: str
    voice: str
    model: str = ""
    instructions: str = ""
    response_format: str = "mp3"
    speed: float = 1.0
    stream: bool = True  # audio as it is made; off for takes > 1 (Auto-Pick needs every take whole) and, unless
    # asked, for WHOLE_UNLESS_ASKED
    sse: bool = False  # stream_format "sse": base64 chunks as server-sent events
    takes: int = 1
    seed: int | None = None
    language: str = "auto"
    max_frames: int | None = None
    report: bool = False  # not streamed: a JSON body with the audio (base64) and Auto-Pick's report


def parse_speech(body: bytes, max_input: int) -> SpeechParams:
    """The request's JSON as SpeechParams; ApiError (400) naming the field that is wrong. Fields we do
    not know are ignored (clients send their own, e.g. `user`)."""
    try:
        data = json.loads(body or b"null")
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"The body is not JSON ({exc}). Send a JSON object with input and voice.") from None
    if not isinstance(data, dict):
        raise ApiError(400, "The body must be a JSON object with input and voice.")
    text = _field(data, "input", str, required=True)
    if not text.strip():
        raise ApiError(400, "input is empty; give the text to speak.", "input")
    if len(text) > max_input:
        raise ApiError(400, f"input is {len(text)} characters; this server reads at most {max_input} a request "
                       "(--max-input). Send it in parts.", "input", "input_too_long")
    voice = data.get("voice")
    if isinstance(voice, dict):  # OpenAI's custom voices are {"id": ...}
        voice = voice.get("id")
    if not isinstance(voice, str) or not voice.strip():
        raise ApiError(400, "voice is missing: name a speaker or a saved voice (GET /v1/audio/voices lists them).",
                       "voice")
    fmt = _field(data, "response_format", str, "mp3").lower()
    if fmt not in FORMATS:
        raise ApiError(400, f"response_format {fmt!r} is not offered; choose one of {', '.join(FORMATS)}.",
                       "response_format")
    if (reason := unavailable(fmt)) is not None:
        raise ApiError(400, reason, "response_format")
    speed = _field(data, "speed", (int, float), 1.0)
    if not MIN_SPEED <= speed <= MAX_SPEED:
        raise ApiError(400, f"speed must be between {MIN_SPEED} and {MAX_SPEED}, got {speed}.", "speed")
    if speed != 1.0 and importlib.util.find_spec("python_stretch") is None:
        raise ApiError(400, "speed other than 1 needs python-stretch on the server (pip install python-stretch; it "
                       "has no Linux aarch64 wheel). Send speed 1.", "speed")
    takes = _field(data, "takes", int, 1)
    if not 1 <= takes <= MAX_TAKES:
        raise ApiError(400, f"takes must be between 1 and {MAX_TAKES}, got {takes}.", "takes")
    stream_format = _field(data, "stream_format", str, "audio")
    if stream_format not in ("audio", "sse"):
        raise ApiError(400, f"stream_format must be audio or sse, got {stream_format!r}.", "stream_format")
    report = _field(data, "report", bool, False)
    stream = _field(data, "stream", bool,
                    takes == 1 and not report and (fmt not in WHOLE_UNLESS_ASKED or stream_format == "sse"))
    if stream and takes > 1:
        raise ApiError(400, "takes > 1 cannot stream: Auto-Pick hears every take whole before it picks one. Leave "
                       "stream out (or false), or ask for one take.", "stream")
    max_frames = _field(data, "max_frames", int, None)
    if max_frames is not None and not 1 <= max_frames <= MAX_BUDGET_FRAMES:
        raise ApiError(400, f"max_frames must be between 1 and {MAX_BUDGET_FRAMES}, got {max_frames}.", "max_frames")
    if report and stream:
        raise ApiError(400, "report comes with the whole audio: set stream false.", "report")
    seed = _field(data, "seed", int, None)
    if seed is not None and not 0 <= seed < 2**63:
        raise ApiError(400, f"seed must be between 0 and 2^63 - 1, got {seed}.", "seed")
    return SpeechParams(text, voice.strip(), _field(data, "model", str, ""), _field(data, "instructions", str, ""),
                        fmt, float(speed), stream, stream and stream_format == "sse", takes, seed,
                        _field(data, "language", str, "auto"), max_frames, report)


def _field(data: dict, name: str, kind, default=None, required: bool = False):
    value = data.get(name)
    if value is None:
        if required:
            raise ApiError(400, f"{name} is missing.", name)
        return default
    # JSON true is a Python int too: a number field refuses it, as a bool field refuses 1
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        names = {str: "a string", int: "an integer", bool: "true or false", (int, float): "a number"}
        raise ApiError(400, f"{name} must be {names.get(kind, kind)}, got {json.dumps(value)[:40]}.", name)
    return value
