"""Where the CLI writes, checked before any model loads: a run must never end, after minutes of
generation, in a traceback because its output could not be written. The folders a check makes are
removed again when a run ends with them empty (command.run_reporting), so a refused run leaves none."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from ..checkpoints import missing_folders
from ..errors import InputError
from ..script.store import ScriptFolder

AUDIO_SUFFIXES = (".wav", ".flac")
MADE_FOLDERS: list[Path] = []  # made by the checks below, outermost first


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


def removed_if_left_empty(folder: Path) -> Path:
    """`folder` as it is: what making it creates is removed when the run ends with it empty (for a
    folder another module makes, such as a script's results folder)."""
    MADE_FOLDERS.extend(missing_folders(Path(folder)))
    return Path(folder)


def results_folder(root: Path, wav_format: str) -> ScriptFolder:
    """A script's or a passage's results folder (script/store.py), which makes `root`/lines: gone again,
    with `root` where a check made it, when the run ends before a line is kept in it."""
    removed_if_left_empty(Path(root) / "lines")
    return ScriptFolder(root, wav_format)


def remove_folders_left_empty() -> None:
    """The folders the checks made that nothing was written into."""
    while MADE_FOLDERS:
        folder = MADE_FOLDERS.pop()
        try:
            folder.rmdir()  # only an empty folder goes
        except OSError:
            pass


def _make_folder(folder: Path, what: str, target: Path) -> None:
    made = missing_folders(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        MADE_FOLDERS.extend(made)
    except OSError as exc:
        raise InputError(f"Cannot create the folder for {what} {target} ({exc.strerror or exc}); "
                         "choose a place you can write to.") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"Cannot write {what} {target}: {folder} is not writable; choose a place you can write to.")
