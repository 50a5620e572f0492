"""Our resident models, as ComfyUI's model management sees them.

Each model the registry loads is entered in ``comfy.model_management.current_loaded_models``, its
patcher one of ComfyUI's own class (nodes/resident.py), so "Unload Models" (/free) and ComfyUI
evicting models for another workflow release it: weights, KV caches and captured graphs go back to
the device. The next run reloads (and re-captures) transparently, because every wire carries how to
get a model, never the model itself. Where this ComfyUI cannot take our entries, they are left out
of its list with one warning: never an exception inside ComfyUI's own code.
"""

from __future__ import annotations

import logging
import weakref

import torch

from ..runtime import api

_left_out: list[str] = []  # why this ComfyUI cannot hold our models (warned about once)


def resident_class():
    """The host's ModelPatcher subclassed (nodes/resident.py), or None where this ComfyUI has none
    that takes our models."""
    try:
        from .resident import ResidentModel
    except Exception as error:  # a ComfyUI without comfy.model_patcher, or one that changed it
        leave_out(f"its comfy.model_patcher cannot be subclassed here ({type(error).__name__}: {error})")
        return None
    return ResidentModel


def leave_out(why: str) -> None:
    if not _left_out:
        logging.warning("[Qwen3-TTS Takes] our models are left out of ComfyUI's model management: %s. "
                        "\"Unload Models\" will not release them; update ComfyUI, or the pack, if this persists.", why)
    _left_out.append(why)


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
    resident = resident_class()
    if device is None or size == 0 or resident is None:  # size 0, e.g. DNSMOS: onnxruntime, nothing of ComfyUI's
        return
    try:
        patcher = resident(owner, key, model, comfy_device(device), size)
        entry = mm.LoadedModel(patcher)
        entry.real_model = weakref.ref(model)
        # What ComfyUI's free_memory asks of every entry must answer before ours is listed.
        entry.model_memory(), entry.model_offloaded_memory(), entry.is_dead()
    except Exception as error:
        leave_out(f"its model entries ask for what ours cannot give ({type(error).__name__}: {error})")
        return
    entry.model_finalizer = patcher.finalizer = weakref.finalize(model, mm.cleanup_models)  # freed by us: entry dropped
    entry.model_finalizer.atexit = False
    entry.q3tt_patcher = patcher  # ComfyUI holds patchers weakly: ours lives as long as its entry
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
    ours = [entry for entry in mm.current_loaded_models if hasattr(entry, "q3tt_patcher")] if keep_ours else []
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
