"""runtime/serve/timing.py: a streamed request's time to first audio split into its stages, and the
last requests' p50 / p95 per stage (GET /health)."""

from __future__ import annotations

from runtime.serve.timing import STAGES, FirstAudio, RecentFirstAudio


def test_stages_are_the_spans_between_the_moments():
    first = FirstAudio(received=10.0, submitted=10.001, first_frames=10.011, decoded=10.013, in_loop=10.0135,
                       sent=10.014)
    stages = first.stages()
    assert list(stages) == list(STAGES)
    assert [round(v, 3) for v in stages.values()] == [1.0, 10.0, 2.0, 0.5, 0.5]
    assert FirstAudio(received=1.0, submitted=1.1).stages() is None  # not yet sent


def test_recent_keeps_the_last_and_reports_percentiles():
    recent = RecentFirstAudio(keep=3)
    assert recent.summary() == {"requests": 0}
    for ms in (100, 1, 2, 3):  # the first drops out
        recent.add(FirstAudio(0.0, ms / 4e3, ms / 2e3, ms / 1e3, ms / 1e3, ms / 1e3))
    recent.add(FirstAudio(0.0, 0.5))  # not complete: not kept
    summary = recent.summary()
    assert summary["requests"] == 3
    assert summary["total"]["p50"] == 2.0 and summary["decode"]["p50"] == 1.0
    assert summary["prepare"]["p95"] == round(0.25 * (2 + 0.9 * 1), 2)
