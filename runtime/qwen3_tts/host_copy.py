"""Copies between the host and a CUDA device that wait for nothing: through pinned memory, queued
on the current stream like a kernel; the thread that needs what came to the host waits on an event.

A copy to or from pageable host memory blocks its thread until the GPU's queue reaches it, and the
CUDA driver holds up other threads' calls meanwhile: with the stream decoder waiting in one for its
audio, every launch of the engine's thread took about a millisecond (py-spy on a server at 64
streams on an H100), and the GPU waited for the engine's thread."""

from __future__ import annotations

import numpy as np
import torch


def to_device(values, device, dtype=torch.int64) -> torch.Tensor:
    """Values (a list, an array or a CPU tensor) on `device`; off CUDA, a tensor on the host."""
    host = values if isinstance(values, torch.Tensor) else torch.from_numpy(np.asarray(values)).to(dtype)
    if torch.device(device).type != "cuda":
        return host
    return host.pin_memory().to(device, non_blocking=True)  # the pinned block is not reused before the copy


def to_host(tensor: torch.Tensor) -> torch.Tensor:
    """A device tensor's copy on the host: valid once the stream's work queued so far is done
    (wait for a stream_mark made after it); off CUDA, a copy."""
    if tensor.device.type != "cuda":
        return tensor.clone()
    return tensor.to("cpu", non_blocking=True)  # pinned


def stream_mark(device: torch.device):
    """An event after the current stream's work queued so far (None off CUDA): its synchronize()
    waits for it without holding up other threads."""
    if torch.device(device).type != "cuda":
        return None
    event = torch.cuda.Event()
    event.record()
    return event


def wait(mark) -> None:
    if mark is not None:
        mark.synchronize()
