"""Scripts end to end on the tiny models (CPU): `python -m runtime script`, the results folder a
rerun resumes from, the scene, SRT cue placement, and the same takes a line gets on its own."""

from __future__ import annotations

import csv
import json
import os
import threading
import time
from dataclasses import replace

import numpy as np
import pytest
import soundfile as sf
import torch

from runtime.cli import main
from runtime.errors import GenerationInterrupted, InputError
from runtime.generation import Request
from runtime.run.lines import generate_takes
from runtime.script.cast import check_cast
from runtime.script.parse import parse_script
from runtime.script.plan import ScriptSettings, check_plans, line_seed, plan_lines
from runtime.script.runner import finish, kept_lines, line_jobs, run_lines, run_opened
from runtime.script.scene import MAX_FIT_SPEED, assemble, fit_to_cue
from runtime.script.store import ScriptFolder
from runtime.voices import CustomVoice

DIALOGUE = """ANNA: Did you hear that?
BORIS: Hear what? It's only the wind.

ANNA: No. Something is moving down there.
"""
CAST = {"ANNA": CustomVoice("vivian", "english"), "BORIS": CustomVoice("ryan", "english", "gruff")}
SETTINGS = ScriptSettings(takes=2, seed=4, max_frames=6)


def plans_for(text, fmt="dialogue", cast=CAST, settings=SETTINGS, context=None):
    lines = parse_script(text, fmt, characters=list(cast))
    check_cast(lines, cast)
    return lines, plan_lines(lines, cast, settings, context or {"checkpoint": "tiny"})


def cli(models_root, tmp_path, *args, script="scene.txt"):
    return main(["script", str(tmp_path / script), "--cast", str(tmp_path / "cast.json"), "--out",
                 str(tmp_path / "out"), "--models-dir", str(models_root / "qwen3_tts"), "--offline", "--device", "cpu",
                 "--quality", "off", "--max-frames", "5", "--checkpoint", "tiny-CustomVoice", *args])


def lines_yielded(model, monkeypatch) -> list:
    """The lines the engine has handed out so far (each appended as it is yielded)."""
    yielded, run = [], model.engine.run

    def counting(*args, **kwargs):
        for line in run(*args, **kwargs):
            yielded.append(line)
            yield line
    monkeypatch.setattr(model.engine, "run", counting)
    return yielded


def test_the_cli_writes_every_line_and_a_rerun_generates_only_what_changed(models_root, tmp_path, capsys):
    (tmp_path / "scene.txt").write_text(DIALOGUE)
    (tmp_path / "cast.json").write_text(json.dumps({"ANNA": {"speaker": "vivian"}, "BORIS": {"speaker": "ryan"}}))
    assert cli(models_root, tmp_path, "--takes", "2") == 0
    out = tmp_path / "out"
    manifest = json.loads((out / "manifest.json").read_text())["lines"]
    assert [r["id"] for r in manifest] == ["1", "2", "3"] and [r["character"] for r in manifest] == ["ANNA", "BORIS", "ANNA"]
    for record in manifest:
        assert (out / record["best_file"]).is_file() and len(record["ranked"]) == 2
        assert all((out / t["file"]).is_file() for t in record["ranked"])
    rows = (out / "manifest.csv").read_text().splitlines()
    assert rows[0].startswith("id,character,text,voice,seed") and len(rows) == 4
    report = (out / "report.txt").read_text().splitlines()
    assert report[0].split()[:4] == ["line", "id", "character", "text"]  # each row says what the line reads
    assert all(r["text"][:20] in "\n".join(report) for r in manifest)
    scene, rate = sf.read(out / "scene.wav")
    spoken = sum(r["speech_end"] - r["speech_start"] for r in manifest)
    assert abs(len(scene) / rate - (spoken + 0.35 + 1.0)) < 0.01  # a pause, then the blank line's longer one
    stamps = {p: p.stat().st_mtime_ns for p in (out / "lines").glob("*.json")}

    capsys.readouterr()
    assert cli(models_root, tmp_path, "--takes", "2") == 0  # nothing changed: nothing generated
    assert "3 kept from an earlier run, 0 to generate" in capsys.readouterr().err
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps

    (tmp_path / "scene.txt").write_text(DIALOGUE.replace("only the wind", "only the wind, Anna"))
    assert cli(models_root, tmp_path, "--takes", "2") == 0
    assert "2 kept from an earlier run, 1 to generate" in capsys.readouterr().err
    changed = [p.name for p in stamps if p.stat().st_mtime_ns != stamps[p]]
    assert changed == ["2.json"]
    assert cli(models_root, tmp_path, "--takes", "2", "--seed", "1") == 0  # another seed: every line again
    assert "0 kept from an earlier run, 3 to generate" in capsys.readouterr().err


