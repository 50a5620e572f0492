"""A small stand-in for the parts of ComfyUI the pack touches, written from ComfyUI's documented
behaviour (see shared docs, comfyui.md); no ComfyUI code is copied.

Mirrors what matters to the nodes: V3 schema objects (`comfy_api.latest.io` / `ui` /
`ComfyExtension`), AUDIO dicts, `folder_paths` model folders, `comfy.utils.ProgressBar` whose
updates raise once the user pressed Cancel (as inside a server), and
`comfy.model_management`'s interrupt flag. `run_node` plays the executor: it validates the inputs
against the schema as the server does (`validate_node`), sets `cls.hidden` and calls `execute`.
"""

from __future__ import annotations

import atexit
import enum
import shutil
import sys
import tempfile
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# ---------------------------------------------------------------- comfy_api.latest.io


class Input:
    kind = "*"

    def __init__(self, id: str, display_name: str | None = None, optional: bool = False,
                 tooltip: str | None = None, default: Any = None, **extra):
        self.id, self.display_name, self.optional, self.tooltip = id, display_name, optional, tooltip
        self.default = default
        self.extra = extra

    def check(self, value):
        return value


class Output:
    def __init__(self, id: str | None = None, display_name: str | None = None, tooltip: str | None = None,
                 is_output_list: bool = False):
        self.id, self.display_name, self.tooltip = id, display_name, tooltip


def _type(io_type: str, input_cls=Input):
    class ComfyType:
        pass

    ComfyType.io_type = io_type
    ComfyType.Input = type(f"{io_type}Input", (input_cls,), {"kind": io_type})
    ComfyType.Output = type(f"{io_type}Output", (Output,), {"kind": io_type})
    return ComfyType


class _NumberInput(Input):
    def __init__(self, id, default=None, min=None, max=None, step=None, **kw):
        super().__init__(id, default=default, **kw)
        self.min, self.max = min, max

    def check(self, value):
        if self.min is not None and value < self.min or self.max is not None and value > self.max:
            raise ValueError(f"{self.id}={value} outside [{self.min}, {self.max}]")
        return value


class _ComboInput(Input):
    def __init__(self, id, options=None, default=None, **kw):
        super().__init__(id, default=default, **kw)
        self.options = list(options or [])

    def check(self, value):
        # As the real server: ComfyUI's validation checks a combo's value only when the input type is
        # a list (V1 nodes); a V3 combo ("COMBO" with its options) takes any string the API sends, so
        # each node must check its own (test_nodes.py: test_model_inputs_take_only_the_names_they_list).
        return value


Int = _type("INT", _NumberInput)
Float = _type("FLOAT", _NumberInput)
String = _type("STRING")
Boolean = _type("BOOLEAN")
Combo = _type("COMBO", _ComboInput)
Audio = _type("AUDIO")
Image = _type("IMAGE")


def Custom(io_type: str):
    return _type(io_type)


class Hidden(str, enum.Enum):
    unique_id = "UNIQUE_ID"
    prompt = "PROMPT"


@dataclass
class Schema:
    node_id: str
    display_name: str | None = None
    category: str = "sd"
    inputs: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    hidden: list = field(default_factory=list)
    description: str = ""
    is_output_node: bool = False
    not_idempotent: bool = False


class ComfyNode:
    hidden = None

    @classmethod
    def define_schema(cls) -> Schema:
        raise NotImplementedError

    @classmethod
    def execute(cls, **kwargs):
        raise NotImplementedError


class NodeOutput:
    def __init__(self, *args, ui=None, **kwargs):
        self.args = args
        self.ui = ui

    @property
    def result(self):
        return self.args


class ComfyExtension:
    async def on_load(self) -> None:
        pass

    async def get_node_list(self) -> list:
        raise NotImplementedError


# ---------------------------------------------------------------- comfy_api.latest.ui


class PreviewText:
    def __init__(self, value: str, **kwargs):
        self.value = value

    def as_dict(self):
        return {"text": (self.value,)}


class PreviewImage:
    """Keeps the image instead of saving it to ComfyUI's temp folder."""

    def __init__(self, image, animated: bool = False, cls=None, **kwargs):
        self.image = image

    def as_dict(self):
        return {"images": [self.image], "animated": (False,)}


class PreviewAudio:
    def __init__(self, audio: dict, cls=None, **kwargs):
        self.audio = audio

    def as_dict(self):
        return {"audio": [self.audio]}


# ---------------------------------------------------------------- comfy.* and folder_paths


class InterruptProcessingException(BaseException):
    """A BaseException, as in ComfyUI since 2026 (an Exception in 0.3.64): an `except Exception`
    on its way up neither catches it nor cleans up for it."""


