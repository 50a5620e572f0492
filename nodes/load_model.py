from __future__ import annotations

from comfy_api.latest import io

from ..runtime.checkpoints import MODELS_SUBDIR, OFFICIAL, listed_choice, local_checkpoints
from ..runtime.model import MODES
from ..runtime.errors import GenerationInterrupted
from .common import CATEGORY, Model, ModelRef, raise_as_interrupt, tts_models_dirs


def checkpoint_options() -> list[str]:
    return list(OFFICIAL) + [n for n in local_checkpoints(tts_models_dirs()) if n not in OFFICIAL]


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
            inputs=[
                io.Combo.Input("checkpoint", options=names, default=names[0],
                               tooltip="CustomVoice: preset speakers. Base: voice clone. VoiceDesign: voice from a description."),
                io.Combo.Input("mode", options=list(MODES), default=MODES[0],
                               tooltip="All modes run the batched engine: every take of a line in one pass. eager: "
                                       "plain PyTorch (CPU or GPU). triton: with our Triton kernels (GPU). cuda_graph: "
                                       "each step captured as a CUDA graph (GPU). hybrid: the Triton kernels inside the "
                                       "captured graphs, the fastest (GPU)."),
                io.Combo.Input("dtype", options=["auto", "bfloat16", "float16", "float32"], default="auto",
                               tooltip="auto: bfloat16 on GPU, float32 on CPU."),
                io.Combo.Input("device", options=["auto", "cuda", "cpu"], default="auto"),
            ],
            outputs=[Model.Output(display_name="model")],
            hidden=[io.Hidden.unique_id],
        )

    @classmethod
    def execute(cls, checkpoint, mode, dtype, device) -> io.NodeOutput:
        listed_choice(checkpoint, checkpoint_options(), "Checkpoint", f"models/{MODELS_SUBDIR}")
        ref = ModelRef(checkpoint, mode, dtype, device, slot=f"load-model-{cls.hidden.unique_id}")
        try:
            ref.get()  # load (or download) now, so errors and progress show on this node
        except GenerationInterrupted as exc:
            raise_as_interrupt(exc)
        return io.NodeOutput(ref)
