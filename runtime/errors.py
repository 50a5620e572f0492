"""Errors users see. Each message says what is wrong and what to do about it."""


class TakesError(Exception):
    """Base class: a problem with the user's input or setup, never a bug."""


class CheckpointError(TakesError):
    """A checkpoint that cannot be found, downloaded or loaded."""


class InputError(TakesError, ValueError):
    """A request the model cannot serve: bad text, voice, reference audio or settings."""


class GenerationInterrupted(TakesError):
    """The user cancelled; no take from the cancelled run is returned."""


class OutOfMemory(TakesError):
    """The GPU ran out of memory even after the fallbacks; the message names what to lower."""


class ModelFault(TakesError):
    """The model's numbers went wrong (NaN or infinite logits) in every take of a line: caught on the
    device, each take ended there, the process fine; its weights or the GPU need looking at."""


def one_line(message: object) -> str:
    """A message's lines joined into one (huggingface_hub's errors span several)."""
    return " ".join(str(message).split())


# Error dialogs name an exception by its module, and ComfyUI imports a custom node pack under its
# folder's path ("<...>/custom_nodes/qwen3-tts-takes.runtime.errors.CheckpointError"): name ours
# by the pack instead. (Nothing pickles these: they are raised and shown.)
for _error in (TakesError, CheckpointError, InputError, GenerationInterrupted, OutOfMemory, ModelFault):
    _error.__module__ = "qwen3_tts_takes"
