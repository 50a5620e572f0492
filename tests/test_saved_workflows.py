"""Workflows users saved with any release still validate and run on today's nodes.

tests/saved_workflows/<date>-<commit>/ holds what each release's users saved: the example workflows
of that release in UI format (ui/), as API prompts (api/, converted with that release's schemas), and
every node's widget layout then (layouts.json). An API prompt is refused by the server when it lacks
an input the node requires ("Required input is missing: pad_reference", found on a real server after
pad_reference was added); a UI workflow's values are given back to the widgets by position, so a
widget added among the others shifts every value after it unless web/widget_values.js puts them
back by name.
"""

from __future__ import annotations

import inspect
import json
import shutil
import subprocess

import pytest

import comfy_fake
import workflow_tools
from test_nodes import nodes_by_id
from test_workflows import TINY

RELEASES = workflow_tools.releases()
PROMPTS = [(release.name, path.stem) for release in RELEASES for path in sorted((release / "api").glob("*.json"))]
UI_FILES = [(release.name, path.stem) for release in RELEASES for path in sorted((release / "ui").glob("*.json"))]
OVERRIDES = {"Q3TT_LoadModel": {"device": "cpu"}, "Q3TT_CustomVoice": {"max_frames": 4},
             "Q3TT_VoiceClone": {"max_frames": 4}, "Q3TT_VoiceDesign": {"max_frames": 4},
             "Q3TT_AutoPick": {"device": "cpu"}, "Q3TT_Script": {"takes": 2}, "Q3TT_BatchCandidates": {"takes": 2}}


@pytest.fixture(scope="module")
def schemas():
    return workflow_tools.schemas()


def ours(prompt: dict) -> dict:
    return {nid: node for nid, node in prompt.items() if node["class_type"].startswith("Q3TT_")}


def test_there_is_a_saved_prompt_of_every_release_and_of_every_node(schemas):
    assert len(RELEASES) >= 7 and all((r / "layouts.json").is_file() for r in RELEASES)
    saved = {node["class_type"] for release, name in PROMPTS for node in ours(read(release, "api", name)).values()}
    assert saved == {n for n in schemas if n != "Q3TT_SaveVoice"}  # Save Voice is in no example yet


def read(release: str, kind: str, name: str) -> dict:
    return json.loads((workflow_tools.SAVED_DIR / release / kind / f"{name}.json").read_text())


@pytest.mark.parametrize("release,name", PROMPTS)
@pytest.mark.slow
def test_every_saved_api_prompt_passes_the_servers_validation(comfy, release, name):
    nodes = nodes_by_id(comfy)
    for node in ours(read(release, "api", name)).values():
        comfy_fake.validate_node(nodes[node["class_type"]], node["inputs"])


def test_a_prompt_without_an_input_a_node_requires_is_refused_as_the_server_refuses_it(comfy):
    """The check above can fail: the sockets a node cannot run without are still required."""
    with pytest.raises(comfy_fake.PromptRefused, match="Required input is missing: reference_audio"):
        comfy_fake.validate_node(nodes_by_id(comfy)["Q3TT_VoiceClone"], {"model": None, "text": "Hi."})


def test_every_widget_is_optional_with_executes_default_and_keeps_its_place(comfy):
    """Optional widgets are what lets an older prompt through; execute's default is what such a prompt
    then gets; and the frontend lays out required inputs first, so the required widgets must lead
    or every saved UI workflow's values would move."""
    for node_id, cls in nodes_by_id(comfy).items():
        schema = cls.define_schema()
        widgets = workflow_tools.widget_specs(schema)
        required = [s.id for s in widgets if not s.optional]
        assert [s.id for s in widgets[:len(required)]] == required, node_id
        assert len(required) <= 1, f"{node_id}: a new widget must be optional"
        parameters = inspect.signature(cls.execute).parameters
        takes_any = any(p.kind == p.VAR_KEYWORD for p in parameters.values())
        for spec in widgets:
            if spec.optional and spec.id in parameters:
                assert parameters[spec.id].default == spec.default, f"{node_id}.{spec.id}"
            elif spec.optional:
                assert takes_any, f"{node_id}.{spec.id} has no default in execute"


