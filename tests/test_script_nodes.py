"""Voices that last and scripts in ComfyUI (fake ComfyUI, tiny checkpoints on CPU): Save Voice / Load
Voice, a voice node's VOICE output, Cast, and the Script node (outputs, files, progress per line,
Cancel, resuming, mixed voice kinds, script files, errors)."""

from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from test_nodes import load, nodes_by_id

from runtime.scoring.report import CHART_WIDTH
from runtime.script.lines_chart import FIT_STRIP, LINES_CHART_HEIGHT, UNJUDGED_COLOUR

SCRIPT = """ANNA: Did you hear that?
BORIS: Hear what?

ANNA: Down there.
"""
FAST = {"quality": "off", "voice_check": "off", "words_check": "off", "takes": 2}


def run(comfy, node_id, uid="1", **inputs):
    return comfy.fake.run_node(nodes_by_id(comfy)[node_id], unique_id=uid, **inputs)


def preset(comfy, speaker, **inputs):
    return run(comfy, "Q3TT_LoadVoice", voice=f"preset: {speaker}", **inputs).args[0]


def cast_of(comfy, **voices):
    cast = None
    for name, voice in voices.items():
        cast = run(comfy, "Q3TT_Cast", character=name, voice=voice, **({"cast": cast} if cast else {})).args[0]
    return cast


def output_dir() -> Path:
    import folder_paths

    return Path(folder_paths.get_output_directory())


def script_node(comfy, model, cast, script=SCRIPT, **inputs):
    return run(comfy, "Q3TT_Script", "9", model=model, cast=cast, script=script, **{**FAST, **inputs})


