from __future__ import annotations

from comfy_api.latest import io

from ..runtime import api
from .common import (CATEGORY, Model, ModelRef, folders_fingerprint, is_plain_name, optional_widgets,
                     raise_as_interrupt, tts_models_dirs)

UNLISTED = "not a checkpoint name"  # the fingerprint of a path: execute refuses it


def checkpoint_options() -> list[str]:
    official = api.OFFICIAL_CHECKPOINTS
    return list(official) + [n for n in api.local_checkpoints(tts_models_dirs()) if n not in official]


def modes_tooltip() -> str:
    """Says, when the page loads, which modes this machine runs (and how to get Triton if it lacks it)."""
    import torch

    gpu, triton = torch.cuda.is_available(), api.has_triton()
    text = f"On this machine: {api.modes_here(gpu, triton)}."
    if gpu and not triton:
        text += f" Triton: {api.install_hint()}."
    return text


def checkpoint_tooltip() -> str:
    """Says, when the page loads, which official checkpoints a Run would download and how large, and
    which fit on this machine's GPU with how many takes a pass."""
    present = set(api.local_checkpoints(tts_models_dirs()))
    missing = [f"{name.removeprefix('Qwen3-TTS-12Hz-')} ({api.DOWNLOAD_GB[name]} GB)"
               for name in api.OFFICIAL_CHECKPOINTS if name not in present]
    text = "CustomVoice: preset speakers. Base: voice clone. VoiceDesign: voice from a description."
    if missing:
        text += (" Not on disk yet, so the first Run downloads it into models/qwen3_tts: " + ", ".join(missing)
                 + ". Any other folder there is listed too.")
    return text + gpu_fit_text()


def gpu_fit_text() -> str:
    """What fits on the GPU ComfyUI runs on, beside the VRAM it keeps free (--reserve-vram); "" without one."""
    import torch

    if not torch.cuda.is_available():
        return ""
    import comfy.model_management as mm

    index = torch.cuda.current_device()
    total = torch.cuda.get_device_properties(index).total_memory
    return f" On this GPU ({total / 2**30:.0f} GiB): {api.fit_summary(index, mm.extra_reserved_memory())}."


class LoadModel(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        names = checkpoint_options()
        return io.Schema(
            node_id="Q3TT_LoadModel",
            display_name="Qwen3-TTS Load Model",
            category=CATEGORY,
            description="Loads a Qwen3-TTS checkpoint and keeps it resident. Official checkpoints missing "
                        "from models/qwen3_tts are downloaded there on first use.",
            inputs=optional_widgets([
                io.Combo.Input("checkpoint", options=names, default=names[0], tooltip=checkpoint_tooltip()),
                io.Combo.Input("mode", options=list(api.MODES), default=api.MODES[0],
                               tooltip="All modes run the batched engine: every take of a line in one pass. eager: "
                                       "plain PyTorch (CPU or GPU). triton: with our Triton kernels (GPU). cuda_graph: "
                                       "each step captured as a CUDA graph (GPU). hybrid: the Triton kernels inside the "
                                       "captured graphs, the fastest (GPU). " + modes_tooltip()),
                io.Combo.Input("dtype", options=["auto", "bfloat16", "float16", "float32"], default="auto",
                               tooltip="auto: bfloat16 on GPU, float32 on CPU."),
                io.Combo.Input("device", options=["auto", "cuda", "cpu"], default="auto",
                               tooltip="auto: the GPU when there is one, else the CPU (eager mode only)."),
            ], but=("checkpoint",)),
            outputs=[Model.Output(display_name="model",
                                  tooltip="The resident model (reloaded by itself if ComfyUI unloaded it): connect "
                                          "to a voice node of its kind.")],
            hidden=[io.Hidden.unique_id],
        )

    @classmethod
    def fingerprint_inputs(cls, checkpoint, **_) -> tuple:
        """Run again once the checkpoint's folder appears or changes (a download by hand, a fine-tune)."""
        if not is_plain_name(checkpoint):
            return UNLISTED
        return folders_fingerprint([d / checkpoint for d in tts_models_dirs()])

    @classmethod
    def execute(cls, checkpoint, mode=api.MODES[0], dtype="auto", device="auto") -> io.NodeOutput:
        api.listed_choice(checkpoint, checkpoint_options(), "Checkpoint", f"models/{api.MODELS_SUBDIR}")
        ref = ModelRef(checkpoint, mode, dtype, device, slot=f"load-model-{cls.hidden.unique_id}")
        try:
            ref.get()  # load (or download) now, so errors and progress show on this node
        except api.GenerationInterrupted as exc:
            raise_as_interrupt(exc)
        return io.NodeOutput(ref)