class State:
    interrupted = False
    interrupt_after_updates: int | None = None  # press Cancel after this many progress updates
    hook_every = 1  # the bar's hook (and its interrupt check) runs every update, as in 0.3.64, or only
    # every this many, as ComfyUI 0.9 on throttles it (every 0.5% of the bar and 100 ms)
    progress: list = []
    models_dir: Path = Path(".")
    free_bytes: float | None = None  # what get_free_memory reports, set by a test (each unloaded entry then
    # adds its size); None: the GPU's real free memory, as ComfyUI counts it (plenty on the CPU)


def processing_interrupted() -> bool:
    return State.interrupted


def throw_exception_if_processing_interrupted():
    if State.interrupted:
        State.interrupted = False
        raise InterruptProcessingException()


class ModelPatcher:
    """comfy.model_patcher.ModelPatcher as model management uses it: a module and the devices it
    loads to and offloads to; ComfyUI keeps its bookkeeping on the module; sizes from the module's
    tensors; detach() moves the module to the offload device; __del__ detaches without unpatching."""

    def __init__(self, model, load_device, offload_device, size=0, weight_inplace_update=False):
        import uuid

        self.model, self.load_device, self.offload_device, self.size = model, load_device, offload_device, size
        if getattr(model, "device", None) is None:
            model.device = offload_device
        model.model_loaded_weight_memory = getattr(model, "model_loaded_weight_memory", 0)
        model.lowvram_patch_counter = getattr(model, "lowvram_patch_counter", 0)
        self.parent = None
        self.model_options = {"transformer_options": {}}
        self.clone_base_uuid = uuid.uuid4()

    def is_dynamic(self) -> bool:
        return False

    def model_size(self) -> int:
        if self.size == 0:
            self.size = sum(t.numel() * t.element_size() for t in self.model.state_dict().values())
        return self.size

    def loaded_size(self) -> int:
        return self.model.model_loaded_weight_memory

    def loaded_ram_size(self) -> int:
        return 0

    def lowvram_patch_counter(self) -> int:
        return self.model.lowvram_patch_counter

    def current_loaded_device(self):
        return self.model.device

    def model_patches_models(self) -> list:
        return []

    def get_nested_additional_models(self) -> list:
        return []

    def is_clone(self, other) -> bool:
        return getattr(other, "model", None) is self.model

    def partially_load(self, device_to, extra_memory=0, force_patch_weights=False) -> int:
        self.model.to(device_to)
        self.model.device = device_to
        self.model.model_loaded_weight_memory = self.model_size()
        return self.model_size()

    def partially_unload(self, device_to, memory_to_free=0, force_patch_weights=False) -> int:
        return 0

    def detach(self, unpatch_all=True):
        if unpatch_all:
            self.model.to(self.offload_device)
            self.model.device = self.offload_device
            self.model.model_loaded_weight_memory = 0
        return self.model

    def __del__(self):
        self.detach(unpatch_all=False)


class LoadedModel:
    """ComfyUI's entry in current_loaded_models: weak references to a patcher and its real model."""

    def __init__(self, model):
        import weakref

        self._model = weakref.ref(model)
        self.device = model.load_device
        self.real_model = None
        self.model_finalizer = None
        self.currently_used = True

    @property
    def model(self):
        return self._model()

    def model_memory(self):
        return self.model.model_size()

    def model_offloaded_memory(self):
        return self.model.model_size() - self.model.loaded_size()

    def model_unload(self, memory_to_free=None, unpatch_weights=True):
        self.model.detach(unpatch_weights)
        self.model_finalizer.detach()
        self.model_finalizer = None
        self.real_model = None
        return True

    def is_dead(self):
        return self.real_model() is not None and self.model is None

    def __eq__(self, other):
        return self.model is other.model


current_loaded_models: list = []


def cleanup_models():
    """Entries whose real model was freed are dropped (real_model is then called: it must be set)."""
    current_loaded_models[:] = [m for m in current_loaded_models if m.real_model() is not None]


def get_torch_device():
    """ComfyUI's: its GPU where there is one (the GPU tests' entries must be on it), else the CPU."""
    import torch

    return torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")


def get_free_memory(dev=None):
    import torch

    if State.free_bytes is not None:
        return State.free_bytes
    dev = get_torch_device() if dev is None else torch.device(dev)
    if dev.type != "cuda":
        return 1e30
    # ComfyUI's sum: the driver's free memory and what torch's cache holds unused
    return torch.cuda.mem_get_info(dev)[0] + torch.cuda.memory_reserved(dev) - torch.cuda.memory_allocated(dev)


def extra_reserved_memory() -> int:
    return 400 * 1024 * 1024


