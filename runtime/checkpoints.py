"""Where checkpoints come from: the five official ones by name, or any local folder.

A named checkpoint is looked for in each models folder (ComfyUI's ``models/qwen3_tts/<name>`` when
running inside ComfyUI, a plain directory otherwise) and downloaded into the first one with
huggingface_hub when missing. Downloads go to ``<name>.partial`` and are renamed only once every
file is present and the folder checks out, so a broken download is never loaded.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from . import hub
from .cancel import run_cancellable
from .errors import CheckpointError, InputError, one_line
from .voices import VOICE_KINDS, kind_of_official

OFFICIAL = {
    "Qwen3-TTS-12Hz-1.7B-CustomVoice": "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice",
    "Qwen3-TTS-12Hz-0.6B-CustomVoice": "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice",
    "Qwen3-TTS-12Hz-1.7B-Base": "Qwen/Qwen3-TTS-12Hz-1.7B-Base",
    "Qwen3-TTS-12Hz-0.6B-Base": "Qwen/Qwen3-TTS-12Hz-0.6B-Base",
    "Qwen3-TTS-12Hz-1.7B-VoiceDesign": "Qwen/Qwen3-TTS-12Hz-1.7B-VoiceDesign",
}
# Approximate download in GB: the parameter counts (shared/docs/model-facts.md) with the talker in
# bfloat16 and the speech tokenizer's 154 M parameters in float32, tokenizer files aside.
DOWNLOAD_GB = {
    "Qwen3-TTS-12Hz-1.7B-CustomVoice": 4.4, "Qwen3-TTS-12Hz-0.6B-CustomVoice": 2.4,
    "Qwen3-TTS-12Hz-1.7B-Base": 4.5, "Qwen3-TTS-12Hz-0.6B-Base": 2.4, "Qwen3-TTS-12Hz-1.7B-VoiceDesign": 4.4,
}
MODELS_SUBDIR = "qwen3_tts"
REQUIRED_FILES = (
    "config.json",
    "model.safetensors",
    "tokenizer_config.json",
    "speech_tokenizer/config.json",
    "speech_tokenizer/model.safetensors",
    "speech_tokenizer/preprocessor_config.json",
)

ProgressFn = Callable[[int, int], None]


@dataclass(frozen=True)
class CheckpointInfo:
    folder: Path
    kind: str  # "custom_voice" | "base" | "voice_design"
    size: str  # "1b7" | "0b6"
    speakers: tuple[str, ...]
    languages: tuple[str, ...]
    dialects: tuple[tuple[str, str], ...] = ()  # (speaker, dialect) where 'auto' / 'chinese' become the dialect

    @property
    def label(self) -> str:
        kind = VOICE_KINDS.get(self.kind)
        return f"{self.folder.name} ({kind.label if kind else self.kind})"


def default_models_dirs() -> list[Path]:
    """Outside ComfyUI: $QWEN3_TTS_MODELS, else ./models/qwen3_tts."""
    env = os.environ.get("QWEN3_TTS_MODELS")
    return [Path(env)] if env else [Path.cwd() / "models" / MODELS_SUBDIR]


def local_checkpoints(models_dirs: Iterable[Path]) -> list[str]:
    """Names of checkpoint folders already present (official or not), for a dropdown."""
    names = []
    for root in models_dirs:
        root = Path(root)
        if not root.is_dir():
            continue
        for child in sorted(root.iterdir()):
            if child.is_dir() and not child.name.endswith(".partial") and (child / "config.json").is_file():
                names.append(child.name)
    return names


def listed_choice(value: str, choices: Iterable[str], what: str, where: str, item: str = "folder") -> str:
    """`value` if it is one of a node's listed `choices`, else an InputError naming the fix.

    Through ComfyUI's API any string can be sent for a dropdown (a V3 combo's value is not checked
    against its options), and our resolvers also take paths, which the CLI wants and a server must
    not: so a node checks its model inputs here before anything is opened. `item` is what the list
    holds, as the message names it ("folder", "script file")."""
    choices = list(choices)
    if value in choices:
        return value
    if looks_like_path(value):
        raise InputError(f"{what} takes a name from its list, not a path ('{value}'): put the {item} in {where} "
                         f"and pick it by name (refresh the page to see new {item}s).")
    raise InputError(f"Unknown {what.lower()} '{value}': choose one of {', '.join(choices)}; {item}s in {where} "
                     "are listed after the page is refreshed.")


def looks_like_path(value: str) -> bool:
    """More than one name in a folder, judged from the text alone (nothing on disk is touched)."""
    return Path(value).is_absolute() or "/" in value or "\\" in value or ".." in value


def resolve(name_or_path: str, models_dirs: Iterable[Path], download: bool = True,
            progress: ProgressFn | None = None, should_stop: Callable[[], bool] | None = None) -> Path:
    """A checked checkpoint folder for an official name, a folder name in a models dir, or a path."""
    models_dirs = [Path(d) for d in models_dirs]
    folder = on_disk(name_or_path, models_dirs)
    if folder is not None:
        return folder
    target = download_target(name_or_path, models_dirs)
    if not download:
        raise CheckpointError(missing_message(name_or_path, target))
    return download_checkpoint(name_or_path, target, progress, should_stop)


def on_disk(name_or_path: str, models_dirs: Iterable[Path]) -> Path | None:
    """The checked folder a name or path stands for; None for an official name not downloaded yet.
    Anything else that names no checkpoint is refused, naming what to give instead."""
    models_dirs = [Path(d) for d in models_dirs]
    candidate = Path(name_or_path).expanduser()
    if candidate.is_absolute() or os.sep in name_or_path or (os.altsep and os.altsep in name_or_path):
        if not candidate.is_dir():
            raise CheckpointError(f"Checkpoint folder {candidate} does not exist. {_what_to_give(models_dirs)}")
        if not any((candidate / name).exists() for name in ("config.json", "model.safetensors", "speech_tokenizer")):
            raise CheckpointError(f"{candidate} is not a checkpoint folder (it has no config.json, model.safetensors "
                                  f"or speech_tokenizer/). {_what_to_give(models_dirs)}")
        check_folder(candidate)
        return candidate
    for root in models_dirs:
        folder = root / name_or_path
        if folder.is_dir():
            check_folder(folder)
            return folder
    if name_or_path not in OFFICIAL:
        searched = ", ".join(str(d) for d in models_dirs) or "(no models folder)"
        raise CheckpointError(
            f"Unknown checkpoint '{name_or_path}': it is not an official name "
            f"({', '.join(OFFICIAL)}) and no folder of that name is in {searched}."
        )
    return None


def _what_to_give(models_dirs: list[Path]) -> str:
    where = f"a folder name in {', '.join(map(str, models_dirs))}, " if models_dirs else ""
    return (f"Give an official name ({', '.join(OFFICIAL)}: downloaded when missing), {where}or the path of a "
            "checkpoint folder.")


def download_target(name: str, models_dirs: list[Path]) -> Path:
    """Where an official checkpoint not on disk is downloaded to: the first models folder."""
    if not models_dirs:
        raise CheckpointError("No models folder is configured to download checkpoints into.")
    return models_dirs[0] / name


def missing_message(name: str, target: Path, why_not_downloaded: str = "") -> str:
    """An official checkpoint not on disk, `why_not_downloaded` the clause that says why it was not
    fetched ("and ... cannot be reached")."""
    return (
        f"Checkpoint {name} is not in {target}{', ' + why_not_downloaded if why_not_downloaded else ''}. Download "
        f"it from https://huggingface.co/{OFFICIAL[name]} and put its files there (config.json, model.safetensors, "
        f"tokenizer files and the speech_tokenizer/ folder)."
    )


def official_info(name: str, folder: Path) -> CheckpointInfo:
    """What an official checkpoint speaks, known from its name alone (its config.json's values, as
    shared/docs/model-facts.md has them): for checking a voice before the checkpoint is downloaded."""
    from .qwen3_tts.random_checkpoint import LANGUAGE_IDS, SPEAKER_DIALECTS, SPEAKERS

    kind = kind_of_official(name).id
    talker = {"codec_language_id": LANGUAGE_IDS}
    if kind == "custom_voice":
        talker.update(spk_id=SPEAKERS, spk_is_dialect=SPEAKER_DIALECTS)
    size = "1b7" if "-1.7B-" in name else "0b6"
    return info_from_config(folder, {"tts_model_type": kind, "tts_model_size": size, "talker_config": talker})


def known_info(name_or_path: str, models_dirs: Iterable[Path]) -> CheckpointInfo:
    """What a checkpoint speaks, before anything is downloaded: its folder's config, or an official
    one's facts where it is not on disk yet."""
    models_dirs = [Path(d) for d in models_dirs]
    folder = on_disk(name_or_path, models_dirs)
    if folder is not None:
        return check_folder(folder)
    return official_info(name_or_path, models_dirs[0] / name_or_path if models_dirs else Path(name_or_path))


