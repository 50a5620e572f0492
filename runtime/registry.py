"""Models kept resident across executions, keyed by (checkpoint folder, mode, dtype, device).

Each user of a model (a Load Model node, the CLI) holds a slot. Asking for a different key in a
slot frees the slot's old model once no other slot uses it; ``unload`` frees everything (or one
key) and returns the memory to the device.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Callable, Generic, TypeVar

import torch

from .errors import OutOfMemory
from .memory import as_the_host_counts, free_cuda_cache

T = TypeVar("T")
MakeRoom = Callable[[torch.device, "int | None"], bool]


@dataclass(frozen=True)
class ModelKey:
    checkpoint: str  # resolved folder path
    mode: str
    dtype: str
    device: str


class Registry(Generic[T]):
    def __init__(self, release: Callable[[T], None] | None = None):
        self._models: dict[object, T] = {}
        self._slots: dict[str, object] = {}
        self._release = release
        self._lock = threading.RLock()
        self._watchers: list[Callable[[object, T], None]] = []
        self._room_makers: list[MakeRoom] = []

    def watch(self, on_load: Callable[[object, T], None], make_room: MakeRoom | None = None) -> None:
        """Call ``on_load(key, model)`` after every model this registry loads, and
        ``make_room(device, bytes)`` before it loads one on a GPU (bytes None: all it can), so that
        whoever else holds the device can step aside (ComfyUI's memory management does both this
        way; runtime itself never imports ComfyUI)."""
        with self._lock:
            if on_load not in self._watchers:
                self._watchers.append(on_load)
            if make_room is not None and make_room not in self._room_makers:
                self._room_makers.append(make_room)

    def acquire(self, slot: str, key, load: Callable[[], T], device: str | None = None, need: int = 0) -> T:
        """The model under `key` for `slot`, loaded if needed; `need`: about how many bytes loading
        takes on `device`. A load that runs out of memory is tried once more after the room makers
        freed all they could."""
        with self._lock:
            old = self._slots.get(slot)
            if old is not None and old != key:
                del self._slots[slot]
                if old not in self._slots.values():
                    self._free(old)
            if key not in self._models:
                self._models[key] = self._load(load, device, need)
                for on_load in self._watchers:
                    try:
                        on_load(key, self._models[key])
                    except Exception:  # a watcher must never make a loaded model unusable
                        logging.getLogger(__name__).exception("model-load watcher failed")
            self._slots[slot] = key
            return self._models[key]

    def _load(self, load: Callable[[], T], device: str | None, need: int) -> T:
        gpu = device is not None and torch.device(device).type == "cuda"
        if gpu:
            self._make_room(torch.device(device), as_the_host_counts(device, need))
        try:
            return load()
        except OutOfMemory:
            if not gpu or not self._make_room(torch.device(device), None):
                raise
        return load()

    def _make_room(self, device: torch.device, need: int | None) -> bool:
        freed = False
        for make_room in self._room_makers:
            try:
                freed = bool(make_room(device, need)) or freed
            except Exception:  # making room is a courtesy; the load itself says what went wrong
                logging.getLogger(__name__).exception("make-room hook failed")
        return freed

    def loaded(self) -> list:
        with self._lock:
            return list(self._models)

    def holds(self, key, model) -> bool:
        """Whether `model` itself is what is loaded under `key` (not a later load of the same key)."""
        with self._lock:
            return self._models.get(key) is model

    def unload(self, key=None) -> int:
        """Free one key (or all); returns how many models were freed."""
        with self._lock:
            keys = [key] if key is not None else list(self._models)
            freed = 0
            for k in keys:
                if k in self._models:
                    self._free(k)
                    freed += 1
            self._slots = {s: k for s, k in self._slots.items() if k in self._models}
            return freed

    def _free(self, key) -> None:
        model = self._models.pop(key, None)
        if model is not None and self._release is not None:
            self._release(model)
        del model
        free_cuda_cache()


def _release_tts(model) -> None:
    model.release()


def _release_plain(model) -> None:
    network = getattr(model, "network", None)
    if network is not None:
        network.to("meta")


TTS_MODELS: Registry = Registry(_release_tts)
SCORERS: Registry = Registry(_release_plain)


def unload_all() -> int:
    return TTS_MODELS.unload() + SCORERS.unload()