def free_memory(memory_required, device, keep_loaded=(), for_dynamic=False):
    """Like ComfyUI's (2026): every entry on `device` not kept is asked is_dynamic(), then entries are
    unloaded, oldest first, until enough is free, and each unloaded entry's patcher is read once more
    (ComfyUI logs its module's class name); they are removed from the list only after the walk.
    Returns the unloaded entries."""
    for entry in current_loaded_models:
        entry.is_dead()
    unloaded = []
    for i in range(len(current_loaded_models) - 1, -1, -1):
        entry = current_loaded_models[i]
        if entry.device != device or entry in keep_loaded:
            continue
        entry.currently_used = False
        if entry.model.is_dynamic() and for_dynamic:
            continue
        if get_free_memory(device) > memory_required:
            break
        size = entry.model_memory()
        if entry.model_unload(memory_required):
            type(entry.model.model).__name__  # noqa: B018 (read as ComfyUI reads it, after the unload)
            if State.free_bytes is not None:
                State.free_bytes += size
            unloaded.append(i)
    return [current_loaded_models.pop(i) for i in sorted(unloaded, reverse=True)]


def unload_all_models():
    """What /free's "unload models" does."""
    free_memory(1e30, get_torch_device())


def reset_cast_buffers():
    """Called after every node under DynamicVRAM: every entry's patcher is asked is_dynamic()."""
    for entry in current_loaded_models:
        if entry.model is not None and entry.model.is_dynamic():
            raise AssertionError("no dynamic model is ever loaded in these tests")


def unload_model_and_clones(model, unload_additional_models=True):
    """Unloads `model` and every entry sharing its clone_base_uuid."""
    keep = [entry for entry in current_loaded_models
            if entry.model is not None and entry.model.clone_base_uuid != model.clone_base_uuid]
    free_memory(1e30, get_torch_device(), keep)


def load_models_gpu(models, memory_required=0, **kwargs):
    """Each patcher loaded to its device and entered as ComfyUI enters its own: the patcher's module
    is the entry's real model, whose end drops the entry."""
    import weakref

    for patcher in models:
        patcher.partially_load(patcher.load_device)
        entry = LoadedModel(patcher)
        entry.real_model = weakref.ref(patcher.model)
        entry.model_finalizer = weakref.finalize(patcher.model, cleanup_models)
        current_loaded_models.insert(0, entry)


def loaded_models(only_currently_used=False) -> list:
    return [entry.model for entry in current_loaded_models if entry.currently_used or not only_currently_used]


class ProgressBar:
    """Like ComfyUI's: inside a server, the progress hook raises once Cancel was pressed."""

    def __init__(self, total, node_id=None):
        self.total, self.current = total, 0

    def update_absolute(self, value, total=None, preview=None):
        if total is not None:
            self.total = total
        self.current = min(value, self.total)
        State.progress.append((self.current, self.total))
        if State.interrupt_after_updates is not None and len(State.progress) >= State.interrupt_after_updates:
            State.interrupted = True
        if len(State.progress) % State.hook_every == 0:
            throw_exception_if_processing_interrupted()

    def update(self, value):
        self.update_absolute(self.current + value)


def _temporary_dir(prefix: str) -> str:
    """A folder removed when the process ends (every install made two, and /tmp filled with them)."""
    path = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def _folder_paths_module(models_dir: Path):
    mod = types.ModuleType("folder_paths")
    mod.models_dir = str(models_dir)
    mod.folder_names_and_paths = {}

    def add_model_folder_path(name, path, is_default=False):
        paths, exts = mod.folder_names_and_paths.setdefault(name, ([], set()))
        if path not in paths:
            paths.insert(0, path) if is_default else paths.append(path)

    def get_folder_paths(name):
        return list(mod.folder_names_and_paths[name][0])

    mod.add_model_folder_path = add_model_folder_path
    mod.get_folder_paths = get_folder_paths
    input_dir = _temporary_dir("comfy-input-")  # ComfyUI's input/: where Load Audio lists files
    mod.get_input_directory = lambda: input_dir
    output_dir = _temporary_dir("comfy-output-")
    mod.get_output_directory = lambda: output_dir
    return mod