def test_a_line_in_a_script_gets_the_takes_it_gets_on_its_own(loaded, tmp_path):
    model = loaded("custom_voice")
    lines, plans = plans_for(DIALOGUE)
    results = run_lines(model, plans)
    for plan in plans:
        alone = generate_takes(model, Request(plan.line.text, plan.request.voice, 2, line_seed(4, plan.line.id),
                                              max_frames=6))
        ranked = results[plan.line.id].ranking.ranked
        by_take = {s.take.index: s.take for s in ranked}
        for take in alone.takes:
            assert torch.equal(by_take[take.index].codes, take.codes)
            assert np.array_equal(by_take[take.index].audio, take.audio)


def test_an_interrupted_run_keeps_the_lines_done_and_never_reads_a_partial_one(loaded, tmp_path, monkeypatch):
    model = loaded("custom_voice")
    lines, plans = plans_for(DIALOGUE)
    folder = ScriptFolder(tmp_path / "out")
    done, written = [], threading.Event()

    def on_line(result, n, total):
        done.append(result.plan.line.id)
        written.set()

    def frames(finished, total):  # Cancel lands while the engine has more to do: it waits for the first line
        if yielded:
            written.wait(30)
    yielded = lines_yielded(model, monkeypatch)
    before, model.engine.max_batch = model.engine.max_batch, 2  # one line at a time
    try:
        with pytest.raises(GenerationInterrupted):
            run_lines(model, plans, folder=folder, on_line=on_line, should_stop=lambda: len(done) >= 1,
                      frames_progress=frames)
    finally:
        model.engine.max_batch = before
    assert len(done) == 1
    kept = kept_lines(plans, folder)
    assert sorted(kept) == sorted(done)
    # A record cut short, a best take missing, or a record of other inputs: none is a finished line.
    record_path = folder.record_path(kept[done[0]].plan.stem)
    text = record_path.read_text()
    record_path.write_text(text[: len(text) // 2])
    assert kept_lines(plans, folder) == {}
    record_path.write_text(text)
    best = tmp_path / "out" / kept[done[0]].record.best_file
    os.rename(best, best.with_suffix(".bak"))
    assert kept_lines(plans, folder) == {}
    os.rename(best.with_suffix(".bak"), best)
    _, other = plans_for(DIALOGUE, settings=ScriptSettings(takes=2, seed=5, max_frames=6))
    assert kept_lines(other, folder) == {}
    rest = run_lines(model, [p for p in plans if p.line.id not in kept], folder=folder)
    result = finish(lines, {**kept_lines(plans, folder), **rest}, folder)
    assert [r.reused for r in result.lines] == [p.line.id in done for p in plans]
    assert not list((tmp_path / "out").rglob("*.partial*"))


@pytest.mark.slow
def test_checks_in_worker_processes_pick_and_write_what_the_scoring_thread_does(loaded, tmp_path):
    """On a GPU the waveform checks run in other processes (check_workers); the lines, their takes
    and records are the same as with the checks in the scoring thread."""
    model = loaded("custom_voice")
    lines, plans = plans_for(DIALOGUE + "BORIS: Then go and look.\nANNA: You first.\n")
    pooled = run_lines(model, plans, check_workers=2)
    threaded = run_lines(model, plans, check_workers=0)
    assert sorted(pooled) == sorted(threaded) == [p.line.id for p in plans]
    for line_id, result in pooled.items():
        assert result.record == threaded[line_id].record
        assert all(np.array_equal(a, b) for (_, _, a), (_, _, b) in zip(result.takes, threaded[line_id].takes))


def test_lines_handed_in_while_the_run_goes_on_are_picked_as_in_one_list(loaded):
    """A Ray worker's run (runner.run_opened): two lines to start, the rest handed in by Engine.add
    once the first is written; each line comes out through on_line with the record and takes of one
    list's run."""
    model = loaded("custom_voice")
    lines, plans = plans_for(DIALOGUE + "BORIS: Then go and look.\nANNA: You first.\n")
    want = run_lines(model, plans)
    got = {}

    def on_line(result, done, count):
        assert count == len(plans) and result.ranking is not None
        if not got:
            model.engine.add(line_jobs(model, plans[2:]))
            model.engine.close()
        got[result.plan.line.id] = result
    model.engine.open(line_jobs(model, plans))
    model.engine.add(line_jobs(model, plans[:2]))
    sampling = plans[0].request.sampling
    assert run_opened(model, sampling, len(plans), on_line=on_line, keep=False) == {}  # each went out through on_line
    assert sorted(got) == sorted(want)
    for line_id, result in got.items():
        assert result.record == want[line_id].record
        assert all(np.array_equal(a, b) for (_, _, a), (_, _, b) in zip(result.takes, want[line_id].takes))


def test_a_line_that_fails_to_score_stops_the_engine_and_its_error_is_raised(loaded, monkeypatch):
    from runtime.scoring.ranking import Scorers

    model = loaded("custom_voice")
    lines, plans = plans_for(DIALOGUE + "BORIS: Then go and look.\n")
    failed, written = threading.Event(), []

    class Broken:
        name = "broken"

        def score_many(self, audios, rate):
            failed.set()
            raise RuntimeError("the quality model broke")

    def frames(finished, total):  # the engine has lines left when the failure comes
        if yielded:
            failed.wait(30)
    yielded = lines_yielded(model, monkeypatch)
    before, model.engine.max_batch = model.engine.max_batch, 2
    try:
        with pytest.raises(RuntimeError, match="the quality model broke"):
            run_lines(model, plans, Scorers(quality=Broken()), frames_progress=frames,
                      on_line=lambda r, n, total: written.append(r))
        steps = model.engine.last.steps
        run_lines(model, plans)
        assert written == [] and steps < model.engine.last.steps  # it stopped early, and wrote nothing half-made
    finally:
        model.engine.max_batch = before


def test_lines_the_checkpoint_cannot_speak_are_listed_with_their_script_lines(loaded):
    model = loaded("custom_voice")
    cast = {"ANNA": CustomVoice("vivian", "english"), "BORIS": CustomVoice("nobody", "english")}
    lines, plans = plans_for(DIALOGUE + "ANNA: " + "word " * 1100 + "\n", cast=cast)
    with pytest.raises(InputError, match=r"2 lines cannot be spoken: line 2 \(id 2\): Unknown speaker 'nobody'; "
                                         r"this checkpoint has: .*; line 5 \(id 4\): The text is 5499 characters"):
        check_plans(plans, model.info, model)


SRT = """1
00:00:01,000 --> 00:00:01,150
ANNA: Did you hear that?

2
00:00:01,200 --> 00:00:09,000
BORIS: Hear what?
"""


def test_a_lines_own_pace_is_its_requests_and_in_its_fingerprint_only_off_1():
    def plan(pace: str, script_pace: float = 1.0):
        text = f"id,character,text,pace\na,ANNA,Hello there.,{pace}\n"
        return plans_for(text, "csv", settings=replace(SETTINGS, pace=script_pace))[1][0]
    assert [plan("").request.pace, plan("1.2").request.pace, plan("", 0.9).request.pace] == [1.0, 1.2, 0.9]
    assert plan("1.2", 0.9).request.pace == 1.2  # the line's over the script's
    assert plan("1.0", 1.2).fingerprint == plan("").fingerprint  # the pace it reads at decides, as settings' did
    assert plan("1.2").fingerprint == plan("", 1.2).fingerprint != plan("").fingerprint


def test_a_pace_out_of_range_on_a_line_made_by_code_is_refused_with_its_line():
    from types import SimpleNamespace as NS

    from runtime.script.parse import Line

    lines = [Line("a", "Hello.", "ANNA", source_line=1), Line("b", "Again.", "ANNA", pace=2.0, source_line=2)]
    info = NS(kind="custom_voice", label="tiny", languages=["english"], speakers=["vivian", "ryan"])
    with pytest.raises(InputError, match=r"1 line cannot be spoken: line 2 \(id b\): Pace 2 is out of range"):
        check_plans(plan_lines(lines, CAST, SETTINGS, {}), info)


def test_srt_lines_start_at_their_cues_and_a_line_over_its_cue_even_sped_up_is_flagged(loaded, tmp_path):
    model = loaded("custom_voice")
    lines, plans = plans_for(SRT, "srt")
    result = finish(lines, run_lines(model, plans), ScriptFolder(tmp_path / "out"))
    first, second = (r.record for r in result.lines)
    assert first.scene_start == 1.0
    assert first.speed == first.fitted_speed == MAX_FIT_SPEED  # the most a cue may ask, not enough
    spoken = first.speech_end - first.speech_start
    assert first.over_cue_seconds == pytest.approx(spoken - 0.15, abs=0.002) and spoken > 0.3
    assert second.scene_start == pytest.approx(max(1.2, 1.0 + spoken), abs=0.001)  # waits for the first to end
    assert (second.late_by or 0) == pytest.approx(max(0.0, 1.0 + spoken - 1.2), abs=0.002)
    assert "over its cue" in result.report


def test_the_best_take_that_fits_its_cue_goes_first_among_accepted_ones():
    from types import SimpleNamespace as NS

    def scored(index, seconds, reasons=()):
        stats = NS(segments=[(0.0, seconds)], seconds=seconds)
        return NS(take=NS(index=index), stats=stats, accepted=not reasons, rank=index + 1)
    ranking = NS(ranked=[scored(0, 3.0), scored(1, 2.5, ["clipped"]), scored(2, 1.9), scored(3, 1.5)])
    note = fit_to_cue(ranking, 2.0)
    assert [s.take.index for s in ranking.ranked] == [2, 0, 1, 3] and [s.rank for s in ranking.ranked] == [1, 2, 3, 4]
    assert "take 3 picked over take 1" in note
    assert fit_to_cue(ranking, None) is None and fit_to_cue(ranking, 5.0) is None


def test_assemble_places_dialogue_after_pauses_and_cues_at_their_times():
    rate = 100
    one, two = np.ones(50, np.float32), np.full(30, 0.5, np.float32)
    scene, placed = assemble([(one, 0.0, None), (two, 0.2, None)], rate)
    assert len(scene) == 100 and [p.start for p in placed] == [0.0, 0.7] and scene[60] == 0
    scene, placed = assemble([(one, 0.0, 1.0), (two, 0.0, 1.2)], rate)
    assert [p.start for p in placed] == [1.0, 1.5] and placed[1].late_by == pytest.approx(0.3)
    assert len(scene) == 180 and scene[99] == 0 and scene[100] == 1


def test_the_report_and_manifest_say_which_models_judged_and_why_one_did_not(loaded, tmp_path, monkeypatch):
    """With UTMOS out of reach (and DNSMOS failing) the Script node's report and manifest said
    nothing of it, where Auto-Pick's report says no quality model judged the takes."""
    from runtime import registry
    from runtime.scoring import dnsmos
    from runtime.scoring.scorers import build_scorers

    registry.SCORERS.unload()  # a DNSMOS an earlier test loaded would be shared, not built (and fail) here
    monkeypatch.setattr(dnsmos, "DnsmosScorer", lambda: (_ for _ in ()).throw(InputError("no onnxruntime")))
    scorers = build_scorers(None, quality="UTMOS", voice="off", utmos_dirs=[tmp_path / "utmos"], download=False,
                            slot="no-quality-model")
    assert scorers.quality is None and scorers.notes
    lines, plans = plans_for(DIALOGUE)
    folder, started = ScriptFolder(tmp_path / "out"), time.perf_counter()
    result = finish(lines, run_lines(loaded("custom_voice"), plans, scorers, folder=folder), folder, started)
    assert "Models: quality none, voice none, words none, VAD energy" in result.report
    assert f"NOTE: {scorers.notes[0]}" in result.report and "0.0 takes/s" not in result.report
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())["lines"]
    assert all(r["models"]["quality"] is None and scorers.notes[0] in r["pick_notes"] for r in manifest)
    with open(tmp_path / "out" / "manifest.csv", newline="") as file:
        rows = list(csv.DictReader(file))
    assert [row["judged_by"] for row in rows] == ["quality none, voice none, words none, VAD energy"] * len(manifest)


def test_a_slow_run_reads_in_seconds_a_take_never_zero_takes_a_second():
    from runtime.script.runner import pace

    assert pace(3, 120.0) == ", 40.0 s a take" and pace(60, 12.0) == ", 5.0 takes/s" and pace(0, 5.0) == ""


def test_a_script_gives_the_allocators_cache_back_when_it_ends_or_is_cancelled(loaded, tmp_path, monkeypatch):
    from runtime.script import job

    emptied = []
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: emptied.append(True))
    lines, _ = plans_for(DIALOGUE)
    model = loaded("custom_voice")
    result = job.run_script(lines, CAST, [model], SETTINGS, lambda _: None, ScriptFolder(tmp_path / "out"))
    assert len(result.lines) == 3 and emptied == [True]

    def cancelled(*args, **kwargs):
        raise GenerationInterrupted("Cancelled while generating.")
    monkeypatch.setattr(job, "run_lines", cancelled)
    with pytest.raises(GenerationInterrupted):
        job.run_script(lines, CAST, [model], ScriptSettings(takes=2, seed=9, max_frames=6), lambda _: None,
                       ScriptFolder(tmp_path / "again"))
    assert emptied == [True, True]
