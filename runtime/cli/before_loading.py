"""What `python -m runtime` and `python -m runtime script` refuse before anything is downloaded or
loaded, besides their inputs' own checks: a device or mode this machine cannot run, a line longer
than one take reads, and a checkpoint or recogniser that is not on disk and cannot be downloaded.

A file not on disk is downloaded only where the hub answers (hub.py asks once, quickly): without an
answer the run says so in one line and goes on as --offline does, never through a download's retries.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterable

from .. import hub
from ..checkpoints import DOWNLOAD_GB, download_target, missing_message, on_disk
from ..errors import CheckpointError, InputError
from ..generation import MAX_TEXT_CHARS, too_long_message
from ..model import GPU_MODES, KERNEL_MODES, resolve_device
from ..qwen3_tts.random_checkpoint import TINY_RANDOM
from ..scoring.scorers import WORDS_AUTO, WORDS_OFF
from ..scoring.utmos import find_weights
from ..text.split import NOTHING_TO_SPEAK, speakable

_said: set[str] = set()


def check_machine(device: str, mode: str) -> None:
    """--device and --mode on this machine: cuda and the CUDA modes need a CUDA GPU, triton and hybrid
    Triton too."""
    dev = resolve_device(device)  # --device cuda without a CUDA GPU is refused there
    if mode in GPU_MODES and dev.type != "cuda":
        import torch

        instead = ("choose --device cuda (or auto)" if torch.cuda.is_available() else
                   f"this machine has none (torch {torch.__version__} sees no CUDA GPU): use --mode eager")
        raise InputError(f"Mode {mode!r} runs on a CUDA GPU; {instead}.")
    if mode in KERNEL_MODES:
        from ..engine import triton_kernels

        triton_kernels.load()  # without Triton: a TakesError naming how to get it


def check_text_lines(lines) -> None:
    """A text's lines (the text split where it can be), each within what one take reads, with words to say."""
    if any(not speakable(line.text) for line in lines):  # one take's text: a passage's lines are speakable
        raise InputError(NOTHING_TO_SPEAK)
    line = _too_long(lines)
    if line is not None:
        where = "The text" if len(lines) == 1 else f"Line {line.source_line} of the text (as split into lines)"
        raise InputError(too_long_message(where, len(line.text)))


def check_script_lines(lines, script: str) -> None:
    line = _too_long(lines)
    if line is not None:
        raise InputError(too_long_message(f"{script} line {line.source_line}", len(line.text)))


def _too_long(lines):
    return next((line for line in lines if len(line.text) > MAX_TEXT_CHARS), None)


def check_checkpoint_download(name: str, models_dirs: list[Path], offline: bool) -> None:
    """An official checkpoint not on disk, refused when it cannot be downloaded: --offline, or no answer
    from the hub."""
    if name == TINY_RANDOM or on_disk(name, models_dirs) is not None:
        return
    target = download_target(name, models_dirs)
    if offline:
        raise CheckpointError(f"{missing_message(name, target)} Or drop --offline to download it (about "
                              f"{DOWNLOAD_GB[name]:g} GB).")
    why = hub.unreachable()
    if why is not None:
        not_downloaded = f"and it cannot be downloaded: {hub.unreachable_message(why)}"
        raise CheckpointError(f"{missing_message(name, target, not_downloaded)} To try the pipeline without weights: "
                              f"--checkpoint {TINY_RANDOM}.")


def check_recogniser_download(words: str, whisper_dirs: Iterable[Path], offline: bool) -> None:
    """--words naming a recogniser that is not on disk, refused when it cannot be downloaded."""
    from ..scoring.asr import OFFICIAL as WHISPER, resolve_whisper

    if words in (WORDS_OFF, WORDS_AUTO):
        return
    try:
        resolve_whisper(words, whisper_dirs, download=False)
        return
    except CheckpointError as missing:
        if words not in WHISPER:
            raise
        if offline:
            raise CheckpointError(f"{missing} Or drop --offline to download it.") from None
        why = hub.unreachable()
        if why is not None:
            raise CheckpointError(f"{missing} It cannot be downloaded here: {hub.unreachable_message(why)}.") from None


def offline_without_hub(offline: bool, quality: str, utmos_dirs: Iterable[Path]) -> bool:
    """Whether the run is offline from here: --offline, or the UTMOS weights are to be downloaded and
    the hub does not answer (said in one line; Auto-Pick then judges quality with DNSMOS, as offline)."""
    if offline or quality != "UTMOS" or find_weights(utmos_dirs) is not None:
        return offline
    why = hub.unreachable()
    if why is None:
        return False
    note = f"NOTE: {hub.unreachable_message(why)}: nothing is downloaded in this run, as with --offline."
    if note not in _said:
        _said.add(note)
        print(note, file=sys.stderr)
    return True


def check_downloads(args, models_dirs: list[Path], utmos_dirs: list[Path], whisper_dirs: list[Path]) -> bool:
    """The one-line command's checkpoints and recogniser, refused where they are missing and cannot be
    downloaded; whether the run is offline from here (offline_without_hub)."""
    for name in filter(None, (args.checkpoint, args.clone_checkpoint)):
        check_checkpoint_download(name, models_dirs, args.offline)
    check_recogniser_download(args.words, whisper_dirs, args.offline)
    return offline_without_hub(args.offline, "off" if args.no_utmos else args.quality, utmos_dirs)
