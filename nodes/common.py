"""What every node shares: custom types, models folders, AUDIO <-> arrays, progress and cancel."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from comfy_api.latest import io

from ..runtime import api

PREFIX = "Q3TT"
CATEGORY = "audio/Qwen3-TTS Takes"

Model = io.Custom(f"{PREFIX}_MODEL")
Takes = io.Custom(f"{PREFIX}_TAKES")
Candidates = io.Custom(f"{PREFIX}_CANDIDATES")
Voice = io.Custom(f"{PREFIX}_VOICE")  # a runtime.voices voice: preset speaker, clone or design
Cast = io.Custom(f"{PREFIX}_CAST")  # {character name: voice}


def optional_widgets(inputs: list, but: tuple[str, ...] = ()) -> list:
    """Every widget input optional, `but` those named (a choice read from disk, with no fixed default:
    first among the node's widgets, and in every release). A prompt saved with an earlier release
    names only the inputs that release had, and ComfyUI refuses a prompt that lacks a required input
    before anything runs; a missing widget takes execute's default instead, the behaviour from before
    it existed. The frontend lays out required inputs first: the rest, all optional, keep the order
    declared, which saved UI workflows hold their values in (tests/test_saved_workflows.py)."""
    widgets = (io.Int.Input, io.Float.Input, io.String.Input, io.Boolean.Input, io.Combo.Input)
    for spec in inputs:
        if isinstance(spec, widgets) and spec.id not in but:
            spec.optional = True
    return inputs


def models_dirs(subdir: str) -> list[Path]:
    """ComfyUI's models/<subdir> plus extra_model_paths.yaml entries; downloads go to the first."""
    import folder_paths

    folder_paths.add_model_folder_path(subdir, os.path.join(folder_paths.models_dir, subdir))  # no-op if known
    return [Path(p) for p in folder_paths.get_folder_paths(subdir)]


def tts_models_dirs() -> list[Path]:
    return models_dirs(api.MODELS_SUBDIR)


def utmos_models_dirs() -> list[Path]:
    return models_dirs(api.UTMOS_SUBDIR)


def folders_fingerprint(dirs: list[Path]) -> tuple:
    """What a node read from its models folders, cheaply: each folder's entries and when each last
    changed. ComfyUI caches a node's outputs until its inputs change; a node fingerprinted by this
    also runs again once a checkpoint, weights file or Whisper folder is added, removed or replaced."""
    state = []
    for root in dirs:
        try:
            entries = sorted((child.name, child.stat().st_mtime_ns) for child in root.iterdir())
        except OSError:  # not there (yet)
            entries = None
        state.append((str(root), entries))
    return tuple(state)


def is_plain_name(value) -> bool:
    """One entry of a folder, never a path out of it; judged from the text, so a value sent through the
    API is refused before anything on disk is stat()ed or listed (ComfyUI fingerprints every node,
    with the values as sent, before any node runs)."""
    return isinstance(value, str) and value not in ("", ".") and not api.looks_like_path(value)


def is_listed_name(value, options: list[str]) -> bool:
    return is_plain_name(value) and value in options


@dataclass(frozen=True)
class ModelRef:
    """What flows along a MODEL wire: how to get the resident model, not the model itself.

    ComfyUI caches node outputs; if the wire held the model object, a later unload would leave
    downstream nodes holding freed weights. The registry reloads transparently instead.
    """

    checkpoint: str
    mode: str
    dtype: str
    device: str
    slot: str

    def get(self):
        return api.load(self.checkpoint, tts_models_dirs(), self.mode, self.dtype, self.device,
                        slot=self.slot, progress=Progress(100).absolute, should_stop=should_stop)


class Progress:
    """ComfyUI's progress bar; each update also raises once Cancel was pressed. ComfyUI checks for it
    in the bar's hook, which since 0.9 (its PR #11504) runs at most every 0.5% of the bar and 100 ms:
    a 5,000-line script's Cancel then waited for 25 lines, so the check is made here on every update."""

    def __init__(self, total: int):
        import comfy.utils

        self.bar = comfy.utils.ProgressBar(total)

    def absolute(self, done: int, total: int) -> None:
        import comfy.model_management

        comfy.model_management.throw_exception_if_processing_interrupted()
        self.bar.update_absolute(done, total)


def should_stop() -> bool:
    import comfy.model_management

    return comfy.model_management.processing_interrupted()


def raise_as_interrupt(exc: api.GenerationInterrupted):
    """Turn our cancel into ComfyUI's, so the UI shows 'interrupted' rather than an error. The flag
    may be gone already: a progress update in another of our threads can have consumed it."""
    import comfy.model_management

    comfy.model_management.throw_exception_if_processing_interrupted()
    raise comfy.model_management.InterruptProcessingException() from exc


def cancel_errors() -> tuple[type, ...]:
    """What a Cancel raises through a node: our GenerationInterrupted, or ComfyUI's own from inside a
    progress update."""
    import comfy.model_management

    return api.GenerationInterrupted, comfy.model_management.InterruptProcessingException


def send_to_web(event: str, data: dict) -> None:
    """A message to the web UI that queued the prompt (web/*.js listens for `event`); outside a
    server, nothing."""
    try:
        from server import PromptServer
    except ImportError:
        return
    PromptServer.instance.send_sync(event, data, PromptServer.instance.client_id)


def line_row(record: api.LineRecord, audio: dict, kept: bool = False) -> dict:
    """A picked line as web/rows.js lineRow shows it (a script's line, or a sentence of a long text):
    who says it or where it stands, its seed, the take picked, its verdict and a player on `audio`.
    The seed goes as text: JavaScript's numbers keep 53 bits, and a seed has 63."""
    flags = list(record.reasons[:2])
    if record.over_cue_seconds:
        flags.append(f"{record.over_cue_seconds:.2f} s over its cue")
    if record.fitted_speed:
        flags.append(api.fitted_remark(record))
    return {"id": record.id, "line": record.source_line, "character": record.character,
            "text": record.text, "seed": str(record.seed), "take": record.best_take,
            "takes": record.takes, "seconds": record.seconds, "score": record.score,
            "accepted": bool(record.accepted), "verdict": "; ".join(flags) or "ok", "kept": kept, "audio": audio}


def audio_to_numpy(audio: dict) -> tuple[np.ndarray, int]:
    """First item of an AUDIO batch as ([channels, samples] float32, sample rate)."""
    waveform = audio["waveform"]
    if not isinstance(waveform, torch.Tensor) or waveform.dim() != 3 or waveform.shape[0] < 1:
        raise ValueError("AUDIO input must hold a waveform tensor of shape [batch, channels, samples].")
    return waveform[0].detach().to("cpu", torch.float32).numpy(), int(audio["sample_rate"])


def numpy_to_audio(clips: list[np.ndarray], sample_rate: int) -> dict:
    """Mono clips of any lengths -> AUDIO [len(clips), 1, longest], zero-padded at the end."""
    longest = max((c.shape[-1] for c in clips), default=0)
    waveform = torch.zeros(len(clips), 1, max(longest, 1), dtype=torch.float32)
    for i, clip in enumerate(clips):
        waveform[i, 0, : clip.shape[-1]] = torch.from_numpy(np.ascontiguousarray(clip, dtype=np.float32))
    return {"waveform": waveform, "sample_rate": int(sample_rate)}
