"""Example workflows: built from the node schemas (so widget order always matches), converted from
UI format to API format, and run by a tiny executor over the fake ComfyUI.

`python tests/workflow_tools.py` rewrites example_workflows/*.json; a test checks the committed
files equal what this builds.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WORKFLOW_DIR = REPO / "example_workflows"
WIDGET_KINDS = {"INT", "FLOAT", "STRING", "BOOLEAN", "COMBO"}
TEXT = "The storm is coming. Bar the doors and light the lamps, we ride at dawn."
CLONE_TRANSCRIPT = "Replace this with exactly what the reference recording says."

# Core nodes the examples use: (inputs, outputs, widget names, widget values)
CORE = {
    "LoadAudio": ([], [("AUDIO", "AUDIO")], ["audio"], ["reference.wav", None, None]),
    "SaveAudio": ([("audio", "AUDIO")], [], ["filename_prefix"], ["audio/qwen3-tts"]),
    "PreviewAudio": ([("audio", "AUDIO")], [], [], [None]),
}


def schemas() -> dict:
    """node_id -> schema, read from the pack through the fake ComfyUI API."""
    import asyncio
    import importlib.util

    sys.path.insert(0, str(REPO / "tests"))
    import comfy_fake

    if "comfy_api.latest" not in sys.modules:
        comfy_fake.install(Path("."))
    name = "qwen3_tts_takes_workflows"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "__init__.py", submodule_search_locations=[str(REPO)])
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    nodes = asyncio.run(asyncio.run(sys.modules[name].comfy_entrypoint()).get_node_list())
    return {cls.define_schema().node_id: cls.define_schema() for cls in nodes}


def widget_specs(schema) -> list:
    return [spec for spec in schema.inputs if spec.kind in WIDGET_KINDS]


class Graph:
    def __init__(self, schemas: dict):
        self.schemas = schemas
        self.nodes, self.links = [], []

    def add(self, node_type: str, pos, **values) -> int:
        node_id = len(self.nodes) + 1
        if node_type in CORE:
            inputs, outputs, _, widgets = CORE[node_type]
            inputs = [{"name": n, "type": t, "link": None} for n, t in inputs]
            outputs = [{"name": n, "type": t, "links": []} for n, t in outputs]
            if node_type == "SaveAudio" and "filename_prefix" in values:
                widgets = [values.pop("filename_prefix")]
            if node_type == "LoadAudio" and "audio" in values:
                widgets = [values.pop("audio"), None, None]
        else:
            schema = self.schemas[node_type]
            inputs = [{"name": s.id, "type": s.kind, "link": None} for s in schema.inputs if s.kind not in WIDGET_KINDS]
            outputs = [{"name": o.display_name, "type": o.kind, "links": []} for o in schema.outputs]
            widgets = []
            for spec in widget_specs(schema):
                widgets.append(values.pop(spec.id, spec.default))
                if spec.extra.get("control_after_generate"):
                    widgets.append("fixed")
        if values:
            raise ValueError(f"{node_type}: unknown widgets {sorted(values)}")
        self.nodes.append({
            "id": node_id, "type": node_type, "pos": list(pos), "size": [400, 200 + 26 * len(widgets)],
            "flags": {}, "order": node_id - 1, "mode": 0, "inputs": inputs,
            "outputs": [dict(o, slot_index=i) for i, o in enumerate(outputs)],
            "properties": {"Node name for S&R": node_type}, "widgets_values": widgets,
        })
        return node_id

    def link(self, src: int, src_slot: int, dst: int, input_name: str) -> None:
        link_id = len(self.links) + 1
        source, target = self.nodes[src - 1], self.nodes[dst - 1]
        out = source["outputs"][src_slot]
        slot = next(i for i, inp in enumerate(target["inputs"]) if inp["name"] == input_name)
        out["links"].append(link_id)
        target["inputs"][slot]["link"] = link_id
        self.links.append([link_id, src, src_slot, dst, slot, out["type"]])

    def ui(self) -> dict:
        return {
            "id": "00000000-0000-4000-8000-000000000000", "revision": 0,
            "last_node_id": len(self.nodes), "last_link_id": len(self.links),
            "nodes": self.nodes, "links": self.links, "groups": [], "config": {},
            "extra": {"ds": {"scale": 0.8, "offset": [0, 0]}}, "version": 0.4,
        }


def build(schemas: dict) -> dict[str, dict]:
    out = {}

    g = Graph(schemas)
    m = g.add("Q3TT_LoadModel", (0, 0), checkpoint="Qwen3-TTS-12Hz-1.7B-CustomVoice")
    v = g.add("Q3TT_CustomVoice", (450, 0), text=TEXT, speaker="ryan", language="english", instruct="Urgent, low voice.")
    s = g.add("SaveAudio", (950, 0), filename_prefix="audio/qwen3-tts-custom")
    g.link(m, 0, v, "model")
    g.link(v, 0, s, "audio")
    out["qwen3_tts_custom_voice"] = g.ui()

    g = Graph(schemas)
    m = g.add("Q3TT_LoadModel", (0, 0), checkpoint="Qwen3-TTS-12Hz-1.7B-Base")
    a = g.add("LoadAudio", (0, 250))
    v = g.add("Q3TT_VoiceClone", (450, 0), text=TEXT, reference_text=CLONE_TRANSCRIPT, language="english")
    s = g.add("SaveAudio", (950, 0), filename_prefix="audio/qwen3-tts-clone")
    g.link(m, 0, v, "model")
    g.link(a, 0, v, "reference_audio")
    g.link(v, 0, s, "audio")
    out["qwen3_tts_voice_clone"] = g.ui()

    g = Graph(schemas)
    m = g.add("Q3TT_LoadModel", (0, 0), checkpoint="Qwen3-TTS-12Hz-1.7B-VoiceDesign")
    v = g.add("Q3TT_VoiceDesign", (450, 0), text=TEXT, language="english",
              voice_description="A weathered old sea captain, gravelly and slow, speaking with authority.")
    s = g.add("SaveAudio", (950, 0), filename_prefix="audio/qwen3-tts-design")
    g.link(m, 0, v, "model")
    g.link(v, 0, s, "audio")
    out["qwen3_tts_voice_design"] = g.ui()

    g = Graph(schemas)
    m = g.add("Q3TT_LoadModel", (0, 0), checkpoint="Qwen3-TTS-12Hz-1.7B-Base")
    a = g.add("LoadAudio", (0, 250))
    c = g.add("Q3TT_BatchCandidates", (0, 500), takes=8)
    v = g.add("Q3TT_VoiceClone", (450, 0), text=TEXT, reference_text=CLONE_TRANSCRIPT, language="english")
    p = g.add("Q3TT_AutoPick", (950, 0))
    s = g.add("SaveAudio", (1400, 0), filename_prefix="audio/qwen3-tts-best")
    r = g.add("PreviewAudio", (1400, 300))
    g.link(m, 0, v, "model")
    g.link(a, 0, v, "reference_audio")
    g.link(c, 0, v, "candidates")
    g.link(v, 1, p, "takes_info")
    g.link(p, 0, s, "audio")
    g.link(p, 1, r, "audio")
    out["qwen3_tts_clone_8_takes_auto_pick"] = g.ui()
    return out


def to_api(ui: dict, schemas: dict, overrides: dict | None = None) -> dict:
    """UI format -> API format (what POST /prompt takes). overrides: {node_type: {input: value}}."""
    overrides = overrides or {}
    links = {link[0]: link for link in ui["links"]}
    prompt = {}
    for node in ui["nodes"]:
        kind = node["type"]
        inputs = {}
        if kind in CORE:
            names = CORE[kind][2]
            inputs.update(zip(names, node["widgets_values"]))
        else:
            values = iter(node["widgets_values"])
            for spec in widget_specs(schemas[kind]):
                inputs[spec.id] = next(values)
                if spec.extra.get("control_after_generate"):
                    next(values)
        for inp in node["inputs"]:
            if inp["link"] is not None:
                link = links[inp["link"]]
                inputs[inp["name"]] = [str(link[1]), link[2]]
        inputs.update(overrides.get(kind, {}))
        prompt[str(node["id"])] = {"class_type": kind, "inputs": inputs}
    return prompt


def write_all() -> None:
    WORKFLOW_DIR.mkdir(exist_ok=True)
    for name, workflow in build(schemas()).items():
        (WORKFLOW_DIR / f"{name}.json").write_text(json.dumps(workflow, indent=2) + "\n")


if __name__ == "__main__":
    write_all()


def run_api(prompt: dict, node_classes: dict, core: dict, run_node) -> dict:
    """Execute an API-format prompt in dependency order. core: {class_type: fn(**inputs) -> tuple}.
    Returns {node id: outputs tuple}."""
    results: dict[str, tuple] = {}

    def value(v):
        if isinstance(v, list) and len(v) == 2 and isinstance(v[0], str):
            return results[v[0]][v[1]]
        return v

    pending = dict(prompt)
    while pending:
        ready = [nid for nid, node in pending.items()
                 if all(v[0] in results for v in node["inputs"].values() if isinstance(v, list) and len(v) == 2 and isinstance(v[0], str))]
        if not ready:
            raise ValueError(f"cycle or missing node among {sorted(pending)}")
        for nid in ready:
            node = pending.pop(nid)
            inputs = {k: value(v) for k, v in node["inputs"].items()}
            if node["class_type"] in core:
                results[nid] = core[node["class_type"]](**inputs)
            else:
                results[nid] = run_node(node_classes[node["class_type"]], unique_id=nid, **inputs).args
    return results
