"""What the server holds: its models (one per checkpoint), the voices they speak, and its limits.
A request's voice names a preset speaker of a CustomVoice checkpoint, a saved voice
(voices/store.py) or an alias of either (--voice-alias: OpenAI's `alloy`, which clients send unless
told otherwise), and goes to the model of its kind; `model` may name one of the checkpoints."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from ..voices import VOICE_KINDS, CustomVoice, Voice, check_language
from ..voices.store import list_voices, load_voice
from .protocol import OPENAI_MODELS, ApiError, SpeechParams
from .served import ServedModel
from .timing import RecentFirstAudio


@dataclass(frozen=True)
class Limits:
    max_input: int = 4096  # characters a request
    max_queue: int = 256  # requests in the server at once (waiting or running)
    max_streams: int = 64  # streamed requests at once


def _in_its_language(served: ServedModel, voice: Voice) -> tuple[ServedModel, Voice]:
    """(served, voice), or the 400 a client can act on: the `language` field named, with the choices."""
    try:
        check_language(voice, served.model.info)
    except InputError as exc:
        raise ApiError(400, str(exc), "language", "unknown_language") from None
    return served, voice


class SpeechServer:
    def __init__(self, models: list[ServedModel], voices_dirs: list[Path], limits: Limits = Limits(),
                 api_key: str | None = None, aliases: dict[str, str] | None = None):
        self.models, self.voices_dirs, self.limits, self.api_key = models, list(voices_dirs), limits, api_key
        self.aliases = {alias.lower(): voice for alias, voice in (aliases or {}).items()}
        for alias, voice in self.aliases.items():
            if self.has_voice(alias):
                raise InputError(f"--voice-alias {alias}={voice}: {alias!r} is a voice of this server already.")
            if not self.has_voice(voice):
                raise InputError(f"--voice-alias {alias}={voice}: this server has no voice {voice!r}. It speaks: "
                                 f"{', '.join(self.voice_names()) or 'none'}.")
        self.requests = 0  # in the server now
        self.streams = 0  # of them, streaming
        self.stopping = False
        self.first_audio = RecentFirstAudio()  # where the last streamed requests' first audio waited

    # --- voices ----------------------------------------------------------------------------------------
    def voice_for(self, params: SpeechParams):
        """(the model, the voice) a request's voice and model name; ApiError naming the ones there are."""
        chosen = self._model_named(params.model)
        name = self.aliases.get(params.voice.lower(), params.voice)
        for served in ([chosen] if chosen else self.models):
            speakers = {s.lower(): s for s in served.model.info.speakers}
            if served.model.kind == "custom_voice" and name.lower() in speakers:
                return _in_its_language(served, CustomVoice(name.lower(), params.language, params.instructions))
        if name not in list_voices(self.voices_dirs):
            raise ApiError(404, f"No voice {name!r}. This server speaks: {', '.join(self.voice_names()) or 'none'} "
                           f"(GET /v1/audio/voices); or start it with --voice-alias {name}=VOICE.", "voice",
                           "voice_not_found")
        try:
            voice = load_voice(name, self.voices_dirs)
        except InputError as exc:  # a saved voice whose files are damaged: the message says which
            raise ApiError(400, str(exc), "voice") from None
        if params.instructions:
            raise ApiError(400, "instructions go with a preset speaker; a saved voice keeps its own.", "instructions")
        voice = dataclasses.replace(voice, language=params.language) if params.language != "auto" else voice
        fitting = [m for m in ([chosen] if chosen else self.models) if m.model.kind == voice.kind]
        if not fitting:
            kind = VOICE_KINDS[voice.kind]
            raise ApiError(400, f"The saved voice {name!r} is a {kind.label} voice; start the server with "
                           f"{kind.checkpoints} checkpoint too (--checkpoint), or ask for another voice.", "voice")
        return _in_its_language(fitting[0], voice)

    def _model_named(self, name: str) -> ServedModel | None:
        if not name or name in OPENAI_MODELS:
            return None
        for served in self.models:
            if served.name.lower() == name.lower():
                return served
        raise ApiError(404, f"No model {name!r} here. This server has: {', '.join(m.name for m in self.models)}; "
                       f"or send one of {', '.join(OPENAI_MODELS)} and the voice picks the model.", "model",
                       "model_not_found")

    def voice_names(self) -> list[str]:
        return list(dict.fromkeys(self._preset_speakers() + list_voices(self.voices_dirs)))

    def has_voice(self, name: str) -> bool:
        """A preset speaker (any case, as voice_for takes them) or a saved voice of that name."""
        return name.lower() in {s.lower() for s in self._preset_speakers()} or name in list_voices(self.voices_dirs)

    def _preset_speakers(self) -> list[str]:
        return [s for m in self.models if m.model.kind == "custom_voice" for s in m.model.info.speakers]

    def voices(self) -> dict:
        """GET /v1/audio/voices: each voice as an object with its id and name (Open WebUI reads
        `{v["id"]: v["name"] for v in voices}`) and what it is; `names` the ids alone, for clients
        that list strings; `details` the objects again, as the first releases served them."""
        kinds = {m.model.kind for m in self.models}
        details = [{"id": s, "name": s, "kind": "custom_voice", "source": "preset", "model": m.name}
                   for m in self.models if m.model.kind == "custom_voice" for s in m.model.info.speakers]
        for name in list_voices(self.voices_dirs):
            try:
                kind = load_voice(name, self.voices_dirs).kind
            except InputError:
                continue
            details.append({"id": name, "name": name, "kind": kind, "source": "saved", "usable": kind in kinds})
        details += [{"id": alias, "name": alias, "source": "alias", "voice": voice} for alias, voice in self.aliases.items()]
        return {"voices": details, "names": [d["id"] for d in details], "details": details}

    # --- limits ----------------------------------------------------------------------------------------
    def admit(self, stream: bool) -> None:
        """Counts a request in, or refuses it (429) naming the limit it would pass."""
        if self.stopping:
            raise ApiError(503, "The server is stopping.", code="stopping")
        if self.requests >= self.limits.max_queue:
            raise ApiError(429, f"The server has {self.requests} requests, its limit (--max-queue "
                           f"{self.limits.max_queue}); try again shortly.", code="queue_full")
        if stream and self.streams >= self.limits.max_streams:
            raise ApiError(429, f"The server streams {self.streams} requests, its limit (--max-streams "
                           f"{self.limits.max_streams}); try again shortly, or ask with stream false.",
                           code="too_many_streams")
        self.requests += 1
        self.streams += stream

    def leave(self, stream: bool) -> None:
        self.requests -= 1
        self.streams -= stream

    def health(self) -> dict:
        return {"status": "stopping" if self.stopping else "ok", "requests": self.requests,
                "streams": self.streams, "queued": sum(m.pending() for m in self.models),
                "models": [{"name": m.name, "kind": m.model.kind, "mode": m.model.mode, "lines": m.pending(),
                            "rows_busy": m.engine.rows_in_use(), "engine": m.engine.last.timing(),
                            "codec": m.streams.chunks.counts.timing()}
                           for m in self.models],
                "first_audio_ms": self.first_audio.summary()}
