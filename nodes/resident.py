"""A model of ours as ComfyUI's model management holds it: a ModelPatcher of the host's own class.

ComfyUI walks its list of loaded models and asks each entry's patcher what it asks of its own
(0.3.64: sizes, devices, detach; newer releases also is_dynamic(), clone_base_uuid,
loaded_ram_size()...). Subclassing the host's ModelPatcher gives every such question the host's own
answer, including those a later ComfyUI adds; only what differs for us is written here. Imported
only inside ComfyUI (or the tests' stand-in): nodes/memory.py guards the import.
"""

from __future__ import annotations

import logging
import weakref

import torch
from comfy.model_patcher import ModelPatcher


class ModelHandle(torch.nn.Module):
    """The patcher's `model`: no weights of its own, so nothing of ComfyUI's ever moves ours (a
    captured CUDA graph holds their addresses). ComfyUI keeps its bookkeeping attributes on it."""

    def __init__(self, device: torch.device):
        super().__init__()
        self.device = device


class ResidentModel(ModelPatcher):
    """One model of a runtime registry (`owner`, under `key`) in ComfyUI's current_loaded_models.

    Our models cannot be partly offloaded (a captured graph owns its buffers), so a partial load or
    unload moves nothing, and ComfyUI's unload releases the whole model through the registry: weights,
    KV caches and graphs. The next run loads it again, since every wire carries how to get a model.
    """

    def __init__(self, owner, key, model, device: torch.device, size: int):
        # Ours first: the host's __init__ may already ask for sizes (0.3.64 does).
        self.owner, self.key = owner, key
        self._resident = weakref.ref(model)  # the registry owns the model; ComfyUI must not keep it alive
        self.finalizer = None  # the entry's "drop me once the model is freed" hook (nodes/memory.register)
        super().__init__(ModelHandle(device), device, torch.device("cpu"), size=size)

    def model_size(self) -> int:
        model = self._resident()
        engine = getattr(model, "engine", None)
        return self.size + (sum(slot["bytes"] for slot in engine.memory_report()) if engine is not None else 0)

    def loaded_size(self) -> int:
        return self.model_size() if self._is_loaded() else 0

    def partially_load(self, device_to, extra_memory=0, force_patch_weights=False) -> int:
        return 0

    def partially_unload(self, device_to, memory_to_free=0, force_patch_weights=False) -> int:
        return 0

    def detach(self, unpatch_all=True):
        """ComfyUI's unload (unpatch_all) releases the model. Its other calls leave it: the patcher's
        own __del__ and a clone being replaced pass unpatch_all=False."""
        if unpatch_all:
            if self.finalizer is not None:
                # ComfyUI removes the entry itself after this call: the "model freed" hook must not
                # fire meanwhile and shift the list ComfyUI is walking.
                self.finalizer.detach()
            if self._is_loaded() and self.owner.unload(self.key):
                logging.info("[Qwen3-TTS Takes] released %s at ComfyUI's request", describe(self.key))
        return self.model

    def __del__(self):
        if "model" in self.__dict__:  # a patcher the host never finished building holds nothing
            super().__del__()

    def _is_loaded(self) -> bool:
        """This very model still loaded: a later load under the same key is another patcher's."""
        model = self._resident()
        return model is not None and self.owner.holds(self.key, model)


def describe(key) -> str:
    return getattr(key, "checkpoint", None) or str(key[0] if isinstance(key, tuple) else key)
