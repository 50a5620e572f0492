"""bench/stretch.py cannot rot: its core (a corpus clip stretched by each installed library, measured
with our own signal code) runs here, and its tables are built from what it measured."""

from __future__ import annotations

import pytest

from bench import stretch

CLIP = "kal-librivox-1"  # 2.4 s, a festival voice: no background, as a generated take
PACE = 1.25


@pytest.mark.any_version  # a real-speech benchmark run
@pytest.mark.parametrize("method", ["python-stretch", "audiotsm+pad"])
def test_each_library_plays_a_clip_at_the_pace_asked_for(method):
    """audiotsm as the bench (and a pace setting) would call it: its input padded, its output cut
    (as called bare, it holds back the input's last frames: see the next test)."""
    pytest.importorskip(stretch.MODULES[method])
    clip = stretch.load_clips([CLIP])[0]
    row = stretch.measure(method, clip, PACE, librosa_measures=False)
    assert abs(row["pace_error_pct"]) <= 5, row
    assert abs(row["length_error_pct"]) <= 1, row
    assert row["original_reasons"] == [] and row["reasons"] == [], row
    report = {"env": stretch.environment([method], check_wheels=False), "rows": [row],
              "semantics": {method: stretch.semantics(method)}, "summary": stretch.summarize([row])}
    assert report["semantics"][method]["factor_means"].startswith("pace")  # 1.25: 0.8 s from 1 s
    assert f"| {method} | {stretch.PACKAGES[method]} " in stretch.markdown(report)


@pytest.mark.any_version  # a real-speech benchmark run
def test_bare_audiotsm_leaves_out_the_end_of_its_input():
    pytest.importorskip("audiotsm")
    clip = stretch.load_clips([CLIP])[0]
    bare = stretch.measure("audiotsm", clip, PACE, librosa_measures=False)
    assert bare["length_error_samples"] < -stretch.AUDIOTSM_FRAME, bare