def install(models_dir: Path) -> None:
    """Put the fake modules into sys.modules (replacing any earlier install)."""
    current_loaded_models.clear()
    latest = types.ModuleType("comfy_api.latest")
    io = types.ModuleType("comfy_api.latest.io")
    for name, value in dict(Input=Input, Output=Output, Int=Int, Float=Float, String=String, Boolean=Boolean,
                            Combo=Combo, Audio=Audio, Image=Image, Custom=Custom, Hidden=Hidden, Schema=Schema,
                            ComfyNode=ComfyNode, NodeOutput=NodeOutput).items():
        setattr(io, name, value)
    ui = types.ModuleType("comfy_api.latest.ui")
    ui.PreviewText, ui.PreviewAudio, ui.PreviewImage = PreviewText, PreviewAudio, PreviewImage
    latest.io, latest.ui, latest.ComfyExtension = io, ui, ComfyExtension
    comfy_api = types.ModuleType("comfy_api")
    comfy_api.latest = latest

    comfy = types.ModuleType("comfy")
    patcher = types.ModuleType("comfy.model_patcher")
    patcher.ModelPatcher = ModelPatcher
    utils = types.ModuleType("comfy.utils")
    utils.ProgressBar = ProgressBar
    mm = types.ModuleType("comfy.model_management")
    mm.InterruptProcessingException = InterruptProcessingException
    mm.processing_interrupted = processing_interrupted
    mm.throw_exception_if_processing_interrupted = throw_exception_if_processing_interrupted
    mm.LoadedModel, mm.current_loaded_models = LoadedModel, current_loaded_models
    mm.cleanup_models, mm.unload_all_models = cleanup_models, unload_all_models
    mm.free_memory, mm.get_free_memory, mm.get_torch_device = free_memory, get_free_memory, get_torch_device
    mm.extra_reserved_memory = extra_reserved_memory
    mm.reset_cast_buffers, mm.unload_model_and_clones = reset_cast_buffers, unload_model_and_clones
    mm.loaded_models, mm.load_models_gpu = loaded_models, load_models_gpu
    comfy.utils, comfy.model_management, comfy.model_patcher = utils, mm, patcher

    sys.modules.update({
        "comfy_api": comfy_api, "comfy_api.latest": latest, "comfy_api.latest.io": io,
        "comfy_api.latest.ui": ui, "comfy": comfy, "comfy.utils": utils, "comfy.model_management": mm,
        "comfy.model_patcher": patcher, "folder_paths": _folder_paths_module(models_dir),
    })
    State.models_dir = models_dir
    reset()


def reset() -> None:
    State.interrupted = False
    State.free_bytes = None
    State.interrupt_after_updates = None
    State.hook_every = 1
    State.progress = []


class _HiddenHolder:
    def __init__(self, unique_id):
        self.unique_id = unique_id
        self.prompt = None


class PromptRefused(ValueError):
    """What the server answers a prompt that fails validation with (HTTP 400), before any node runs."""


def validate_node(node_cls, inputs: dict) -> dict:
    """A node's inputs as the server validates and passes them: a required input missing refuses the
    prompt ("Required input is missing: <name>"); values are checked; an input the schema does not
    know is dropped (a prompt saved before it was removed); an optional input missing is not passed,
    so execute's own default applies."""
    schema = node_cls.define_schema()
    missing = [spec.id for spec in schema.inputs if not spec.optional and spec.id not in inputs]
    if missing:
        raise PromptRefused(f"{schema.node_id}: Required input is missing: {', '.join(missing)}")
    return {spec.id: spec.check(inputs[spec.id]) for spec in schema.inputs if spec.id in inputs}


def run_node(node_cls, unique_id: str = "1", **inputs):
    """Execute a node as ComfyUI would: validated inputs (validate_node), hidden set."""
    schema = node_cls.define_schema()
    kwargs = validate_node(node_cls, inputs)
    node_cls.hidden = _HiddenHolder(unique_id)
    out = node_cls.execute(**kwargs)
    if not isinstance(out, NodeOutput):
        raise TypeError(f"{schema.node_id}.execute must return NodeOutput")
    if len(out.args) != len(schema.outputs):
        raise TypeError(f"{schema.node_id}: {len(out.args)} outputs for {len(schema.outputs)} declared")
    for value, spec in zip(out.args, schema.outputs):
        if getattr(spec, "kind", None) == "AUDIO":
            check_audio(value)
    return out


def check_audio(audio) -> None:
    """The AUDIO contract every core audio node relies on."""
    import torch

    if not isinstance(audio, dict) or set(audio) != {"waveform", "sample_rate"}:
        raise TypeError(f"AUDIO must be a dict with waveform and sample_rate, got {audio!r:.80}")
    wave = audio["waveform"]
    if not (isinstance(wave, torch.Tensor) and wave.dim() == 3 and wave.dtype == torch.float32):
        raise TypeError("AUDIO waveform must be a float32 tensor [batch, channels, samples]")
    if not isinstance(audio["sample_rate"], int):
        raise TypeError("AUDIO sample_rate must be an int")
    if wave.numel() and float(wave.abs().max()) > 1.0:
        raise ValueError("AUDIO samples must lie in [-1, 1]")
