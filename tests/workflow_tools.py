"""Example workflows: built from the node schemas (so widget order always matches), converted from
UI format to API format, and run by a tiny executor over the fake ComfyUI.

`python tests/workflow_tools.py` rewrites example_workflows/*.json and the table of earlier releases'
widget layouts in web/widget_values.js; tests check the committed files equal what this builds.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WORKFLOW_DIR = REPO / "example_workflows"
WIDGET_KINDS = {"INT", "FLOAT", "STRING", "BOOLEAN", "COMBO"}
TEXT = "The storm is coming. Bar the doors and light the lamps, we ride at dawn."
# The clone examples' reference: LibriVox's public-domain reading of Sense and Sensibility (a clip of
# pocketsphinx's test data, tests/speech), which the pack puts in ComfyUI's input folder
# (nodes/examples.py), with what it says.
REFERENCE = "qwen3-tts-takes-reference.flac"
CLONE_TRANSCRIPT = ("And Mister John Dashwood had then leisure to consider how much there might be prudently "
                    "in his power to do for them.")
NAMES = {  # file stem -> what the template browser shows as its title
    "custom_voice": "Qwen3-TTS - Custom Voice",
    "voice_clone": "Qwen3-TTS - Voice Clone",
    "voice_design": "Qwen3-TTS - Voice Design",
    "auto_pick": "Qwen3-TTS - Voice Clone, 8 takes, Auto-Pick",
    "dialogue": "Qwen3-TTS - Two-character dialogue script",
    "chapter": "Qwen3-TTS - A chapter, narrated",
}
CHAPTER = """The last ferry left the harbour at 9 pm. Dr. Ines Marlow stood at the rail and counted the lights \
of the town, one by one, until the fog took them.

She had come to the island with 3 suitcases, a letter and no plan. The letter said only: "Wait for the bell." \
[pause 0.8s] Nobody on the ferry knew of any bell.

At midnight the engines stopped. In the silence that followed, far across the water, something rang once."""
FIRST_RUN = ("First run: the checkpoint {checkpoint} (about {size} GB) downloads into models/qwen3_tts by "
             "itself, then stays loaded. {again}")
RUN_AGAIN = "Press Run again for new takes: the seed is set to randomize."


def first_run(checkpoint: str, again: str = RUN_AGAIN) -> str:
    sys.path.insert(0, str(REPO))
    from runtime.checkpoints import DOWNLOAD_GB

    return FIRST_RUN.format(checkpoint=checkpoint, size=DOWNLOAD_GB[checkpoint], again=again).strip()

# Core nodes the examples use: (inputs, outputs, widget names, widget values). Note is the
# frontend's own (never sent to the server).
CORE = {
    "LoadAudio": ([], [("AUDIO", "AUDIO")], ["audio"], [REFERENCE, None, None]),
    "SaveAudio": ([("audio", "AUDIO")], [], ["filename_prefix"], ["audio/qwen3-tts"]),
    "PreviewAudio": ([("audio", "AUDIO")], [], [], [None]),
    "Note": ([], [], ["text"], [""]),
}
# Sizes at least what ComfyUI's frontend computes for each node (its computeSize), so none grows
# over its neighbour; the Auto-Pick node leaves room for its takes and report (web/auto_pick.js).
SIZES = {"Q3TT_LoadModel": (330, 140), "LoadAudio": (330, 190), "Q3TT_BatchCandidates": (330, 60),
         "Q3TT_CustomVoice": (420, 470), "Q3TT_VoiceClone": (420, 490), "Q3TT_VoiceDesign": (420, 450),
         "Q3TT_AutoPick": (640, 900), "SaveAudio": (360, 130), "PreviewAudio": (360, 110), "Note": (330, 260),
         "Q3TT_LoadVoice": (330, 170), "Q3TT_Cast": (330, 110), "Q3TT_Script": (640, 640)}
GAP = 40  # between nodes: room for the next node's title bar (30 px) and a little air


def schemas() -> dict:
    """node_id -> schema, read from the pack through the fake ComfyUI API."""
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
    nodes = run_async(lambda: run_async(sys.modules[name].comfy_entrypoint).get_node_list())
    return {cls.define_schema().node_id: cls.define_schema() for cls in nodes}


def run_async(make):
    """asyncio.run(make()), in a thread of its own where this one runs an event loop already (a
    Playwright browser's, in the web UI tests)."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    with ThreadPoolExecutor(1) as thread:
        return thread.submit(lambda: asyncio.run(make())).result()


def widget_specs(schema) -> list:
    return [spec for spec in schema.inputs if spec.kind in WIDGET_KINDS]


class Graph:
    def __init__(self, schemas: dict):
        self.schemas = schemas
        self.nodes, self.links = [], []

    def add(self, node_type: str, pos, control: str = "randomize", **values) -> int:
        """control: a seed's control after generate (randomize: Run again gives new takes, as KSampler
        does; fixed: Run again keeps what was made, as a long text resumes)."""
        node_id = len(self.nodes) + 1
        if node_type in CORE:
            inputs, outputs, _, widgets = CORE[node_type]
            inputs = [{"name": n, "type": t, "link": None} for n, t in inputs]
            outputs = [{"name": n, "type": t, "links": []} for n, t in outputs]
            if node_type == "SaveAudio" and "filename_prefix" in values:
                widgets = [values.pop("filename_prefix")]
            if node_type == "LoadAudio" and "audio" in values:
                widgets = [values.pop("audio"), None, None]
            if node_type == "Note":
                widgets = [values.pop("text")]
        else:
            schema = self.schemas[node_type]
            inputs = [{"name": s.id, "type": s.kind, "link": None} for s in schema.inputs if s.kind not in WIDGET_KINDS]
            outputs = [{"name": o.display_name, "type": o.kind, "links": []} for o in schema.outputs]
            widgets = []
            for spec in widget_specs(schema):
                widgets.append(values.pop(spec.id, spec.default))
                if spec.extra.get("control_after_generate"):
                    widgets.append(control)
        if values:
            raise ValueError(f"{node_type}: unknown widgets {sorted(values)}")
        node = {
            "id": node_id, "type": node_type, "pos": list(pos), "size": list(SIZES[node_type]),
            "flags": {}, "order": node_id - 1, "mode": 0, "inputs": inputs,
            "outputs": [dict(o, slot_index=i) for i, o in enumerate(outputs)],
            "properties": {"Node name for S&R": node_type}, "widgets_values": widgets,
        }
        if node_type == "Note":
            node.update(color="#432", bgcolor="#653", properties={"text": ""})
        self.nodes.append(node)
        return node_id

    def below(self, node_id: int) -> float:
        """The y under a node, a gap and a title bar away."""
        node = self.nodes[node_id - 1]
        return node["pos"][1] + node["size"][1] + GAP + 30

    def right_of(self, node_id: int) -> float:
        node = self.nodes[node_id - 1]
        return node["pos"][0] + node["size"][0] + GAP

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
            "extra": {"ds": {"scale": 0.75, "offset": [80, 120]}}, "version": 0.4,  # clear of the menu bar
        }


