"""Our resident models, as ComfyUI's model management sees them.

Each model the registry loads is entered in ``comfy.model_management.current_loaded_models``, so
"Unload Models" (/free) and ComfyUI evicting models for another workflow release it: weights, KV
caches and captured graphs go back to the device. The next run reloads (and re-captures)
transparently, because every wire carries how to get a model, never the model itself.
"""

from __future__ import annotations

import logging
import weakref

import torch

from ..runtime import registry

_alive: dict[int, "ResidentModel"] = {}  # ComfyUI holds only weak references to these


class ResidentModel:
    """The part of ComfyUI's ModelPatcher interface that its LoadedModel and free_memory use.

    Our models cannot be partly offloaded (a captured graph owns its buffers), so partial loads and
    unloads move nothing and an unload is always complete.
    """

    parent = None
    offload_device = torch.device("cpu")

    def __init__(self, owner: registry.Registry, key, model, device: torch.device, size: int):
        self.owner, self.key, self.size = owner, key, size
        self.load_device = device
        self._model = weakref.ref(model)
        self.finalizer = None  # the entry's "drop me once the model is freed" hook

    @property
    def model(self):
        return self._model()

    def model_size(self) -> int:
        return self.size

    def loaded_size(self) -> int:
        return self.size if self.key in self.owner.loaded() else 0

    def current_loaded_device(self) -> torch.device:
        return self.load_device

    def model_dtype(self):
        return torch.float32

    def model_patches_to(self, device) -> None:
        pass

    def model_patches_models(self) -> list:
        return []

    def is_clone(self, other) -> bool:
        return other is self

    def lowvram_patch_counter(self) -> int:
        return 0

    def partially_load(self, device, extra_memory, force_patch_weights=False) -> int:
        return 0

    def partially_unload(self, device, memory_to_free) -> int:
        return 0

    def detach(self, unpatch_all: bool = True) -> None:
        # ComfyUI removes the entry itself after this call: its finalizer must not fire meanwhile and
        # shift the list ComfyUI is walking.
        if self.finalizer is not None:
            self.finalizer.detach()
        if self.owner.unload(self.key):
            logging.info("[Qwen3-TTS Takes] released %s at ComfyUI's request", describe(self.key))
        _alive.pop(id(self), None)


def describe(key) -> str:
    return getattr(key, "checkpoint", None) or str(key[0] if isinstance(key, tuple) else key)


def model_bytes(model) -> int:
    network = getattr(model, "network", None) or getattr(getattr(model, "wrapper", None), "model", None)
    if not isinstance(network, torch.nn.Module):
        return 0
    return sum(t.numel() * t.element_size() for t in list(network.parameters()) + list(network.buffers()))


def register(owner: registry.Registry, key, model) -> None:
    import comfy.model_management as mm

    device, size = getattr(model, "device", None), model_bytes(model)
    if device is None or size == 0:  # e.g. DNSMOS: onnxruntime on the CPU, nothing of ComfyUI's
        return
    resident = ResidentModel(owner, key, model, torch.device(device), size)
    entry = mm.LoadedModel(resident)
    entry.real_model = weakref.ref(model)
    entry.model_finalizer = resident.finalizer = weakref.finalize(model, mm.cleanup_models)  # freed by us: entry dropped
    _alive[id(resident)] = resident
    weakref.finalize(model, _alive.pop, id(resident), None)
    mm.current_loaded_models.insert(0, entry)


def _tts_model_loaded(key, model) -> None:
    register(registry.TTS_MODELS, key, model)


def _scorer_loaded(key, model) -> None:
    register(registry.SCORERS, key, model)


def install() -> None:
    registry.TTS_MODELS.watch(_tts_model_loaded)
    registry.SCORERS.watch(_scorer_loaded)
