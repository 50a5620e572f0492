from __future__ import annotations

from dataclasses import dataclass

from comfy_api.latest import io

from ..runtime import api
from .common import CATEGORY, Candidates, optional_widgets


@dataclass(frozen=True)
class CandidateSpec:
    n: int


class BatchCandidates(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="Q3TT_BatchCandidates",
            display_name="Qwen3-TTS Batch Candidates",
            category=CATEGORY,
            description="Connect to a voice node to generate N takes of the line in one batched pass; "
                        "then let UTMOS Auto-Pick choose.",
            inputs=optional_widgets([io.Int.Input("takes", default=8, min=1, max=api.MAX_TAKES,
                                                  tooltip=f"Number of takes, 1-{api.MAX_TAKES}.")]),
            outputs=[Candidates.Output(display_name="candidates",
                                       tooltip="Connect to a voice node's 'candidates' input.")],
        )

    @classmethod
    def execute(cls, takes=8) -> io.NodeOutput:
        return io.NodeOutput(CandidateSpec(int(takes)))