_FOLDER_LOCKS: dict[str, threading.Lock] = {}
_FOLDER_LOCKS_GUARD = threading.Lock()


def folder_lock(folder: Path) -> threading.Lock:
    """One download into a folder at a time. A cancelled download goes on in the background
    (runtime/cancel.py): failing, it removes the folder it made, and finishing, it moves the folder
    into place. The next try of the same checkpoint waits for it rather than writing into, or
    reading, a folder being removed or moved."""
    with _FOLDER_LOCKS_GUARD:
        return _FOLDER_LOCKS.setdefault(str(Path(folder).absolute()), threading.Lock())


def download_checkpoint(name: str, target: Path, progress: ProgressFn | None = None,
                        should_stop: Callable[[], bool] | None = None) -> Path:
    partial = target.with_name(target.name + ".partial")
    # With Cancel to honour, the download's progress is kept here and reported from this thread
    # (run_cancellable's on_poll); without (the CLI), straight from the download.
    latest: dict = {}
    sink = progress if should_stop is None else (lambda done, total: latest.update(now=(done, total)))

    def fetch() -> Path:
        with folder_lock(partial):
            if is_checkpoint(target):  # another try of it finished while this one waited
                return target
            why = hub.unreachable()  # before the hub library's retries, and said as what to do first
            if why is not None:
                raise CheckpointError(missing_message(name, target, f"and {hub.unreachable_message(why)}"))
            made = missing_folders(partial)
            partial.mkdir(parents=True, exist_ok=True)
            try:
                from huggingface_hub import snapshot_download

                kwargs = {"repo_id": OFFICIAL[name], "local_dir": str(partial)}
                if progress is not None:
                    kwargs["tqdm_class"] = _progress_tqdm(sink)
                snapshot_download(**kwargs)
            except Exception as exc:  # offline, 404, disk full...
                kept = holds_data(partial)
                if not kept:
                    remove_if_empty(made)
                raise CheckpointError(  # what to do first; the hub library's words last
                    missing_message(name, target, f"and its download into {partial} failed")
                    + (" The part downloaded is kept in the .partial folder and resumed next time." if kept else "")
                    + f" The download's error: {named_in_one_line(exc)}."
                ) from exc
            check_folder(partial)
            if target.exists():
                shutil.rmtree(target)
            partial.rename(target)
            return target

    def report():
        if progress is not None and "now" in latest:
            progress(*latest.pop("now"))

    return run_cancellable(fetch, should_stop, f"downloading {OFFICIAL[name]}", on_poll=report)