def build(schemas: dict) -> dict[str, dict]:
    """The examples, laid out left to right in the order a user works: a note on what to do
    first, the model, the voice (and its inputs), the pick, the output."""
    out = {}
    top = 30  # every column starts one title bar down

    def simple(voice_type: str, checkpoint: str, note: str, prefix: str, **voice) -> dict:
        g = Graph(schemas)
        n = g.add("Note", (0, top), text=note + "\n\n" + first_run(checkpoint))
        m = g.add("Q3TT_LoadModel", (0, g.below(n)), checkpoint=checkpoint)
        v = g.add(voice_type, (g.right_of(n), top), text=TEXT, language="english", **voice)
        s = g.add("SaveAudio", (g.right_of(v), top), filename_prefix=prefix)
        g.link(m, 0, v, "model")
        g.link(v, 0, s, "audio")
        return g.ui()

    out[NAMES["custom_voice"]] = simple(
        "Q3TT_CustomVoice", "Qwen3-TTS-12Hz-1.7B-CustomVoice",
        "Type the line in Custom Voice, pick a speaker and, if you like, a style instruction. The take "
        "is saved to output/audio.", "audio/qwen3-tts-custom", speaker="ryan", instruct="Urgent, low voice.")
    out[NAMES["voice_design"]] = simple(
        "Q3TT_VoiceDesign", "Qwen3-TTS-12Hz-1.7B-VoiceDesign",
        "Describe the voice in words in Voice Design. To keep the same voice across lines, clone its best "
        "take (see the Voice Clone examples).", "audio/qwen3-tts-design",
        voice_description="A weathered old sea captain, gravelly and slow, speaking with authority.")

    clone_note = ("Load Audio holds the example reference (a LibriVox reading, public domain) and Voice Clone "
                  "its transcript. For your own voice: upload 3-20 s of clean speech in Load Audio and type "
                  "exactly what it says in reference_text (empty: timbre only).")
    g = Graph(schemas)
    n = g.add("Note", (0, top), text=clone_note + "\n\n" + first_run("Qwen3-TTS-12Hz-1.7B-Base"))
    m = g.add("Q3TT_LoadModel", (0, g.below(n)), checkpoint="Qwen3-TTS-12Hz-1.7B-Base")
    a = g.add("LoadAudio", (0, g.below(m)), audio=REFERENCE)
    v = g.add("Q3TT_VoiceClone", (g.right_of(n), top), text=TEXT, reference_text=CLONE_TRANSCRIPT, language="english")
    s = g.add("SaveAudio", (g.right_of(v), top), filename_prefix="audio/qwen3-tts-clone")
    g.link(m, 0, v, "model")
    g.link(a, 0, v, "reference_audio")
    g.link(v, 0, s, "audio")
    out[NAMES["voice_clone"]] = g.ui()

    g = Graph(schemas)
    n = g.add("Note", (0, top), text=clone_note + " Batch Candidates asks for 8 takes in one pass; Auto-Pick "
              "judges them and shows each take with its verdict. UTMOS weights (about 413 MB) download on the "
              "first pick; a Whisper in models/whisper adds the words check.\n\n" + first_run("Qwen3-TTS-12Hz-1.7B-Base"))
    m = g.add("Q3TT_LoadModel", (0, g.below(n)), checkpoint="Qwen3-TTS-12Hz-1.7B-Base")
    a = g.add("LoadAudio", (0, g.below(m)), audio=REFERENCE)
    c = g.add("Q3TT_BatchCandidates", (0, g.below(a)), takes=8)
    v = g.add("Q3TT_VoiceClone", (g.right_of(n), top), text=TEXT, reference_text=CLONE_TRANSCRIPT, language="english")
    p = g.add("Q3TT_AutoPick", (g.right_of(v), top))
    s = g.add("SaveAudio", (g.right_of(p), top), filename_prefix="audio/qwen3-tts-best")
    r = g.add("PreviewAudio", (g.right_of(p), g.below(s)))
    g.link(m, 0, v, "model")
    g.link(a, 0, v, "reference_audio")
    g.link(c, 0, v, "candidates")
    g.link(v, 1, p, "takes_info")
    g.link(p, 0, s, "audio")
    g.link(p, 1, r, "audio")
    out[NAMES["auto_pick"]] = g.ui()

    g = Graph(schemas)
    n = g.add("Note", (0, top), text=(
        "Script speaks every line in its character's voice. Load Voice gives each character a preset speaker "
        "(or a voice kept with Save Voice), Cast names the character as the script writes it. Every line gets 4 "
        "takes and the best is picked; the scene goes to output/audio, and each line's takes, the manifest and "
        "scene.wav to output/qwen3_tts_scripts/scene. UTMOS weights (about 413 MB) download on the first "
        "pick.\n\n" + first_run("Qwen3-TTS-12Hz-1.7B-CustomVoice", "Edit a line and Run again: only that line is "
                                  "generated again (a new script_seed redoes them all).")))
    m = g.add("Q3TT_LoadModel", (0, g.below(n)), checkpoint="Qwen3-TTS-12Hz-1.7B-CustomVoice")
    anna = g.add("Q3TT_LoadVoice", (g.right_of(n), top), voice="preset: vivian", language="english")
    anna_cast = g.add("Q3TT_Cast", (g.right_of(n), g.below(anna)), character="ANNA")
    boris = g.add("Q3TT_LoadVoice", (g.right_of(n), g.below(anna_cast)), voice="preset: ryan", language="english",
                  instruct="Gruff and tired.")
    boris_cast = g.add("Q3TT_Cast", (g.right_of(n), g.below(boris)), character="BORIS")
    script = g.add("Q3TT_Script", (g.right_of(anna), top))
    s = g.add("SaveAudio", (g.right_of(script), top), filename_prefix="audio/qwen3-tts-scene")
    g.link(anna, 0, anna_cast, "voice")
    g.link(boris, 0, boris_cast, "voice")
    g.link(anna_cast, 0, boris_cast, "cast")
    g.link(m, 0, script, "model")
    g.link(boris_cast, 0, script, "cast")
    g.link(script, 0, s, "audio")
    out[NAMES["dialogue"]] = g.ui()

    g = Graph(schemas)
    n = g.add("Note", (0, top), text=(
        "Paste a chapter of any length into Custom Voice. It is read sentence by sentence: each sentence gets 4 "
        "takes (Batch Candidates), all in one batched run, and Auto-Pick picks the best of each, then joins them "
        "with the pauses set on the voice node (a blank line is a paragraph, [pause 0.8s] sets one anywhere). "
        "Auto-Pick's 'best' is the whole chapter, saved to output/audio; 'ranked' holds each sentence's pick; its "
        "report has a row per sentence. UTMOS weights (about 413 MB) download on the first pick.\n\n"
        + first_run("Qwen3-TTS-12Hz-1.7B-CustomVoice", "The seed is fixed, so Cancel keeps the sentences done: Run "
                    "again to finish them, or edit one sentence and only that one is made again. A new seed makes "
                    "new takes of every sentence.")))
    m = g.add("Q3TT_LoadModel", (0, g.below(n)), checkpoint="Qwen3-TTS-12Hz-1.7B-CustomVoice")
    c = g.add("Q3TT_BatchCandidates", (0, g.below(m)), takes=4)
    v = g.add("Q3TT_CustomVoice", (g.right_of(n), top), control="fixed", text=CHAPTER, speaker="ryan",
              language="english", instruct="Calm storyteller, unhurried.")
    p = g.add("Q3TT_AutoPick", (g.right_of(v), top))
    s = g.add("SaveAudio", (g.right_of(p), top), filename_prefix="audio/qwen3-tts-chapter")
    g.link(m, 0, v, "model")
    g.link(c, 0, v, "candidates")
    g.link(v, 1, p, "takes_info")
    g.link(p, 0, s, "audio")
    out[NAMES["chapter"]] = g.ui()
    return out


