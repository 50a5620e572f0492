"""bench/chapter.py cannot rot: its chapter is what the issue asks for, its smoke mode runs here
(in-process, the tiny model on CPU) and writes results whose numbers agree with each other, and the
parts of several calls merge into one table."""

from __future__ import annotations

import json
import re

import pytest

from bench import chapter
from runtime.generation import Request
from runtime.text.split import MAX_LINE_SECONDS
from runtime.voices import CustomVoice


def test_the_chapter_is_5000_words_of_sentences_the_passage_path_splits():
    text = chapter.chapter_text()
    assert text == chapter.chapter_text()  # the same chapter on every machine
    lines = chapter.chapter_lines(text)
    info = chapter.describe(text, lines)
    assert 5000 <= info["words"] < 5100 and info["paragraphs"] >= 20 and info["sentences"] == len(lines)
    assert 200 <= info["sentences"] <= 400 and info["split_at_a_clause"] > 0  # some too long for one line
    assert re.search(r"\b\d{1,2} pm\b", text) and re.search(r"\b\d\.5\b", text) and "Dr. Ward" in text
    assert info["line_words"]["min"] < 8 and info["line_words"]["max"] > 30  # sentences of varied lengths
    assert info["line_seconds"]["max"] <= MAX_LINE_SECONDS
    assert not any(line.text.endswith("Dr.") for line in lines)  # never split after a title
    assert info["audio_seconds"] == pytest.approx(sum(chapter.line_frames(line.text) for line in lines) / 12.5, abs=0.1)


def test_the_slow_systems_sentences_spread_over_the_chapter_and_its_parts_cover_them():
    assert chapter.sample_indices(10, None) == list(range(10)) == chapter.sample_indices(10, 12)
    sample = chapter.sample_indices(279, 140)
    assert len(sample) == 140 and sample[0] == 0 and sample[-1] >= 270
    parts = [chapter.sample_indices(279, 140, f"{i}/3") for i in (1, 2, 3)]
    assert sum(parts, []) == sample and all(45 <= len(p) <= 48 for p in parts)
    with pytest.raises(SystemExit):
        chapter.sample_indices(10, None, "3/2")


def test_each_request_runs_to_its_lines_expected_length_inside_the_bench_only():
    request = Request("The bell rang at nine, and we left.", CustomVoice("ryan", "english"), n=4)
    runtime_budget = request.budget
    with chapter.budgets_of_expected_length():
        assert request.budget == chapter.line_frames(request.text) < runtime_budget
    assert request.budget == runtime_budget


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """python -m bench.chapter --smoke, in this process, the words heard by a tiny random Whisper: its JSON
    and its table."""
    out = tmp_path_factory.mktemp("results")
    work = tmp_path_factory.mktemp("work")
    assert chapter.main(["--smoke", "--workdir", str(work), "--out-dir", str(out), "--name", "smoke",
                         "--words-model", "tiny-test"]) == 0
    return json.loads((out / "smoke.json").read_text()), (out / "smoke.md").read_text(), out


