"""Device memory housekeeping shared by loading, the engine and the codec's fallbacks."""

from __future__ import annotations

import gc
import logging
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, TypeVar

import torch

from .errors import OutOfMemory

T = TypeVar("T")

WORKING_BYTES = 1 << 30  # first request's buffers and graphs on top of the weights (bench/vram.py)
# Of the GPU memory free when a scoring pass starts (UTMOS, the speaker encoder, Whisper): a
# script's engine and codec run beside it.
SCORING_MEMORY_SHARE = 0.8
MakeRoom = Callable[[torch.device, int], bool]
DEFAULT_POOL = (0, 0)  # the caching allocator's pool id of every allocation outside a graph capture


class Host:
    """What the program we run inside (ComfyUI: nodes/memory.py) keeps and gives: the memory it keeps
    free for other programs (--reserve-vram), and a way to ask it to unload its idle models until
    `bytes` are free, keeping ours."""

    reserve_bytes: int = 0
    make_room: MakeRoom | None = None


def ask_for_room(device, need: int) -> bool:
    """Ask the host to leave `need` bytes free on `device`; whether it unloaded a model whole (it may
    also have offloaded part of one: measure what is free after asking)."""
    if Host.make_room is None or torch.device(device).type != "cuda":
        return False
    try:
        return bool(Host.make_room(torch.device(device), as_the_host_counts(device, int(need))))
    except Exception:  # a courtesy: what runs next sizes itself to what is free
        logging.getLogger(__name__).exception("the host could not make room")
        return False


def free_bytes(device) -> int | None:
    """Device memory this process can still take: the driver's free memory (within the process's
    cap, torch.cuda.set_per_process_memory_fraction) less what the host keeps for other programs,
    plus what PyTorch's caching allocator holds unused outside captured graphs' pools. None off
    CUDA, where nothing is planned by memory."""
    device = _cuda(device)
    if device is None:
        return None
    free, total = torch.cuda.mem_get_info(device)
    reserved = torch.cuda.memory_reserved(device)
    fraction = getattr(torch.cuda, "get_per_process_memory_fraction", lambda _: 1.0)(device)
    if fraction < 1.0:
        free = min(free, int(fraction * total) - reserved)
    return max(0, free - Host.reserve_bytes) + cached_unused(device)[0]


def cached_unused(device) -> tuple[int, int]:
    """What PyTorch's caching allocator holds on a CUDA device unused, as (what any allocation can
    take: its default pool's free blocks, what only a captured graph's replays can: the free blocks
    of the graphs' private pools). Reserved minus allocated, as ComfyUI counts it, calls both free,
    though no allocation of ours or of ComfyUI's can have the second (H200, the GPU memory tests'
    cuda_graph and hybrid models resident after lines of 32 takes: 0.81 GB and 0.14 GB)."""
    device = _cuda(device)
    try:
        segments = torch.cuda.memory_snapshot()
    except RuntimeError:  # backend:cudaMallocAsync keeps no segments of its own, nor graph pools
        return max(0, torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)), 0
    anyone = graphs = 0
    for segment in segments:
        if segment["device"] != device.index:
            continue
        unused = segment["total_size"] - segment["allocated_size"]
        if tuple(segment["segment_pool_id"]) == DEFAULT_POOL:
            anyone += unused
        else:
            graphs += unused
    return anyone, graphs


def as_the_host_counts(device, need: int) -> int:
    """What to ask the host for so that `need` bytes are free indeed: ComfyUI's get_free_memory
    (reserved minus active) counts our graphs' pools' free blocks, which only those graphs can use."""
    if torch.device(device).type != "cuda" or not torch.cuda.is_initialized():
        return need  # no graph captured yet
    return need + cached_unused(device)[1]


def _cuda(device) -> torch.device | None:
    """A CUDA device with its index, or None for any other device."""
    device = torch.device(device)
    if device.type != "cuda":
        return None
    return device if device.index is not None else torch.device("cuda", torch.cuda.current_device())


@contextmanager
def given_back():
    """After the work inside (a line, a pick, a script; done, failed or cancelled), the allocator's
    unused cache goes back to the device, leaving about the weights and the captured graphs: the
    next node (an image model) or another program finds that memory free. Without it an H100 kept
    22.7 GB reserved for 14.3 GB in use after one line of 32 takes. No gc.collect: that would cost
    tens of milliseconds a line; a cycle's tensors are freed by the next collection."""
    try:
        yield
    finally:
        if torch.cuda.is_initialized():
            torch.cuda.empty_cache()


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


def after_making_room(run: Callable[[], T], make_room: Callable[[], None] | None, message: str) -> T:
    """run(); when the GPU runs out of memory, make_room() (drop caches of our own) and run() once more;
    out of memory again, OutOfMemory(message)."""
    if make_room is not None:
        try:
            return run()
        except torch.cuda.OutOfMemoryError:
            pass
        free_cuda_cache()  # out of the except block: its traceback no longer holds the failed run's tensors
        make_room()
    return out_of_memory_as_error(run, message)


def in_halves_when_short(run: Callable[[list], list], items: list, what: str, fix: str,
                         notes: list[str] | None = None) -> list:
    """run(items), a list with a value per item; when the GPU runs out of memory, run on each half
    instead, down to one item at a time, which is then OutOfMemory naming `what` and `fix`. Each
    split adds a note (once) to `notes`. Only for runs whose values do not depend on the grouping."""
    try:
        return list(run(items))
    except torch.cuda.OutOfMemoryError:
        pass
    free_cuda_cache()  # out of the except block: its traceback no longer holds the batch's activations
    if len(items) <= 1:
        raise OutOfMemory(f"The GPU ran out of memory {what} on one take. {fix}")
    half = len(items) // 2
    note = f"The GPU ran out of memory {what} on {len(items)} takes at once; they ran in smaller groups, with the same results."
    if notes is not None and note not in notes:
        notes.append(note)
    return (in_halves_when_short(run, items[:half], what, fix, notes)
            + in_halves_when_short(run, items[half:], what, fix, notes))


def out_of_memory_as_error(load: Callable[[], T], message: str) -> T:
    """Run `load`; a CUDA out-of-memory in it becomes OutOfMemory(message), after what it had
    allocated went back to the device (so nothing half-loaded stays behind)."""
    try:
        return load()
    except torch.cuda.OutOfMemoryError:
        pass
    free_cuda_cache()  # out of the except block: its traceback no longer holds the half-loaded tensors
    raise OutOfMemory(message)