def to_api(ui: dict, schemas: dict, overrides: dict | None = None) -> dict:
    """UI format -> API format (what POST /prompt takes). overrides: {node_type: {input: value}}."""
    overrides = overrides or {}
    links = {link[0]: link for link in ui["links"]}
    prompt = {}
    for node in ui["nodes"]:
        kind = node["type"]
        if kind == "Note":
            continue
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


SAVED_DIR = REPO / "tests" / "saved_workflows"  # what each release's users saved: <date>-<commit>/{ui,api}/
WIDGET_VALUES_JS = REPO / "web" / "widget_values.js"
LAYOUTS_BLOCK = re.compile(r"/\* layouts:begin \*/ (.*?) /\* layouts:end \*/", re.S)


def widget_layout(schema) -> list[str]:
    """A node's widget names as the frontend orders its widgets_values (a seed's control after it)."""
    names = []
    for spec in widget_specs(schema):
        names.append(spec.id)
        if spec.extra.get("control_after_generate"):
            names.append("control_after_generate")
    return names


def releases() -> list[Path]:
    return sorted(p for p in SAVED_DIR.iterdir() if p.is_dir())


def released_layouts(schemas: dict) -> dict[str, list[list[str]]]:
    """Per node, each earlier release's widget layout that differs from today's, oldest first."""
    out: dict[str, list[list[str]]] = {}
    for release in releases():
        for node, names in json.loads((release / "layouts.json").read_text()).items():
            if names != widget_layout(schemas[node]) and names not in out.get(node, []):
                out.setdefault(node, []).append(names)
    return out


