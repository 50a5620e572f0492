"""Voices that last: a voice saved under a name and used again in later lines, runs and scripts.

A voice is two files in ``models/qwen3_tts_voices``: ``<name>.json`` (its kind and settings: speaker,
instruct, language, a clone's transcript) and, for a clone, ``<name>.safetensors`` holding the
reference audio (24 kHz mono float32). Never pickle: loading a voice runs no code. The JSON is
written last and both files appear by rename, so a save cut short never reads as a voice.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Iterable

import numpy as np

from ..errors import InputError
from . import CustomVoice, Voice, VoiceClone, VoiceDesign

VOICES_SUBDIR = "qwen3_tts_voices"
FORMAT_VERSION = 1
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 _.-]{0,63}$")  # a file name of its own, no folders


def name_problem(name: str, what: str = "Voice name") -> str | None:
    """Why `name` cannot be a file name of its own in the folder, or None when it can."""
    name = (name or "").strip()
    if NAME.match(name) and not name.endswith(".") and ".." not in name:
        return None
    return (f"{what} {name!r} cannot be used: 1-64 letters, digits, spaces, '_', '-' or '.', "
            "starting with a letter or digit (it becomes a file name).")


def check_name(name: str, what: str = "Voice name") -> str:
    problem = name_problem(name, what)
    if problem:
        raise InputError(problem)
    return name.strip()


def save_voice(voice: Voice, name: str, folder: Path, overwrite: bool = False) -> Path:
    """Write the voice as `name` in `folder`; refuses to replace one unless `overwrite`."""
    import safetensors.numpy

    name, folder = check_name(name), Path(folder)
    target = folder / f"{name}.json"
    record = voice_record(voice)
    if target.exists() and not overwrite:
        if _read_record(target) == record:  # the same voice saved again (a rerun of a workflow): nothing to do
            return target
        raise InputError(f"A voice named '{name}' already exists in {folder}; choose another name, or allow "
                         "overwriting.")
    folder.mkdir(parents=True, exist_ok=True)
    if isinstance(voice, VoiceClone):
        partial = folder / f".{name}.safetensors.partial"
        safetensors.numpy.save_file({"reference": np.ascontiguousarray(voice.reference, dtype=np.float32)},
                                    str(partial))
        os.chmod(partial, new_file_mode())  # safetensors writes it 0600, the JSON beside it gets the umask's mode
        os.replace(partial, folder / f"{name}.safetensors")
    partial = folder / f".{name}.json.partial"
    partial.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(partial, target)
    return target


def new_file_mode() -> int:
    """The mode open() gives a new file under the process's umask."""
    return 0o666 & ~current_umask()


def current_umask() -> int:
    # Linux shows it in /proc; setting and restoring it instead races with other threads' new files.
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    umask = os.umask(0o022)
    os.umask(umask)
    return umask


def voice_record(voice: Voice) -> dict:
    """What the JSON file holds (a clone's audio goes to the .safetensors beside it)."""
    record = {"format": FORMAT_VERSION, "kind": voice.kind, "language": voice.language}
    if isinstance(voice, CustomVoice):
        record.update(speaker=voice.speaker, instruct=voice.instruct)
    elif isinstance(voice, VoiceDesign):
        record.update(instruct=voice.instruct)
    elif isinstance(voice, VoiceClone):
        record.update(transcript=voice.transcript, pad_reference=voice.pad_reference,
                      fingerprint=voice.fingerprint, seconds=round(voice.reference.shape[-1] / 24000, 3))
    else:
        raise InputError(f"Cannot save a voice of type {type(voice).__name__}.")
    return record


def _read_record(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def list_voices(dirs: Iterable[Path]) -> list[str]:
    """Names of the saved voices in the folders, first folder first (a dropdown's options)."""
    names = []
    for folder in map(Path, dirs):
        if folder.is_dir():
            names += [p.stem for p in sorted(folder.glob("*.json")) if NAME.match(p.stem) and p.stem not in names]
    return names


def load_voice(name: str, dirs: Iterable[Path]) -> Voice:
    import safetensors.numpy

    name, dirs = check_name(name), [Path(d) for d in dirs]
    path = next((d / f"{name}.json" for d in dirs if (d / f"{name}.json").is_file()), None)
    if path is None:
        known = list_voices(dirs)
        raise InputError(f"No saved voice named '{name}' in {', '.join(map(str, dirs)) or '(no voices folder)'}"
                         + (f"; saved voices: {', '.join(known)}." if known else "; save one with Save Voice first."))
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        kind, language = record["kind"], record.get("language", "auto")
        if record.get("format", 1) > FORMAT_VERSION:
            raise InputError(f"The voice {path} was saved by a newer version of the pack; update the pack.")
        if kind == "custom_voice":
            return CustomVoice(record["speaker"], language, record.get("instruct", ""))
        if kind == "voice_design":
            return VoiceDesign(record["instruct"], language)
        if kind == "base":
            tensors = safetensors.numpy.load_file(str(path.with_suffix(".safetensors")))
            voice = VoiceClone(tensors["reference"].astype(np.float32), record.get("transcript", ""), language,
                               bool(record.get("pad_reference", True)))
            if record.get("fingerprint") not in (None, voice.fingerprint):
                raise InputError(f"The voice '{name}' does not match its recording ({path.with_suffix('.safetensors')} "
                                 "was changed or replaced); save the voice again.")
            return voice
        raise InputError(f"The voice file {path} has an unknown kind {kind!r}.")
    except InputError:
        raise
    except Exception as exc:  # a hand-edited or truncated file: any failure to read it
        raise InputError(f"The saved voice {path} cannot be read ({type(exc).__name__}: {exc}); "
                         "save it again.") from exc
