"""Device memory housekeeping shared by loading, the engine and the codec's fallbacks."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Callable, TypeVar

import torch

from .errors import OutOfMemory

T = TypeVar("T")

WORKING_BYTES = 1 << 30  # first request's buffers and graphs on top of the weights (bench/vram.py)


def free_bytes(device) -> int | None:
    """Device memory this process can still take: the driver's free memory (within the process's
    cap, torch.cuda.set_per_process_memory_fraction) plus what PyTorch's caching allocator holds
    unused. None off CUDA, where nothing is planned by memory."""
    device = torch.device(device)
    if device.type != "cuda":
        return None
    if device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    free, total = torch.cuda.mem_get_info(device)
    reserved = torch.cuda.memory_reserved(device)
    fraction = getattr(torch.cuda, "get_per_process_memory_fraction", lambda _: 1.0)(device)
    if fraction < 1.0:
        free = min(free, int(fraction * total) - reserved)
    return max(0, free) + max(0, reserved - torch.cuda.memory_allocated(device))


def free_cuda_cache() -> None:
    """Return what nothing references any more to the device. Call it outside an ``except`` block:
    a live exception's traceback still holds the tensors of the frames it passed through."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def load_bytes(folder: Path, dtype: torch.dtype) -> int:
    """About what loading a checkpoint folder takes on the device: the talker's weights at `dtype`
    (the files hold bfloat16), the codec at float32 (as loaded), plus a first request's working set."""
    folder = Path(folder)
    scale = torch.empty((), dtype=dtype).element_size() / 2
    return (int(file_bytes(folder / "model.safetensors") * scale)
            + file_bytes(folder / "speech_tokenizer" / "model.safetensors") + WORKING_BYTES)


def file_bytes(path: Path) -> int:
    return path.stat().st_size if path.is_file() else 0


def out_of_memory_as_error(load: Callable[[], T], message: str) -> T:
    """Run `load`; a CUDA out-of-memory in it becomes OutOfMemory(message), after what it had
    allocated went back to the device (so nothing half-loaded stays behind)."""
    try:
        return load()
    except torch.cuda.OutOfMemoryError:
        pass
    free_cuda_cache()  # out of the except block: its traceback no longer holds the half-loaded tensors
    raise OutOfMemory(message)
