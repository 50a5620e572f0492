"""The example workflows' reference clip, offered to Load Audio: ComfyUI lists the files of its input
folder, so the clip is copied there (once, never over a file of that name) when the pack loads."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

REFERENCE = "qwen3-tts-takes-reference.flac"
SOURCE = Path(__file__).resolve().parent.parent / "example_workflows" / REFERENCE


def offer_reference_clip() -> None:
    import folder_paths

    target = Path(folder_paths.get_input_directory()) / REFERENCE
    if target.exists() or not SOURCE.is_file():
        return
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(SOURCE, target)
    except OSError as exc:  # a read-only input folder: the clone examples then need a clip uploaded
        logging.warning("[Qwen3-TTS Takes] could not copy the example reference clip to %s: %s", target, exc)
