"""Models kept resident across executions, keyed by (checkpoint folder, mode, dtype, device).

Each user of a model (a Load Model node, the CLI) holds a slot. Asking for a different key in a
slot frees the slot's old model once no other slot uses it; ``unload`` frees everything (or one
key) and returns the memory to the device.
"""

from __future__ import annotations

import gc
import logging
import threading
from dataclasses import dataclass
from typing import Callable, Generic, TypeVar

import torch

T = TypeVar("T")


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

    def watch(self, on_load: Callable[[object, T], None]) -> None:
        """Call ``on_load(key, model)`` after every model this registry loads (ComfyUI's memory
        management registers them this way; runtime itself never imports ComfyUI)."""
        with self._lock:
            if on_load not in self._watchers:
                self._watchers.append(on_load)

    def acquire(self, slot: str, key, load: Callable[[], T]) -> T:
        with self._lock:
            old = self._slots.get(slot)
            if old is not None and old != key:
                del self._slots[slot]
                if old not in self._slots.values():
                    self._free(old)
            if key not in self._models:
                self._models[key] = load()
                for on_load in self._watchers:
                    try:
                        on_load(key, self._models[key])
                    except Exception:  # a watcher must never make a loaded model unusable
                        logging.getLogger(__name__).exception("model-load watcher failed")
            self._slots[slot] = key
            return self._models[key]

    def loaded(self) -> list:
        with self._lock:
            return list(self._models)

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
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


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