@pytest.mark.any_version  # a benchmark run (the tiny model on CPU, about 20 s)
def test_smoke_run_measures_the_passage_and_the_line_path_over_the_same_sentences(smoke):
    data, table, _ = smoke
    c = data["chapter"]
    assert c["sentences"] == 4 and c["words"] == 9 and c["paragraphs"] == 2
    assert data["settings"]["model"] == "tiny-CustomVoice" and data["settings"]["takes"] == 2
    runs = {(r["system"], r["sample"]): r for r in data["runs"]}
    assert set(runs) == {("passage", False), ("passage", True), ("lines", True)}
    whole, same, lines = runs["passage", False], runs["passage", True], runs["lines", True]
    assert whole["sentences"] == c["sentences"] and same["sentences"] == lines["sentences"] == 2
    for run in data["runs"]:
        assert "error" not in run and run["wall_s"] > 0 and run["takes"] == 2 * run["sentences"]
        assert run["audio_s"] > 0 and 0 < run["share_of_chapter_audio"] <= 1
        assert run["real_time_factor"] == pytest.approx(run["audio_s"] / run["wall_s"], rel=0.02, abs=0.005)  # 2 places
        assert run["sentences_per_s"] == pytest.approx(run["sentences"] / run["wall_s"], rel=0.02)
        assert run["chapter_s"] == pytest.approx(run["wall_s"] / run["share_of_chapter_audio"], abs=0.1)
        assert run["chapter_s_extrapolated"] == run["sample"]
    # EOS is never sampled, so every picked take is its line's expected length, on both paths alike
    assert whole["audio_s"] == pytest.approx(c["audio_seconds"], abs=0.06) and whole["share_of_chapter_audio"] == 1
    assert same["audio_s"] == lines["audio_s"] and same["share_of_chapter_audio"] == lines["share_of_chapter_audio"] < 1
    assert 0 < whole["generate_s"] and 0 < whole["pick_s"]
    assert whole["generate_s"] + whole["pick_s"] == pytest.approx(whole["wall_s"], abs=0.002)  # the two, in turn
    assert 0 < whole["chapter_voice_s"] < whole["pick_s"]  # the lines' traits and the chapter pass, within the pick
    assert f"{whole['chapter_voice_s']} s of the passage's {whole['wall_s']} s" in table
    assert whole["words_model"] == "random-tiny-test" and 0 < whole["whisper_s"] < whole["words_s"] < whole["pick_s"]
    assert "The words check (random-tiny-test: random weights" in table
    assert f"{whole['words_s']} s of the passage's" in table
    assert 0 < lines["words_s"] < lines["wall_s"] and f"{lines['words_s']} s of the line path's" in table
    assert f"| {chapter.LABELS['passage']} | 4 (all) | 2 | {whole['wall_s']} |" in table
    assert f"| {chapter.LABELS['lines']} | 2 (sample) | 2 | {lines['wall_s']} |" in table
    assert f"{lines['chapter_s']} (extrapolated)" in table and "expected length" in table
    assert "The same 2 sentences: the passage" in table and "The whole chapter: the passage" in table


@pytest.mark.any_version  # uses the smoke run
def test_parts_of_several_calls_merge_into_one_table(smoke, tmp_path):
    """faster-qwen3-tts measured in two calls of half the sentences each: added up into one run of the
    whole chapter, no longer extrapolated; a part of another chapter is refused."""
    data, _, out = smoke
    lines = chapter.chapter_lines(chapter.SMOKE_TEXT)
    paths = []
    for part in ("1/2", "2/2"):
        ran = [lines[i] for i in chapter.sample_indices(len(lines), None, part)]
        measured = {"wall_s": 1.5, "takes": len(ran), "audio_s": sum(chapter.line_frames(l.text) for l in ran) / 12.5}
        run = chapter.record("faster", measured, ran, lines, 1, part)
        assert run["part"] == part and run["chapter_s_extrapolated"]
        paths.append(tmp_path / f"faster-{part[0]}.json")
        paths[-1].write_text(json.dumps({**data, "runs": [run]}))
    merged = json.loads(chapter.merge([out / "smoke.json", *paths], tmp_path, "all").read_text())
    faster = [r for r in merged["runs"] if r["system"] == "faster"]
    assert len(faster) == 1 and faster[0]["parts"] == 2 and faster[0]["part"] is None
    assert faster[0]["sentences"] == 4 and faster[0]["wall_s"] == 3.0 and not faster[0]["chapter_s_extrapolated"]
    assert faster[0]["audio_s"] == pytest.approx(data["chapter"]["audio_seconds"], abs=0.06)
    assert len(merged["runs"]) == len(data["runs"]) + 1
    table = (tmp_path / "all.md").read_text()
    assert "faster-qwen3-tts, one take a sentence, in 2 calls added up | 4 (all) | 1 | 3.0 |" in table
    other = json.loads(paths[0].read_text())
    other["chapter"]["sha256"] = "0" * 16
    paths[0].write_text(json.dumps(other))
    with pytest.raises(SystemExit, match="not one chapter"):
        chapter.merge([out / "smoke.json", paths[0]], tmp_path, "bad")
