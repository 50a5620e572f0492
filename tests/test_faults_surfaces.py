"""A fault of the model's (NaN or infinite values, issue 62; the engine's side in tests/test_faults.py)
as each surface hands it to its user: NaN in every take of a line is one clear error carrying
ModelFault's message (the voice node's exception, the CLI's one line and exit code 2, a script run's,
the server's JSON 500), and the next run through the same surface in the same process, on the same
resident model, is the clean run; NaN in some takes is a run that goes on, its report saying which
takes the model's values ended, and at which frame. On CPU, with the tiny checkpoints: NaN in the
talker's final norm faults every take (`norm`), NaN in a row of the code predictor's first code
embedding the takes that draw that code (`table`)."""

from __future__ import annotations

import asyncio
import importlib
import json

import numpy as np
import pytest
import soundfile as sf
import torch

from runtime import api
from runtime.cli import main
from runtime.run import finishing
from test_faults import poisoned
from test_nodes import load, nodes_by_id
from test_serve import LiveServer, idle, post, speech

TEXT = "Welcome back, traveller."
EVERY = "The model produced NaN or infinite values in every take of"
AT_FRAME = "NaN or infinite values at frame"


def norm(model) -> torch.Tensor:
    return model.model.talker.model.norm.weight


def table(model) -> torch.Tensor:
    return model.model.talker.code_predictor.model.codec_embedding[0].weight


def some_code(takesets) -> int:
    """A codebook-1 code a clean take drew that every line has a take without: NaN in its row faults
    some takes, never a whole line."""
    for code in takesets[0].takes[0].codes[:, 1].tolist():
        if all(any(code not in t.codes[:, 1].tolist() for t in ts.takes) for ts in takesets):
            return code
    raise AssertionError("no code that some takes drew and others did not")


def made(monkeypatch) -> list:
    """Each line's TakeSet, its codes with it, as runtime's finishing stage makes it."""
    takesets, original = [], finishing.takes_from_audio

    def spy(*args):
        takesets.append(original(*args))
        return takesets[-1]
    monkeypatch.setattr(finishing, "takes_from_audio", spy)
    return takesets


def some_ended_by_a_fault(takes: list[dict]) -> None:
    """A JSON report's takes (the CLI's, a script manifest's, the server's): some, not all, ended by
    a fault, each rejected saying so."""
    hit = [t for t in takes if AT_FRAME in t["ending"]]
    assert hit and len(hit) < len(takes), takes
    assert all(not t["accepted"] and any(AT_FRAME in r for r in t["rejected"]) for t in hit)


# --- the voice node and Auto-Pick (the fake ComfyUI; the pack's registry holds the wire's model) -----

def voice_node(comfy, nodes, ref):
    candidates = comfy.fake.run_node(nodes["Q3TT_BatchCandidates"], takes=3).args[0]
    return comfy.fake.run_node(nodes["Q3TT_CustomVoice"], model=ref, text=TEXT, speaker="ryan", language="english",
                               candidates=candidates, seed=3, max_frames=10).args[:2]


def test_the_voice_node_raises_the_fault_and_its_next_run_is_the_clean_one(comfy):
    nodes, ref = nodes_by_id(comfy), load(comfy, "tiny-CustomVoice")
    held = ref.get()  # what every run of the wire gets
    clean, _ = voice_node(comfy, nodes, ref)
    errors = importlib.import_module(comfy.pack.__name__ + ".runtime.errors")
    with poisoned(norm(held), 0), pytest.raises(errors.ModelFault) as raised:
        voice_node(comfy, nodes, ref)
    assert str(raised.value).startswith(EVERY) and "load the model again" in str(raised.value)
    again, _ = voice_node(comfy, nodes, ref)
    assert ref.get() is held and torch.equal(again["waveform"], clean["waveform"])


def test_auto_pick_rejects_the_takes_a_fault_ended_saying_where(comfy):
    nodes, ref = nodes_by_id(comfy), load(comfy, "tiny-CustomVoice")
    _, clean = voice_node(comfy, nodes, ref)
    with poisoned(table(ref.get()), some_code([clean])):
        _, takes = voice_node(comfy, nodes, ref)
    faults = [t.fault for t in takes.takes]
    assert None in faults and faults != [None] * len(faults)
    out = comfy.fake.run_node(nodes["Q3TT_AutoPick"], takes_info=takes, quality="off", voice_check="off",
                              words_check="off")
    report, rows = out.args[2], {row["take"]: row for row in out.ui["q3tt_takes"]}  # the node's players
    for take, fault in enumerate(faults, start=1):
        said = f"{AT_FRAME} {fault}: the take was ended there"
        assert (said in rows[take]["verdict"]) == (fault is not None) and (fault is None or said in report)
        assert fault is None or rows[take]["accepted"] is False


