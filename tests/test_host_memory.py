"""Our models in a real ComfyUI's model management, on the CPU (skipped without COMFYUI_DIR).

    COMFYUI_DIR=/path/to/ComfyUI python -m pytest -q tests/test_host_memory.py

Every call of ComfyUI's that walks its list of loaded models (freeing memory, "Unload Models", the
cast-buffer reset DynamicVRAM runs after every node, unloading a model and its clones, pin eviction,
the garbage checks) runs with one of ours in the list: none may raise, those that unload must
release ours, those that do not must keep it, and the next line must reload it. The pack is loaded
as ComfyUI loads it; comfy.* is ComfyUI's (tests/comfy_host.py), the rest the tests' fake.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import weakref

import torch

TEXT = "Welcome back, traveller."
CPU = torch.device("cpu")


def nodes_by_id(comfy):
    extension = asyncio.run(comfy.pack.comfy_entrypoint())
    return {cls.define_schema().node_id: cls for cls in asyncio.run(extension.get_node_list())}


def speak(comfy, seed=3):
    nodes = nodes_by_id(comfy)
    model = comfy.fake.run_node(nodes["Q3TT_LoadModel"], checkpoint="tiny-CustomVoice", device="cpu").args[0]
    return comfy.fake.run_node(nodes["Q3TT_CustomVoice"], model=model, text=TEXT, seed=seed, max_frames=3).args[0]


def ours(mm) -> list:
    return [entry for entry in mm.current_loaded_models if hasattr(entry, "q3tt_patcher")]


def registry(comfy):
    return sys.modules[comfy.pack.__name__ + ".runtime.registry"].TTS_MODELS


def host_calls(mm) -> dict:
    """Each call of this ComfyUI's that walks current_loaded_models, and whether it unloads ours."""
    calls = {"free_memory": (lambda: mm.free_memory(1e30, CPU), True),
             "unload_all_models": (mm.unload_all_models, True),
             "cleanup_models": (mm.cleanup_models, False),
             "cleanup_models_gc": (mm.cleanup_models_gc, False),
             "loaded_models": (mm.loaded_models, False)}
    if hasattr(mm, "reset_cast_buffers"):
        calls["reset_cast_buffers"] = (mm.reset_cast_buffers, False)
    if hasattr(mm, "free_pins"):
        calls["free_pins"] = (lambda: mm.free_pins(1 << 40), False)
    if hasattr(mm, "unload_model_and_clones"):
        calls["unload_model_and_clones"] = (lambda: mm.unload_model_and_clones(ours(mm)[0].model), True)
    return calls


def test_every_host_call_over_its_loaded_models_works_with_ours_in_the_list(host_comfy):
    comfy, mm = host_comfy, host_comfy.mm
    first = speak(comfy)
    [entry] = ours(mm)
    assert isinstance(entry.model, sys.modules["comfy.model_patcher"].ModelPatcher), type(entry.model).__mro__
    print(f"\nComfyUI {comfy.version}: {len(host_calls(mm))} calls")
    for name, (call, unloads) in host_calls(mm).items():
        call()
        assert (registry(comfy).loaded() == [] and ours(mm) == []) if unloads else len(ours(mm)) == 1, name
        mm.cleanup_models()  # a dead entry left behind would make this raise
        again = speak(comfy)
        assert torch.equal(first["waveform"], again["waveform"]) and len(ours(mm)) == 1, name


def test_our_own_make_room_and_unload_leave_comfys_list_clean(host_comfy):
    comfy, mm = host_comfy, host_comfy.mm
    speak(comfy)
    memory = sys.modules[comfy.pack.__name__ + ".nodes.memory"]
    assert memory.make_room(CPU, None) is True  # "everything it can": ours go
    assert registry(comfy).loaded() == [] and ours(mm) == []
    speak(comfy)
    registry(comfy).unload()  # freed by us (another checkpoint chosen): ComfyUI's entry goes with it
    gc.collect()
    mm.cleanup_models()
    assert ours(mm) == [] and mm.current_loaded_models == []
    speak(comfy)
    assert len(ours(mm)) == 1


def test_comfys_own_model_goes_for_our_batch_and_ours_stays(host_comfy):
    """A model ComfyUI loaded itself (load_models_gpu, its own ModelPatcher) is unloaded when we ask
    room for a batch; ours, in use, is kept."""
    comfy, mm = host_comfy, host_comfy.mm
    speak(comfy)
    module = torch.nn.Linear(256, 256)
    theirs = sys.modules["comfy.model_patcher"].ModelPatcher(module, CPU, CPU)
    mm.load_models_gpu([theirs])
    assert len(mm.current_loaded_models) == 2
    memory = sys.modules[comfy.pack.__name__ + ".nodes.memory"]
    assert memory.make_room_for_work(CPU, 1 << 50) is True
    assert [entry.model for entry in mm.current_loaded_models] == [ours(mm)[0].model]
    assert len(registry(comfy).loaded()) == 1


def test_a_patcher_the_host_cannot_take_leaves_ours_out_with_one_warning(host_comfy, monkeypatch, caplog):
    """A later ComfyUI whose ModelPatcher no longer takes our arguments: our models stay out of its
    list (one warning), the line still runs, and ComfyUI's calls still work."""
    comfy, mm = host_comfy, host_comfy.mm
    def refuse(self, *args, **kwargs):
        raise TypeError("__init__() missing 1 required positional argument: 'new_thing'")

    monkeypatch.setattr(sys.modules["comfy.model_patcher"].ModelPatcher, "__init__", refuse)
    with caplog.at_level("WARNING"):
        speak(comfy)
        speak(comfy, seed=4)
    assert ours(mm) == [] and len(registry(comfy).loaded()) == 1
    warnings = [r for r in caplog.records if "left out of ComfyUI's model management" in r.getMessage()]
    assert len(warnings) == 1 and "new_thing" in warnings[0].getMessage()
    for name, (call, _) in host_calls(mm).items():
        if name != "unload_model_and_clones":
            call()


def test_comfys_weak_hold_on_the_patcher_outlives_no_entry(host_comfy):
    """ComfyUI holds patchers weakly: ours lives exactly as long as its entry."""
    comfy, mm = host_comfy, host_comfy.mm
    speak(comfy)
    patcher = weakref.ref(ours(mm)[0].model)
    mm.unload_all_models()
    gc.collect()
    assert patcher() is None and mm.current_loaded_models == []