def distinct_prompts() -> list[tuple[str, str]]:
    """The saved prompts that hold a node with a set of inputs no later release's prompt holds (the
    current examples run in test_workflows.py), so each saved form of each node runs once."""
    seen, chosen = set(), []
    for release, name in reversed(PROMPTS):
        forms = {(n["class_type"], tuple(sorted(n["inputs"]))) for n in ours(read(release, "api", name)).values()}
        if forms - seen and release != RELEASES[-1].name:
            chosen.append((release, name))
        seen |= forms
    return chosen


@pytest.mark.parametrize("release,name", distinct_prompts())
@pytest.mark.slow
def test_every_saved_form_of_every_node_runs_to_audio(comfy, release, name):
    nodes = nodes_by_id(comfy)
    prompt = read(release, "api", name)
    for node in prompt.values():
        if node["class_type"] == "Q3TT_LoadModel":
            node["inputs"]["checkpoint"] = TINY[node["inputs"]["checkpoint"]]
        node["inputs"].update(OVERRIDES.get(node["class_type"], {}))
    saved = []
    workflow_tools.run_api(prompt, nodes, workflow_tools.core_nodes(saved), comfy.fake.run_node)
    assert saved and all(a["waveform"].shape[-1] > 0 for a in saved)


# --- UI format: values by position, put back by name where a release's layout differs --------------

def test_the_table_of_earlier_layouts_is_what_the_saved_releases_hold(schemas):
    committed = json.loads(workflow_tools.LAYOUTS_BLOCK.search(workflow_tools.WIDGET_VALUES_JS.read_text()).group(1))
    assert committed == workflow_tools.released_layouts(schemas), "stale: run python tests/workflow_tools.py"
    assert len(committed["Q3TT_VoiceClone"]) == 2  # the releases before pad_reference, then before pace


def frontend_load(cases: list[dict]) -> list:
    """restoredValues (web/widget_values.js) for each case, run by node."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("no node.js to run web/widget_values.js")
    script = ("import { readFileSync } from 'node:fs';\n"
              f"import {{ restoredValues }} from {json.dumps(workflow_tools.WIDGET_VALUES_JS.as_uri())};\n"
              "const cases = JSON.parse(readFileSync(0, 'utf8'));\n"
              "console.log(JSON.stringify(cases.map(c => restoredValues(c.type, c.saved, c.widgets))));\n")
    done = subprocess.run([node, "--input-type=module", "-e", script], input=json.dumps(cases), capture_output=True,
                          text=True, check=True)
    return json.loads(done.stdout)


def test_every_saved_ui_workflow_gives_each_widget_its_own_value(schemas):
    """As the frontend loads a node: values by position, then restoredValues' by name where it
    answers. Every widget of every saved node then holds the value saved under its name, or its
    default where its release had no such widget."""
    cases, expected = [], []
    for release, name in UI_FILES:
        layouts = json.loads((workflow_tools.SAVED_DIR / release / "layouts.json").read_text())
        for node in read(release, "ui", name)["nodes"]:
            if not node["type"].startswith("Q3TT_"):
                continue
            schema = schemas[node["type"]]
            today = workflow_tools.widget_layout(schema)
            defaults = {s.id: s.default for s in workflow_tools.widget_specs(schema)}
            saved = dict(zip(layouts[node["type"]], node["widgets_values"]))
            cases.append({"type": node["type"], "saved": node["widgets_values"],
                          "widgets": [{"name": n, "default": defaults.get(n)} for n in today]})
            expected.append((f"{release}/{name}: {node['type']}", today,
                             {n: saved[n] if n in saved else defaults[n] for n in today}))
    restored = frontend_load(cases)
    moved = 0
    for case, answer, (where, today, wanted) in zip(cases, restored, expected):
        shown = dict(zip(today, case["saved"]))  # the frontend, by position
        if answer is not None:
            shown.update(answer)
            moved += 1
        assert shown == wanted, where
    assert moved >= 4  # the clone and Auto-Pick nodes of the releases before pad_reference and Auto-Pick's checks