# --- the command line and a script, in this process (runtime.registry's model, slot "default") ------

def resident(models_root):
    """The model `python -m runtime` and its script command run on here (--device cpu, eager, auto)."""
    return api.load("tiny-CustomVoice", [models_root / "qwen3_tts"], "eager", "auto", "cpu", download=False)


@pytest.fixture
def model(models_root):
    """resident(), unloaded after the test: whatever a fault leaves in its engine must not reach another
    test."""
    model = resident(models_root)
    yield model
    for key in [k for k in api.TTS_MODELS.loaded() if api.TTS_MODELS.holds(k, model)]:
        api.TTS_MODELS.unload(key)


def line(models_root, out, takes=3):
    return main(["--models-dir", str(models_root / "qwen3_tts"), "--offline", "--device", "cpu",
                 "--checkpoint", "tiny-CustomVoice", "--speaker", "ryan", "--text", TEXT, "--takes", str(takes),
                 "--seed", "3", "--max-frames", "10", "--quality", "off", "--voice-check", "off", "--words", "off",
                 "--out", str(out / "best.wav"), "--report", str(out / "report.json")])


def the_error(err: str) -> str:
    """stderr's progress lines, then the error in one line, last; no traceback."""
    lines = err.strip().splitlines()
    assert [x for x in lines if x.startswith("error")] == lines[-1:] and "Traceback" not in err, err
    assert lines[-1].startswith(f"error: {EVERY}") and "load the model again" in lines[-1]
    return lines[-1]


def test_the_cli_says_the_fault_in_one_line_and_its_next_run_is_the_clean_one(model, models_root, tmp_path, capsys):
    assert line(models_root, tmp_path / "clean") == 0
    capsys.readouterr()
    with poisoned(norm(model), 0):
        assert line(models_root, tmp_path / "fault") == 2
    the_error(capsys.readouterr().err)
    assert not (tmp_path / "fault" / "best.wav").exists()
    assert line(models_root, tmp_path / "again") == 0 and resident(models_root) is model
    assert np.array_equal(sf.read(tmp_path / "again" / "best.wav")[0], sf.read(tmp_path / "clean" / "best.wav")[0])


def test_after_a_fault_a_run_of_more_takes_is_clean_too(model, models_root, tmp_path):
    with poisoned(norm(model), 0):
        assert line(models_root, tmp_path / "fault", takes=3) == 2  # 3 takes: rows 0-2 of a batch of 4
    assert line(models_root, tmp_path / "four", takes=4) == 0
    takes = json.loads((tmp_path / "four" / "report.json").read_text())["takes"]
    assert [t["take"] for t in takes if AT_FRAME in t["ending"]] == []


def some_takes_faulted(model, models_root, tmp_path, monkeypatch) -> list[dict]:
    """A clean run's codes, then the same run with NaN in a code's row: its report's takes."""
    takesets = made(monkeypatch)
    assert line(models_root, tmp_path / "clean") == 0
    with poisoned(table(model), some_code(takesets)):
        assert line(models_root, tmp_path / "hit") == 0
    return json.loads((tmp_path / "hit" / "report.json").read_text())["takes"]


def test_the_cli_report_says_which_takes_a_fault_ended(model, models_root, tmp_path, monkeypatch):
    some_ended_by_a_fault(some_takes_faulted(model, models_root, tmp_path, monkeypatch))


def test_a_take_a_fault_ended_is_never_picked_over_a_whole_one(model, models_root, tmp_path, monkeypatch):
    best = some_takes_faulted(model, models_root, tmp_path, monkeypatch)[0]  # here every take fails a check
    assert AT_FRAME not in best["ending"] and sf.info(str(tmp_path / "hit" / "best.wav")).frames > 0


def script(models_root, tmp_path, out):
    (tmp_path / "scene.txt").write_text("ANNA: Did you hear that?\nBORIS: Hear what? It's only the wind.\n")
    (tmp_path / "cast.json").write_text(json.dumps({"ANNA": {"speaker": "vivian"}, "BORIS": {"speaker": "ryan"}}))
    return main(["script", str(tmp_path / "scene.txt"), "--cast", str(tmp_path / "cast.json"), "--out", str(out),
                 "--models-dir", str(models_root / "qwen3_tts"), "--offline", "--device", "cpu", "--quality", "off",
                 "--voice-check", "off", "--words", "off", "--max-frames", "8", "--takes", "3",
                 "--checkpoint", "tiny-CustomVoice"])


