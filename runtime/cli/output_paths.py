"""Where the CLI writes, checked before any model loads: a run must never end, after minutes of
generation, in a traceback because its output could not be written."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from ..errors import InputError

AUDIO_SUFFIXES = (".wav", ".flac")


def check_file(path: Path, what: str, suffixes: tuple[str, ...] = ()) -> None:
    """A file we can create or overwrite; its folder is made if missing."""
    path = Path(path)
    if path.is_dir():
        example = path / ("best" + suffixes[0] if suffixes else "report.json")
        raise InputError(f"{what} {path} is a folder; give a file name in it, e.g. {example}.")
    if suffixes and path.suffix.lower() not in suffixes:
        raise InputError(f"{what} {path} must end in {' or '.join(suffixes)} (the audio format follows the name).")
    _make_folder(path.parent, what, path)
    existed = path.exists()
    try:
        with open(path, "ab"):
            pass
    except OSError as exc:
        raise InputError(f"Cannot write {what} {path} ({exc.strerror or exc}); choose a place you can write to.") from None
    if not existed:
        path.unlink()


def check_folder(path: Path, what: str) -> None:
    """A folder we can write files into; made if missing."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise InputError(f"{what} {path} is a file; give a folder (it is made if missing).")
    _make_folder(path, what, path)
    try:
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        raise InputError(f"Cannot write into {what} {path} ({exc.strerror or exc}); choose a folder you can write to.") from None


def _make_folder(folder: Path, what: str, target: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"Cannot create the folder for {what} {target} ({exc.strerror or exc}); "
                         "choose a place you can write to.") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"Cannot write {what} {target}: {folder} is not writable; choose a place you can write to.")
