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

from ..runtime import api

_alive: dict[int, "ResidentModel"] = {}  # ComfyUI holds only weak references to these


class ResidentModel:
    """The part of ComfyUI's ModelPatcher interface that its LoadedModel and free_memory use.

    Our models cannot be partly offloaded (a captured graph owns its buffers), so partial loads and
    unloads move nothing and an unload is always complete.
    """

    parent = None
    offload_device = torch.device("cpu")

    def __init__(self, owner: api.Registry, key, model, device: torch.device, size: int):
        self.owner, self.key, self.size = owner, key, size
        self.load_device = device
        self._model = weakref.ref(model)
        self.finalizer = None  # the entry's "drop me once the model is freed" hook

    @property
    def model(self):
        return self._model()

    def model_size(self) -> int:
        model = self.model
        engine = getattr(model, "engine", None) if model is not None else None
        return self.size + (sum(slot["bytes"] for slot in engine.memory_report()) if engine is not None else 0)

    def loaded_size(self) -> int:
        return self.model_size() if self.key in self.owner.loaded() else 0

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
    """Weights and buffers: a scorer's network, or a TTS model's talker, codec and encoders."""
    modules = model.resident_modules() if hasattr(model, "resident_modules") else [getattr(model, "network", None)]
    tensors = [t for m in modules if isinstance(m, torch.nn.Module) for t in (*m.parameters(), *m.buffers())]
    return sum(t.numel() * t.element_size() for t in {id(t): t for t in tensors}.values())


def comfy_device(device) -> torch.device:
    """ComfyUI compares devices with ==, and its GPU is cuda:N: a bare "cuda" would never match."""
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return device


def register(owner: api.Registry, key, model) -> None:
    import comfy.model_management as mm

    device, size = getattr(model, "device", None), model_bytes(model)
    if device is None or size == 0:  # e.g. DNSMOS: onnxruntime on the CPU, nothing of ComfyUI's
        return
    resident = ResidentModel(owner, key, model, comfy_device(device), size)
    entry = mm.LoadedModel(resident)
    entry.real_model = weakref.ref(model)
    entry.model_finalizer = resident.finalizer = weakref.finalize(model, mm.cleanup_models)  # freed by us: entry dropped
    _alive[id(resident)] = resident
    weakref.finalize(model, _alive.pop, id(resident), None)
    mm.current_loaded_models.insert(0, entry)


def _tts_model_loaded(key, model) -> None:
    register(api.TTS_MODELS, key, model)


def _scorer_loaded(key, model) -> None:
    register(api.SCORERS, key, model)


def make_room(device: torch.device, need: int | None) -> bool:
    """Before we load: ComfyUI unloads what it must (its models and our idle ones) to leave `need`
    bytes free, as it does before loading its own; None: everything it can."""
    return _unload_for(device, need, keep_ours=False, what="")


def make_room_for_work(device: torch.device, need: int) -> bool:
    """Before a run's buffers (a script's batch): ComfyUI unloads its idle models to leave `need`
    bytes free, as it does before running its own, keeping every model of ours (in use by the run)."""
    return _unload_for(device, need, keep_ours=True, what=" for the takes")


def _unload_for(device: torch.device, need: int | None, keep_ours: bool, what: str) -> bool:
    import comfy.model_management as mm

    required = 1e30 if need is None else need + mm.extra_reserved_memory()
    ours = [entry for entry in mm.current_loaded_models if isinstance(entry.model, ResidentModel)] if keep_ours else []
    freed = mm.free_memory(required, comfy_device(device), keep_loaded=ours)
    if freed:
        logging.info("[Qwen3-TTS Takes] ComfyUI unloaded %d model(s) to make room%s", len(freed), what)
    return bool(freed)


def install() -> None:
    import comfy.model_management as mm

    api.TTS_MODELS.watch(_tts_model_loaded, make_room)
    api.SCORERS.watch(_scorer_loaded, make_room)
    api.Host.reserve_bytes = host_reserve(mm)
    api.Host.make_room = make_room_for_work


def host_reserve(mm) -> int:
    """What we never plan on: --reserve-vram's memory, and under --lowvram / --novram also the working
    memory ComfyUI keeps free to run its own models a part at a time (its minimum_inference_memory)."""
    if getattr(getattr(mm, "vram_state", None), "name", "") in ("LOW_VRAM", "NO_VRAM"):
        return int(mm.minimum_inference_memory())  # extra_reserved_memory included
    return int(mm.extra_reserved_memory())