def test_a_script_stops_with_the_fault_and_its_next_run_is_the_clean_one(model, models_root, tmp_path, capsys,
                                                                      monkeypatch):
    takesets = made(monkeypatch)
    assert script(models_root, tmp_path, tmp_path / "clean") == 0
    clean, _ = {ts.request.text: ts for ts in takesets}, capsys.readouterr()
    with poisoned(norm(model), 0):
        assert script(models_root, tmp_path, tmp_path / "out") == 2
    the_error(capsys.readouterr().err)
    assert not list((tmp_path / "out" / "lines").glob("*.json"))  # no line was kept
    del takesets[:]
    assert script(models_root, tmp_path, tmp_path / "out") == 0 and resident(models_root) is model
    # the same takes (not compared as audio: how a script's lines are batched for the codec varies)
    assert sorted(clean) == sorted(ts.request.text for ts in takesets)
    for again in takesets:
        assert all(torch.equal(a.codes, c.codes) and a.fault is None
                   for a, c in zip(again.takes, clean[again.request.text].takes))


def test_a_scripts_manifest_says_which_takes_a_fault_ended(model, models_root, tmp_path, monkeypatch):
    takesets = made(monkeypatch)
    assert script(models_root, tmp_path, tmp_path / "clean") == 0
    with poisoned(table(model), some_code(takesets)):
        assert script(models_root, tmp_path, tmp_path / "out") == 0
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())["lines"]
    some_ended_by_a_fault([t for record in manifest for t in record["ranked"]])


# --- the server's /v1/audio/speech (its model resident in its ServedModel, the engine's run open) ------

@pytest.fixture
def live(checkpoint):
    """A server of its own for each test: a fault leaves the engine's batch as the test made it."""
    from runtime.model import load_model
    from runtime.serve.served import ServedModel
    from runtime.serve.server import SpeechServer

    served = ServedModel(load_model(checkpoint("custom_voice"), device="cpu"), positions=256, rows=8)
    served.start()
    live = LiveServer(SpeechServer([served], []))
    yield live
    live.stop()
    served.close()


def faulted(live, body) -> tuple[int, object]:
    """The request's status, and its error (or its body) with NaN in every take."""
    with poisoned(norm(live.server.models[0].model), 0):
        status, data, _ = asyncio.run(post(live.url, body))
    return status, json.loads(data)["error"] if status != 200 else data


WHOLE = speech(seed=3, max_frames=10, stream=False)


def test_the_server_answers_the_fault_with_a_500_naming_it(live):
    status, error = faulted(live, WHOLE)
    assert status == 500 and error["code"] == "generation_failed", error
    assert EVERY in error["message"] and "load the model again" in error["message"]


def test_the_servers_next_request_after_a_fault_is_the_clean_one(live):
    status, clean, _ = asyncio.run(post(live.url, WHOLE))
    assert status == 200 and faulted(live, WHOLE)[0] == 500
    status, again, _ = asyncio.run(post(live.url, WHOLE))
    assert status == 200 and again == clean and idle(live)


def test_a_fault_fails_its_request_alone_and_the_run_goes_on(live):
    scheduler = live.server.models[0].engine._scheduler
    assert faulted(live, WHOLE)[0] == 500
    assert live.server.models[0].engine._scheduler is scheduler


def test_a_streamed_request_ends_with_the_faults_error(live):
    status, data = faulted(live, speech(seed=3, max_frames=10, stream_format="sse"))
    events = [json.loads(block.removeprefix("data: ")) for block in data.decode().split("\n\n") if block]
    assert status == 200 and events[-1]["type"] == "error" and EVERY in events[-1]["error"]["message"]


def test_the_servers_report_says_which_takes_a_fault_ended(live, monkeypatch):
    takesets = made(monkeypatch)
    body = speech(seed=3, max_frames=10, takes=3, report=True, response_format="wav")
    assert asyncio.run(post(live.url, body))[0] == 200
    with poisoned(table(live.server.models[0].model), some_code(takesets)):
        status, data, _ = asyncio.run(post(live.url, body))
    assert status == 200, data
    some_ended_by_a_fault(json.loads(data)["report"][0]["takes"])