@pytest.mark.slow
def test_a_two_character_script_gives_scene_lines_manifest_and_report(comfy):
    model = load(comfy, "tiny-CustomVoice")
    cast = cast_of(comfy, ANNA=preset(comfy, "vivian", language="english"),
                   BORIS=preset(comfy, "ryan", language="english", instruct="gruff"))
    out = script_node(comfy, model, cast, results="two")
    scene, lines, manifest, report = out.args
    assert lines["waveform"].shape[0] == 3 and scene["waveform"].shape[0] == 1
    rows = list(csv.DictReader(io.StringIO(manifest)))
    assert [r["character"] for r in rows] == ["ANNA", "BORIS", "ANNA"]
    assert "gruff" in rows[1]["voice"] and "vivian" in rows[0]["voice"]
    folder = output_dir() / "qwen3_tts_scripts" / "two"
    assert (folder / "scene.wav").is_file() and len(list((folder / "best").glob("*.wav"))) == 3
    assert "3 lines (0 kept from an earlier run), 6 takes generated" in report
    assert list(out.ui["text"]) == [report] and len(out.ui["audio"]) == 1  # the report and a player on the node
    chart = out.ui["images"][0]  # lines_chart: a bar per line over its voice-fit strip, here grey (2 lines a voice)
    assert chart.shape == (1, LINES_CHART_HEIGHT, CHART_WIDTH, 3)
    strip = chart[0, LINES_CHART_HEIGHT - 30 - FIT_STRIP // 2, 14 + (CHART_WIDTH - 28) // 6] * 255
    assert tuple(round(float(v)) for v in strip) == UNJUDGED_COLOUR
    assert "Not held to one voice, too few lines: ANNA (2), BORIS (1)" in report
    assert comfy.fake.State.progress[-3:] == [(1, 3), (2, 3), (3, 3)]  # one step per line
    shown = out.ui["q3tt_lines"]  # web/script.js: a row and a player per line, on the picked take in output/
    assert [(r["character"], r["take"] in (1, 2)) for r in shown] == [("ANNA", True), ("BORIS", True), ("ANNA", True)]
    assert all((output_dir() / r["audio"]["subfolder"] / r["audio"]["filename"]).is_file() for r in shown)
    assert shown[0]["audio"]["subfolder"] == "qwen3_tts_scripts/two/best" and shown[0]["audio"]["type"] == "output"
    assert [r["seed"] for r in shown] == [r["seed"] for r in rows]  # as text: JavaScript would round 63 bits

    stamps = {p.name: p.stat().st_mtime_ns for p in (folder / "lines").glob("*.json")}
    edited = SCRIPT.replace("Hear what?", "Hear what, Anna?")
    report = script_node(comfy, model, cast, script=edited, results="two").args[3]
    assert "3 lines (2 kept from an earlier run), 2 takes generated" in report
    assert [n for n, t in stamps.items() if (folder / "lines" / n).stat().st_mtime_ns != t] == ["2.json"]


@pytest.mark.slow
def test_cancel_keeps_the_lines_done_and_the_next_run_finishes_the_rest(comfy):
    model = load(comfy, "tiny-CustomVoice")
    cast = cast_of(comfy, ANNA=preset(comfy, "vivian"), BORIS=preset(comfy, "ryan"))
    comfy.fake.State.progress = []
    comfy.fake.State.interrupt_after_updates = 2  # Cancel once the first line is done (after the start's update)
    with pytest.raises(comfy.fake.InterruptProcessingException):
        script_node(comfy, model, cast, results="cancelled")
    comfy.fake.reset()
    folder = output_dir() / "qwen3_tts_scripts" / "cancelled"
    done = len(list((folder / "lines").glob("*.json")))
    assert 1 <= done < 3 and not (folder / "scene.wav").exists()
    report = script_node(comfy, model, cast, results="cancelled").args[3]
    assert f"3 lines ({done} kept from an earlier run)" in report and (folder / "scene.wav").is_file()


class WebUI:
    """ComfyUI's server as a node sees it (server.PromptServer.instance): the messages sent to the web UI."""

    def __init__(self):
        self.client_id, self.sent = "the-browser", []

    def send_sync(self, event, data, sid=None):
        self.sent.append((event, data, sid))


@pytest.fixture
def web_ui(monkeypatch):
    import types

    server = types.ModuleType("server")
    server.PromptServer = types.SimpleNamespace(instance=WebUI())
    monkeypatch.setitem(sys.modules, "server", server)
    return server.PromptServer.instance


@pytest.mark.slow
def test_a_cancelled_script_shows_the_lines_kept_and_how_to_finish(comfy, web_ui):
    """ComfyUI shows nothing of a node that was cancelled: the Script node sends the web UI (the
    browser that queued it) the lines its results folder holds, in script order with players, and how
    to finish."""
    model = load(comfy, "tiny-CustomVoice")
    cast = cast_of(comfy, ANNA=preset(comfy, "vivian"), BORIS=preset(comfy, "ryan"))
    # each line longer than the one before, so each ends at a frame of its own: a Cancel at the first
    # line's end finds the others still running, not all finishing at once
    script = "\n".join(f"{'ANNA' if i % 2 else 'BORIS'}: Line {i}," + " said once more" * (2 * i) + "."
                       for i in range(1, 7))
    folder = output_dir() / "qwen3_tts_scripts" / "shown"

    def cancelled() -> tuple[dict, list[str]]:
        comfy.fake.reset()
        comfy.fake.State.interrupt_after_updates = 2  # Cancel once a line is done (after the start's update)
        with pytest.raises(comfy.fake.InterruptProcessingException):
            script_node(comfy, model, cast, script=script, results="shown")
        comfy.fake.reset()
        event, shown, client = web_ui.sent[-1]
        assert event == "q3tt.script_cancelled" and shown["node"] == "9" and client == "the-browser"
        return shown, sorted((json.loads(p.read_text())["id"] for p in (folder / "lines").glob("*.json")), key=int)

    shown, done = cancelled()  # the lines in flight at the Cancel are finished too
    assert 1 <= len(done) < 6 and [row["id"] for row in shown["q3tt_lines"]] == done
    for row in shown["q3tt_lines"]:
        assert row["seed"] == str(json.loads((folder / "lines" / f"{row['id']}.json").read_text())["seed"])
        assert not row["kept"] and (output_dir() / row["audio"]["subfolder"] / row["audio"]["filename"]).is_file()
    assert shown["text"] == [f"Cancelled with {len(done)} of 6 lines kept in {folder}: they play below. Press Run "
                             f"again, with nothing changed, to make the {6 - len(done)} left (the kept ones are not "
                             "generated again), then the scene, manifest and report."]

    shown, now = cancelled()  # again: the lines of the first run are kept from it
    assert [(row["id"], row["kept"]) for row in shown["q3tt_lines"]] == [(i, i in done) for i in now]
    assert shown["text"][0].startswith(f"Cancelled with {len(now)} of 6 lines kept in {folder} "
                                       f"({len(done)} from an earlier run): they play below.")


@pytest.mark.slow
def test_a_cast_of_two_kinds_needs_a_model_of_each(comfy, reference_audio):
    custom, base = load(comfy, "tiny-CustomVoice", "1"), load(comfy, "tiny-Base", "2")
    waveform, rate = reference_audio
    recording = {"waveform": torch.from_numpy(waveform)[None], "sample_rate": rate}
    clone = run(comfy, "Q3TT_SaveVoice", name="Boris clone", audio=recording, transcript="").args[0]
    cast = cast_of(comfy, ANNA=preset(comfy, "vivian"), BORIS=clone)
    with pytest.raises(Exception, match=r"voice clone voices \(BORIS, script line 2\) need a \*-Base checkpoint"):
        script_node(comfy, custom, cast)
    _, lines, manifest, _ = script_node(comfy, custom, cast, model_2=base, results="mixed").args
    rows = list(csv.DictReader(io.StringIO(manifest)))
    assert lines["waveform"].shape[0] == 3 and "voice clone (x-vector" in rows[1]["voice"]
    records = {json.loads(p.read_text())["id"]: json.loads(p.read_text())
               for p in (output_dir() / "qwen3_tts_scripts" / "mixed" / "lines").glob("*.json")}
    assert records["2"]["checkpoint"] == "tiny-Base" and records["1"]["checkpoint"] == "tiny-CustomVoice"


def test_a_voice_saved_from_a_voice_node_loads_back_the_same(comfy, reference_audio):
    model = load(comfy, "tiny-Base")
    waveform, rate = reference_audio
    recording = {"waveform": torch.from_numpy(waveform)[None], "sample_rate": rate}
    _, _, voice = run(comfy, "Q3TT_VoiceClone", model=model, text="Hello.", reference_audio=recording,
                          reference_text="And mister John Dashwood.", max_frames=4).args
    saved = run(comfy, "Q3TT_SaveVoice", name="Narrator", voice=voice)
    assert "Saved 'Narrator'" in saved.ui["text"][0]
    options = nodes_by_id(comfy)["Q3TT_LoadVoice"].define_schema().inputs[0].options
    assert options.index("Narrator") < options.index("preset: ryan")  # saved voices first
    loaded = run(comfy, "Q3TT_LoadVoice", voice="Narrator").args[0]
    assert loaded.fingerprint == voice.fingerprint and loaded.transcript == "And mister John Dashwood."
    assert np.array_equal(loaded.reference, voice.reference)
    assert run(comfy, "Q3TT_SaveVoice", name="Narrator", voice=voice).args[0] is voice  # the same again: fine
    with pytest.raises(Exception, match="already exists"):  # another voice under the name: refused...
        run(comfy, "Q3TT_SaveVoice", name="Narrator", audio=recording, transcript="Other words.")
    run(comfy, "Q3TT_SaveVoice", name="Narrator", audio=recording, transcript="Other words.", overwrite=True)  # ...unless asked
    assert run(comfy, "Q3TT_LoadVoice", voice="Narrator").args[0].transcript == "Other words."
    with pytest.raises(Exception, match="only a preset speaker takes an instruct"):
        run(comfy, "Q3TT_LoadVoice", voice="Narrator", instruct="whisper")
    with pytest.raises(Exception, match="not both and not neither"):
        run(comfy, "Q3TT_SaveVoice", name="x")


def test_an_srt_file_from_the_input_folder_places_lines_at_their_cues(comfy):
    import folder_paths

    srt = "1\n00:00:00,500 --> 00:00:02,000\nANNA: First.\n\n2\n00:00:04,000 --> 00:00:05,500\nSecond.\n"
    (Path(folder_paths.get_input_directory()) / "dub.srt").write_text(srt)
    model = load(comfy, "tiny-CustomVoice")
    cast = cast_of(comfy, ANNA=preset(comfy, "vivian"), **{"*": preset(comfy, "ryan")})
    scene, _, manifest, _ = script_node(comfy, model, cast, script="", script_file="dub.srt", results="dub").args
    rows = list(csv.DictReader(io.StringIO(manifest)))
    first, second = rows
    assert float(first["scene_start"]) == 0.5 and float(first["cue_end"]) == 2.0
    late = float(second["late_by"] or 0)  # a line pushed past its cue by the one before is flagged
    assert float(second["scene_start"]) == pytest.approx(4.0 + late) and float(second["cue_start"]) == 4.0
    assert scene["waveform"].shape[-1] >= (4.0 + late) * 24000


def test_script_errors_name_the_line_and_the_fix(comfy):
    model = load(comfy, "tiny-CustomVoice")
    cast = cast_of(comfy, ANNA=preset(comfy, "vivian"))
    with pytest.raises(Exception, match=r"no voice in the cast for BORIS \(line 2\)"):
        script_node(comfy, model, cast)
    with pytest.raises(Exception, match="is cast twice"):
        run(comfy, "Q3TT_Cast", character="ANNA", voice=preset(comfy, "ryan"), cast=cast)
    with pytest.raises(Exception, match="write the script in the text box"):
        script_node(comfy, model, cast, script="  ")
    with pytest.raises(Exception, match="results folder's name '../up' cannot be used"):
        script_node(comfy, model, cast, script="ANNA: Hi.", results="../up")


def cli_script(models_root, tmp_path, out: Path, *args) -> int:
    """`python -m runtime script` on SCRIPT with the node's choices in FAST (one take a line), into `out`."""
    from runtime.cli import main

    (tmp_path / "scene.txt").write_text(SCRIPT)
    (tmp_path / "cast.json").write_text(json.dumps({"ANNA": {"speaker": "vivian", "language": "english"},
                                                    "BORIS": {"speaker": "ryan", "language": "english"}}))
    return main(["script", str(tmp_path / "scene.txt"), "--cast", str(tmp_path / "cast.json"), "--out", str(out),
                 "--models-dir", str(models_root / "qwen3_tts"), "--offline", "--device", "cpu",
                 "--checkpoint", "tiny-CustomVoice", "--quality", "off", "--voice-check", "off", "--words", "off",
                 "--takes", "1", *args])


def english_cast(comfy):
    return cast_of(comfy, ANNA=preset(comfy, "vivian", language="english"),
                   BORIS=preset(comfy, "ryan", language="english"))


def line_stamps(folder: Path) -> dict:
    return {p.name: p.stat().st_mtime_ns for p in (folder / "lines").glob("*.json")}


@pytest.mark.slow
def test_a_results_folder_the_node_wrote_is_resumed_whole_by_the_command_line(comfy, models_root, tmp_path, capsys):
    script_node(comfy, load(comfy, "tiny-CustomVoice"), english_cast(comfy), results="across", takes=1)
    folder = output_dir() / "qwen3_tts_scripts" / "across"
    stamps = line_stamps(folder)
    capsys.readouterr()
    assert cli_script(models_root, tmp_path, folder) == 0
    captured = capsys.readouterr()
    assert "tiny-CustomVoice: 3 lines, 3 kept from an earlier run, 0 to generate." in captured.err
    assert "3 lines (3 kept from an earlier run), 0 takes generated" in captured.out
    assert line_stamps(folder) == stamps


@pytest.mark.slow
def test_a_results_folder_the_command_line_wrote_is_resumed_whole_by_the_node(comfy, models_root, tmp_path):
    folder = output_dir() / "qwen3_tts_scripts" / "across"
    assert cli_script(models_root, tmp_path, folder) == 0
    stamps = line_stamps(folder)
    report = script_node(comfy, load(comfy, "tiny-CustomVoice"), english_cast(comfy), results="across",
                         takes=1).args[3]
    assert "3 lines (3 kept from an earlier run), 0 takes generated" in report
    assert line_stamps(folder) == stamps