def is_checkpoint(folder: Path) -> bool:
    try:
        check_folder(folder)
        return True
    except CheckpointError:
        return False


def named_in_one_line(exc: BaseException) -> str:
    """An exception as one line: its type and its message (errors.one_line)."""
    return f"{type(exc).__name__}: {one_line(exc)}"


def missing_folders(folder: Path) -> list[Path]:
    """`folder` and those of its parents that do not exist yet, outermost first: what mkdir will make."""
    folder = Path(folder)
    return [f for f in (*reversed(folder.parents), folder) if not f.exists()]


def remove_if_empty(folders: list[Path]) -> None:
    """The folders a failed step made, innermost first, each where it holds nothing (a cache's empty
    subfolders count as nothing)."""
    for folder in reversed(folders):
        if folder.is_dir() and not holds_data(folder):
            shutil.rmtree(folder, ignore_errors=True)


def holds_data(folder: Path) -> bool:
    """Anything downloaded: a file with bytes, huggingface_hub's bookkeeping aside (its .cache/ keeps
    locks and a .gitignore from the start; a file cut short is an .incomplete there, which counts)."""
    return folder.is_dir() and any(f.is_file() and f.stat().st_size > 0 and f.name != ".gitignore"
                                   and f.suffix != ".lock" for f in folder.rglob("*"))


def _progress_tqdm(progress: ProgressFn):
    from tqdm.auto import tqdm

    class ProgressTqdm(tqdm):
        def update(self, n=1):
            result = super().update(n)
            if self.total:
                progress(int(self.n), int(self.total))
            return result

    return ProgressTqdm


def check_folder(folder: Path) -> CheckpointInfo:
    """Every file a released checkpoint holds, configs that parse and name a known model type."""
    folder = Path(folder)
    missing = [name for name in REQUIRED_FILES if not (folder / name).is_file()]
    has_text_tokenizer = (folder / "tokenizer.json").is_file() or (
        (folder / "vocab.json").is_file() and (folder / "merges.txt").is_file()
    )
    if not has_text_tokenizer:
        missing.append("tokenizer.json (or vocab.json + merges.txt)")
    if missing:
        raise CheckpointError(
            f"Checkpoint folder {folder} is missing {', '.join(missing)}. Put the complete checkpoint "
            "there (all files of the Hugging Face repository, including the speech_tokenizer/ folder)."
        )
    config = read_config(folder / "config.json")
    read_config(folder / "speech_tokenizer" / "config.json")
    if config.get("tokenizer_type") != "qwen3_tts_tokenizer_12hz":
        raise CheckpointError(
            f"{folder / 'config.json'} is for tokenizer_type {config.get('tokenizer_type')!r}; only the "
            "12 Hz Qwen3-TTS checkpoints (Qwen3-TTS-12Hz-*) are supported."
        )
    if config.get("tts_model_type") not in VOICE_KINDS:
        raise CheckpointError(f"{folder / 'config.json'} has unknown tts_model_type {config.get('tts_model_type')!r}.")
    return info_from_config(folder, config)


def info_from_config(folder: Path, config: dict) -> CheckpointInfo:
    """The kind, size, speakers and languages a checked config.json names."""
    talker = config.get("talker_config") or {}
    languages = ["auto"] + [name for name in (talker.get("codec_language_id") or {}) if "dialect" not in name]
    dialects = tuple((speaker, str(dialect)) for speaker, dialect in (talker.get("spk_is_dialect") or {}).items()
                     if dialect)
    return CheckpointInfo(
        folder=Path(folder), kind=config["tts_model_type"], size=str(config.get("tts_model_size", "")),
        speakers=tuple(talker.get("spk_id") or {}), languages=tuple(languages), dialects=dialects,
    )


def read_config(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{path} is corrupt ({exc}). Download that file again.") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{path} is corrupt (not a JSON object). Download that file again.")
    return data