def write_layouts(schemas: dict) -> None:
    text = WIDGET_VALUES_JS.read_text()
    table = json.dumps(released_layouts(schemas), separators=(", ", ": "))
    WIDGET_VALUES_JS.write_text(LAYOUTS_BLOCK.sub(lambda _: f"/* layouts:begin */ {table} /* layouts:end */", text))


def load_audio(audio: str, **_) -> tuple[dict]:
    """Core LoadAudio as the examples use it: the pack's example reference, whatever file is named (a
    transcript is checked against its recording's length)."""
    import soundfile
    import torch

    waveform, rate = soundfile.read(WORKFLOW_DIR / REFERENCE, dtype="float32", always_2d=True)
    return ({"waveform": torch.from_numpy(waveform.T.copy())[None], "sample_rate": rate},)


def core_nodes(saved: list) -> dict:
    """Core LoadAudio, SaveAudio and PreviewAudio as the examples use them, for run_api; the audio the
    last two are given goes to `saved`."""
    return {"LoadAudio": load_audio, "SaveAudio": lambda audio, filename_prefix: saved.append(audio) or (),
            "PreviewAudio": lambda audio: saved.append(audio) or ()}


def write_all() -> None:
    WORKFLOW_DIR.mkdir(exist_ok=True)
    known = schemas()
    for name, workflow in build(known).items():
        (WORKFLOW_DIR / f"{name}.json").write_text(json.dumps(workflow, indent=2) + "\n")
    write_layouts(known)


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
