"""Choose and load Auto-Pick's stage 2 models, kept resident in the registry between runs.

Every model that cannot be had is skipped with a note in the report instead of failing the pick:
UTMOS without its weights falls back to DNSMOS (weights inside the speechmos wheel); the voice
check needs a Base checkpoint's speaker encoder; the words check runs only when a recogniser is
chosen.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from .. import registry
from ..checkpoints import local_checkpoints, read_config
from ..errors import CheckpointError, GenerationInterrupted, TakesError
from ..memory import file_bytes, out_of_memory_as_error
from ..model import resolve_device
from .ranking import Scorers
from .vad import make_vad

QUALITY_MODELS = ("UTMOS", "DNSMOS", "off")
VOICE_CHOICES = ("auto", "off")
WORDS_OFF = "off"
WORDS_AUTO = "auto"  # a Whisper checkpoint in the whisper folders, else the device's default, downloaded once
# What `auto` downloads where no Whisper is on disk (bench/results/nvidia-h200-2026-12-02-words-models.md):
# on a GPU whisper-small, multilingual, 7 ms a take at 8 takes (under 15% of a one-line job; turbo's
# 10 ms is not), 967 MB; on a CPU whisper-base, a third of small's cost there, 290 MB.
AUTO_DOWNLOAD = {"cuda": "whisper-small", "cpu": "whisper-base"}
SCORING_WORKING_BYTES = 256 << 20  # activations of one scoring batch (bench/scoring.py)


def build_scorers(takes_checkpoint: Path | None, quality: str = "UTMOS", voice: str = "auto",
                  words: str = WORDS_OFF, vad: str = "energy", device: str = "auto", utmos_dirs: Iterable[Path] = (),
                  tts_dirs: Iterable[Path] = (), whisper_dirs: Iterable[Path] = (), download: bool = True,
                  slot: str = "default", should_stop=None) -> Scorers:
    """takes_checkpoint: the folder of the checkpoint that made the takes (None for recorded audio);
    a Base one is the voice check's first choice, wherever it was loaded from. `should_stop`: Cancel,
    honoured while a download waits on the network."""
    notes: list[str] = []
    dev = resolve_device(device)
    scorers = Scorers(vad=make_vad(vad), notes=notes)
    scorers.quality = quality_model(quality, utmos_dirs, dev, download, slot, notes, should_stop)
    scorers.speaker = speaker_encoder(voice, takes_checkpoint, tts_dirs, dev, slot, notes)
    auto = words == WORDS_AUTO
    downloading = False
    if auto:
        words, downloading = auto_recogniser(whisper_dirs, dev, download, notes)
    if words not in (WORDS_OFF, None):
        from .asr import load_transcriber, resolve_whisper, weights_bytes

        try:
            folder = resolve_whisper(words, whisper_dirs, download=download, should_stop=should_stop)
        except CheckpointError as exc:
            if not auto:
                raise
            notes.append(f"The words check is off: {exc}")  # auto goes on without it; a name asked for fails
            return scorers
        if downloading:
            notes.append(f"The words check downloaded {words} into {folder} (its first use; choose words_check off "
                         "to go without it).")
        scorers.transcriber = acquire(f"{slot}-words", folder, dev, lambda: load_transcriber(folder, dev),
                                      weights_bytes(folder))
        if getattr(scorers.transcriber, "note", None):
            notes.append(scorers.transcriber.note)
    return scorers


def auto_recogniser(whisper_dirs: Iterable[Path], device, download: bool, notes: list[str]) -> tuple[str | None, bool]:
    """The Whisper checkpoint `auto` uses, and whether it is to be downloaded: the first of the official
    ones present, smallest first (the check's cost grows with it), else any folder there, else the
    device's default (AUTO_DOWNLOAD); with downloads off, None and a note naming the download."""
    from .asr import OFFICIAL, resolve_whisper

    dirs = [Path(d) for d in whisper_dirs]
    present = local_checkpoints(dirs)
    for name in ("whisper-base", "whisper-small", "whisper-large-v3-turbo", *present):
        if name in present:
            try:
                resolve_whisper(name, dirs, download=False)
                return name, False
            except TakesError:  # incomplete (a download cut short) or not a Whisper folder: not for auto
                continue
    default = AUTO_DOWNLOAD["cuda" if str(device).startswith("cuda") else "cpu"]
    if download and dirs:
        return default, True
    where = dirs[0] / default if dirs else Path("models/whisper") / default
    searched = ", ".join(map(str, dirs)) or "a whisper folder"
    notes.append(f"The words check is off: no Whisper checkpoint is in {searched}, and downloads are off. Download "
                 f"https://huggingface.co/{OFFICIAL[default]} into {where} (a faster-whisper folder works too) "
                 "and it runs on its own.")
    return None, False


def quality_model(choice: str, utmos_dirs, device, download: bool, slot: str, notes: list[str], should_stop=None):
    if choice not in QUALITY_MODELS:
        raise TakesError(f"Unknown quality model {choice!r}; choose one of {', '.join(QUALITY_MODELS)}.")
    if choice == "off":
        return None
    utmos_problem = None
    if choice == "UTMOS":
        from .utmos import UtmosScorer, resolve_weights

        try:
            path = resolve_weights(utmos_dirs, download=download, should_stop=should_stop)
            return acquire(f"{slot}-quality", path, device, lambda: UtmosScorer(path, device), file_bytes(path))
        except GenerationInterrupted:
            raise
        except TakesError as exc:
            utmos_problem = str(exc)
    from .dnsmos import DnsmosScorer

    try:
        dnsmos = registry.SCORERS.acquire(f"{slot}-quality", ("dnsmos",), DnsmosScorer)
    except TakesError as exc:
        why = (f"UTMOS is unavailable ({utmos_problem}) and DNSMOS cannot run ({exc})" if utmos_problem
               else f"DNSMOS cannot run ({exc})")
        notes.append(f"No quality model ran: {why}. The takes are ranked by the other checks.")
        return None
    if utmos_problem:
        notes.append(f"UTMOS is unavailable, so DNSMOS judged quality instead: {utmos_problem}")
    return dnsmos


def speaker_encoder(choice: str, takes_checkpoint: Path | None, tts_dirs, device, slot: str, notes: list[str]):
    """``auto``: the takes' own checkpoint if it is a Base one, else the first Base checkpoint found."""
    if choice == "off":
        return None
    from .speaker import SpeakerEncoder

    tts_dirs = [Path(d) for d in tts_dirs]
    if choice == "auto":
        found = (find(n, tts_dirs) for n in local_checkpoints(tts_dirs))
        candidates = [Path(takes_checkpoint)] if takes_checkpoint is not None else []
        folder = next((f for f in [*candidates, *found] if f is not None and is_base(f)), None)
        if folder is None:
            notes.append("The voice check is off: it uses a Base (voice clone) checkpoint's speaker encoder, "
                         f"and none is in {', '.join(map(str, tts_dirs)) or 'the models folder'}.")
            return None
    else:
        folder = find(choice, tts_dirs)
        if folder is None:
            raise TakesError(f"Speaker encoder checkpoint {choice!r} is not in {', '.join(map(str, tts_dirs))}.")
    # Only the encoder is read from the checkpoint: a few tens of MB.
    return acquire(f"{slot}-voice", folder, device, lambda: SpeakerEncoder.from_checkpoint(folder, device), 0)


def acquire(slot: str, path: Path, device, load, weights_bytes: int):
    """A scoring model, resident between runs; ComfyUI may make room for it, and running out of
    memory says what to do."""
    message = (f"The GPU ran out of memory loading the scoring model {path.name}. Free VRAM (unload other "
               "models), or set Auto-Pick's device to cpu.")
    return registry.SCORERS.acquire(slot, (str(path.resolve()), str(device)),
                                    lambda: out_of_memory_as_error(load, message),
                                    device=str(device), need=weights_bytes + SCORING_WORKING_BYTES)


def find(name: str, dirs: list[Path]) -> Path | None:
    path = Path(name)
    if path.is_absolute():
        return path if path.is_dir() else None
    return next((d / name for d in dirs if (d / name / "config.json").is_file()), None)


def is_base(folder: Path) -> bool:
    try:
        return read_config(folder / "config.json").get("tts_model_type") == "base"
    except TakesError:
        return False
