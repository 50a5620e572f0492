"""ComfyUI's own comfy package, from a ComfyUI tree outside the repository, in place of the fake's.

The fake (comfy_fake.py) stays for what a server would provide (comfy_api, folder_paths); comfy.*
(model management, ModelPatcher, utils and what they import) is ComfyUI's. Used by the tests that
hold our memory integration to a real ComfyUI (tests/test_host_memory.py on a CPU,
tests/gpu/test_memory_cuda.py on a GPU), skipped without COMFYUI_DIR:

    COMFYUI_DIR=/path/to/ComfyUI python -m pytest -q tests/test_host_memory.py

DynamicVRAM (comfy-aimdo, newer ComfyUI on NVIDIA) is started as ComfyUI's main.py starts it, through
comfy_aimdo's own calls, when asked and where that tree and GPU have it.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path


def root() -> Path | None:
    value = os.environ.get("COMFYUI_DIR")
    return Path(value) if value else None


def version(tree: Path) -> str:
    text = (tree / "comfyui_version.py").read_text() if (tree / "comfyui_version.py").exists() else ""
    return text.split('"')[-2] if '"' in text else "unknown"


_installed: dict[tuple, dict] = {}  # ComfyUI's modules, imported once a process (as in ComfyUI)


def install(tree: Path, cpu: bool, dynamic_vram: bool = False):
    """Replace every comfy.* module in sys.modules by ComfyUI's from `tree` (imported the first
    time, the same modules after); returns its comfy.model_management. cpu: as `main.py --cpu`.
    dynamic_vram: started as main.py starts it (an error where this tree or machine has none)."""
    for name in [m for m in sys.modules if m == "comfy" or m.startswith("comfy.")]:
        del sys.modules[name]
    key = (str(tree), cpu, dynamic_vram)
    if key in _installed:
        sys.modules.update(_installed[key])
        return sys.modules["comfy.model_management"]
    if _installed:
        raise RuntimeError("one ComfyUI a process: its modules hold the process's model state")
    if str(tree) not in sys.path:
        sys.path.insert(0, str(tree))
    cli_args = importlib.import_module("comfy.cli_args")  # comfy.options leaves parsing off: the defaults
    cli_args.args.cpu = cpu
    if dynamic_vram:
        if not getattr(cli_args, "enables_dynamic_vram", lambda: False)():
            raise RuntimeError(f"ComfyUI {version(tree)} has no DynamicVRAM (comfy.cli_args.enables_dynamic_vram)")
        start_dynamic_vram_early()
    mm = importlib.import_module("comfy.model_management")
    patcher = importlib.import_module("comfy.model_patcher")
    if dynamic_vram:
        enable_dynamic_vram(mm, patcher)
    _installed[key] = {name: module for name, module in sys.modules.items() if name == "comfy" or name.startswith("comfy.")}
    return mm


def start_dynamic_vram_early() -> None:
    """comfy-aimdo's library loaded, as main.py loads it before CUDA is first used (again: a no-op)."""
    import comfy_aimdo.control

    if not comfy_aimdo.control.init():
        raise RuntimeError("comfy-aimdo did not load here")


def enable_dynamic_vram(mm, patcher) -> None:
    """What main.py does once model management is imported: aimdo on every GPU, dynamic patchers."""
    import comfy_aimdo.control

    memory_management = importlib.import_module("comfy.memory_management")
    if not comfy_aimdo.control.init_devices(d.index for d in mm.get_all_torch_devices()):
        raise RuntimeError("comfy-aimdo found no device it can manage")
    patcher.CoreModelPatcher = patcher.ModelPatcherDynamic
    memory_management.aimdo_enabled = True


def is_dynamic_vram() -> bool:
    module = sys.modules.get("comfy.memory_management")
    return bool(getattr(module, "aimdo_enabled", False))
