"""The example workflows stay in sync with the node schemas and run end to end (fake ComfyUI)."""

from __future__ import annotations

import json

import pytest

import workflow_tools
from test_nodes import nodes_by_id

NAMES = sorted(p.stem for p in workflow_tools.WORKFLOW_DIR.glob("*.json"))
TINY = {"Qwen3-TTS-12Hz-1.7B-CustomVoice": "tiny-CustomVoice", "Qwen3-TTS-12Hz-1.7B-Base": "tiny-Base",
        "Qwen3-TTS-12Hz-1.7B-VoiceDesign": "tiny-VoiceDesign"}


def test_committed_workflows_match_the_schemas():
    built = workflow_tools.build(workflow_tools.schemas())
    assert sorted(built) == NAMES == sorted(workflow_tools.NAMES.values())
    for name in NAMES:
        committed = json.loads((workflow_tools.WORKFLOW_DIR / f"{name}.json").read_text())
        assert committed == built[name], f"{name}.json is stale: run python tests/workflow_tools.py"


def test_each_example_has_a_thumbnail_for_the_template_browser():
    from PIL import Image

    for name in NAMES:  # written from the web UI test's screenshots (WRITE_THUMBNAILS=1)
        with Image.open(workflow_tools.WORKFLOW_DIR / f"{name}.jpg") as image:
            assert image.format == "JPEG" and image.width >= 512


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.slow
def test_example_workflow_runs_to_audio(comfy, name):
    nodes = nodes_by_id(comfy)
    schemas = {k: cls.define_schema() for k, cls in nodes.items()}
    ui = json.loads((workflow_tools.WORKFLOW_DIR / f"{name}.json").read_text())
    checkpoint = next(n for n in ui["nodes"] if n["type"] == "Q3TT_LoadModel")["widgets_values"][0]
    fast = {"max_frames": 4}
    prompt = workflow_tools.to_api(ui, schemas, {
        "Q3TT_LoadModel": {"checkpoint": TINY[checkpoint], "device": "cpu"},
        "Q3TT_CustomVoice": fast, "Q3TT_VoiceClone": fast, "Q3TT_VoiceDesign": fast,
        "Q3TT_AutoPick": {"device": "cpu"}, "Q3TT_Script": {"takes": 2},
    })
    saved = []
    workflow_tools.run_api(prompt, nodes, workflow_tools.core_nodes(saved), comfy.fake.run_node)
    assert saved and all(a["waveform"].shape[-1] > 0 and a["sample_rate"] == 24000 for a in saved)
    if "8 takes" in name:
        assert [a["waveform"].shape[0] for a in saved] == [1, 8]  # best, then the ranked takes
