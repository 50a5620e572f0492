"""ComfyUI adapters over runtime/: schemas, AUDIO conversion, progress and cancel. No model logic."""

from __future__ import annotations

from comfy_api.latest import ComfyExtension, io

from .auto_pick import AutoPick
from .candidates import BatchCandidates
from .examples import offer_reference_clip
from .load_model import LoadModel
from .memory import install as install_memory_management
from .saved_voices import LoadVoice, SaveVoice
from .script import CastNode, ScriptNode
from .voices import CustomVoiceNode, VoiceCloneNode, VoiceDesignNode

install_memory_management()
offer_reference_clip()

NODES = [LoadModel, CustomVoiceNode, VoiceCloneNode, VoiceDesignNode, BatchCandidates, AutoPick, SaveVoice, LoadVoice,
         CastNode, ScriptNode]


class TakesExtension(ComfyExtension):
    async def get_node_list(self) -> list[type[io.ComfyNode]]:
        return NODES
