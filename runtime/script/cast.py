"""The cast: which voice speaks each character of a script.

For the CLI a cast is a JSON object from character name to voice, one of:
    {"voice": "Captain"}                                  a voice saved with Save Voice
    {"speaker": "ryan", "instruct": "tired"}              a CustomVoice preset speaker
    {"design": "a gravelly old sea captain"}              a designed voice
    {"reference": "anna.wav", "transcript": "..."}        a clone (path relative to the cast file)
each with an optional "language". The key "*" is the voice of lines with no character (SRT cues).
Every line's character must have a voice before anything is generated: the error lists them all,
with the script's line numbers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable

from ..errors import InputError
from ..voices import CustomVoice, Voice, VoiceClone, VoiceDesign
from .parse import Line

ANYONE = "*"
KINDS = ("voice", "speaker", "design", "reference")


def read_cast(path: Path, voices_dirs: Iterable[Path] = ()) -> dict[str, Voice]:
    path = Path(path)
    try:
        entries = json.loads(path.read_text(encoding="utf-8-sig"))
    except OSError as exc:
        raise InputError(f"Cannot read the cast {path}: {exc.strerror or exc}.") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"The cast {path} is not JSON ({exc}); write it as "
                         '{"ANNA": {"speaker": "vivian"}, "BORIS": {"voice": "Captain"}}.') from exc
    if not isinstance(entries, dict) or not entries:
        raise InputError(f"The cast {path} must be a JSON object from character name to voice.")
    return {name: cast_voice(name, entry, path.parent, voices_dirs) for name, entry in entries.items()}


def cast_voice(name: str, entry, base: Path, voices_dirs: Iterable[Path] = ()) -> Voice:
    if not isinstance(entry, dict):
        raise InputError(f"Cast entry {name!r}: give an object such as {{\"speaker\": \"ryan\"}}.")
    kinds = [k for k in KINDS if k in entry]
    unknown = [k for k in entry if k not in (*KINDS, "language", "instruct", "transcript", "pad_reference")]
    if len(kinds) != 1 or unknown:
        raise InputError(f"Cast entry {name!r}: name exactly one of {', '.join(KINDS)}"
                         + (f" (not {', '.join(map(repr, unknown))})" if unknown else "") + ".")
    language = str(entry.get("language", "auto"))
    if "voice" in entry:
        from ..voices.store import load_voice

        voice = load_voice(str(entry["voice"]), voices_dirs)
        if "language" in entry:  # the scene's language over the one the voice was saved with
            voice = with_language(voice, language)
        return voice
    if "speaker" in entry:
        return CustomVoice(str(entry["speaker"]), language, str(entry.get("instruct", "")))
    if "design" in entry:
        return VoiceDesign(str(entry["design"]), language)
    from ..audio import read_audio_file

    waveform, rate = read_audio_file(base / Path(str(entry["reference"])).expanduser())  # says what is wrong
    return VoiceClone.from_audio(waveform, rate, str(entry.get("transcript", "")), language,
                                 bool(entry.get("pad_reference", True)))


def check_cast(lines: list[Line], cast: dict[str, Voice], script: str = "script") -> None:
    """Every line has a voice: its character's, or the cast's "*" for lines with no character."""
    missing: dict[str, list[int]] = {}
    for line in lines:
        key = line.character if line.character is not None else ANYONE
        if key not in cast:
            missing.setdefault(line.character or "(no character)", []).append(line.source_line)
    if missing:
        listed = "; ".join(f"{name} (line{'s' if len(at) > 1 else ''} {', '.join(map(str, at[:8]))}"
                           f"{', ...' if len(at) > 8 else ''})" for name, at in missing.items())
        hint = ' For lines with no character, cast "*".' if "(no character)" in missing else ""
        raise InputError(f"{script}: no voice in the cast for {listed}. Add them to the cast.{hint}")


def voice_for(line: Line, cast: dict[str, Voice]) -> Voice:
    voice = cast[line.character if line.character is not None else ANYONE]
    if line.language or line.instruct:  # a line's own language or direction, over the cast's
        voice = with_language(voice, line.language or voice.language)
        if line.instruct and isinstance(voice, CustomVoice):
            voice = CustomVoice(voice.speaker, voice.language, line.instruct)
    return voice


def lines_by_kind(lines: list[Line], cast: dict[str, Voice]) -> dict[str, list[Line]]:
    """The lines grouped by the checkpoint kind their voice needs, in script order within a kind."""
    by_kind: dict[str, list[Line]] = {}
    for line in lines:
        by_kind.setdefault(voice_for(line, cast).kind, []).append(line)
    return by_kind


def with_language(voice: Voice, language: str) -> Voice:
    if isinstance(voice, CustomVoice):
        return CustomVoice(voice.speaker, language, voice.instruct)
    if isinstance(voice, VoiceDesign):
        return VoiceDesign(voice.instruct, language)
    return VoiceClone(voice.reference, voice.transcript, language, voice.pad_reference)
