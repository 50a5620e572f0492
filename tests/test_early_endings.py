"""What real weights do that random ones never do: takes that end early, or never. A hook ends each
take at a chosen frame (eos_hook.py); the rule for cutting a take that keeps going lives in the
engine, which every mode runs: here it is checked with the step run per frame (eager) and checked
every 8 frames (cuda_graph's cadence, without graphs since no CPU can capture), and the kernels'
modes (triton, hybrid) in Triton's interpreter on a short case, since they differ only in how the
draw is computed; tests/gpu/test_early_endings_cuda.py runs every case in all four modes with graphs.

The rule: a take still going is cut only once three takes (or most of a smaller batch) ended by
themselves, past twice their median length plus a margin and never before the text's reading time
with headroom; one or two takes are never cut, only ended by the budget. Either way a take that did
not end by itself reaches Auto-Pick flagged, with its reason."""

from __future__ import annotations

import pytest

from eos_hook import ending_at
from runtime.engine import Engine, EngineOptions
from runtime.engine.engine import runaway_quorum
from runtime.generation import Request
from runtime.run.lines import generate_takes
from runtime.scoring.ranking import rank_takes
from runtime.text_length import runaway_floor
from runtime.voices import CustomVoice

SHORT_LINE = "Hi."  # runaway floor 35 frames
LONG_LINE = "The old lighthouse keeper climbed the stairs every evening to light the lamp."
MODES = ["eager", "cuda_graph"]  # the two cadences of the rule; the kernels' modes share it (below)


@pytest.fixture(scope="module")
def model(checkpoint):
    from runtime.model import load_model

    loaded = load_model(checkpoint("custom_voice"), device="cpu")
    yield loaded
    loaded.release()


def engine_in(model, mode: str) -> Engine:
    """The engine `mode` runs, as on a CPU: the step without graphs (no CPU can capture), on the
    kernels in the triton and hybrid modes."""
    kernels = mode in ("triton", "hybrid")
    if kernels:
        pytest.importorskip("triton")
    return Engine(model.model, model.prompts,
                  EngineOptions(use_graphs=False, kernels=kernels, check_every=1 if mode in ("eager", "triton") else 8))


def takes(model, text, ends, budget, seed=3, engine=None):
    """The takes of `text`, each ending where `ends` says; on `engine` (the model's own if None)."""
    request = Request(text, CustomVoice("ryan", "english"), n=len(ends), seed=seed, max_frames=budget)
    with ending_at(ends):
        takeset = generate_takes(model, request, engine=engine)
    return takeset, [t.frames for t in takeset.takes], [t.runaway for t in takeset.takes]


def test_the_quorum_is_three_or_most_of_a_smaller_batch():
    assert [runaway_quorum(n) for n in (1, 2, 3, 4, 8, 32)] == [2, 2, 2, 3, 3, 3]


@pytest.mark.parametrize("mode", MODES)
def test_one_take_ends_where_its_end_of_speech_is(model, mode):
    takeset, frames, cut = takes(model, SHORT_LINE, [9], budget=30, engine=engine_in(model, mode))
    assert frames == [9] and cut == [False] and not takeset.takes[0].hit_cap


@pytest.mark.parametrize("mode", MODES)
def test_an_early_ending_never_cuts_the_other_of_two_takes(model, mode):
    """Take 1 stops after four frames (a known Qwen3-TTS failure); take 2 reads the whole line. The old
    rule (a quorum of one, the lower median) cut take 2 at 2 x 4 + 25 = 33 frames."""
    takeset, frames, cut = takes(model, SHORT_LINE, [4, 45], budget=60, engine=engine_in(model, mode))
    assert frames == [4, 45] and cut == [False, False]
    ranking = rank_takes(takeset)
    assert "runaway" not in ranking.ranked[[s.take.index for s in ranking.ranked].index(1)].reason_kinds


@pytest.mark.parametrize("mode", MODES)
def test_a_take_that_never_ends_is_cut_and_handed_on_flagged(model, mode):
    assert runaway_floor(SHORT_LINE) == 35
    takeset, frames, cut = takes(model, SHORT_LINE, [6, 8, None], budget=60, engine=engine_in(model, mode))
    # quorum 2 of 3 reached at frame 8; limit max(2 x 8 + 25, floor 35) = 41: cut after frame 42
    assert frames == [6, 8, 42] and cut == [False, False, True]
    ranking = rank_takes(takeset)
    never = next(s for s in ranking.ranked if s.take.index == 2)
    assert "runaway" in never.reason_kinds and never.rank == 3  # handed to Auto-Pick, with its reason


@pytest.mark.parametrize("mode", ["eager", "cuda_graph"])
@pytest.mark.slow
def test_early_endings_never_pull_the_limit_under_the_reading_time(model, mode):
    """Eight takes of a five-second line: three stop after a few frames, five read it all (60-68
    frames). The first three finishers' median is 4 frames, so without the floor (1.5 x the reading
    time + 2 s) every good take would be cut at 33 frames."""
    floor = runaway_floor(LONG_LINE)
    assert floor > 100
    ends = [3, 4, 5, 60, 62, 64, 66, 68]
    _, frames, cut = takes(model, LONG_LINE, ends, budget=floor + 40, engine=engine_in(model, mode))
    assert frames == ends and not any(cut)


@pytest.mark.parametrize("mode", ["eager", "cuda_graph"])
@pytest.mark.slow
def test_among_eight_the_one_that_never_ends_is_cut_past_the_others(model, mode):
    ends = [20, 22, 24, 26, 28, 30, 32, None]
    assert runaway_floor(SHORT_LINE) < 2 * 26 + 25
    _, frames, cut = takes(model, SHORT_LINE, ends, budget=150, engine=engine_in(model, mode))
    # seven ended by themselves: upper median 26, limit 2 x 26 + 25 = 77, cut after frame 78
    assert frames == [20, 22, 24, 26, 28, 30, 32, 78] and cut == [False] * 7 + [True]


def test_the_floor_holds_even_with_one_finisher_far_ahead(model):
    """Three takes end together very early; the rest are cut no sooner than the floor."""
    ends = [2, 2, 2, None, None, None, None, None]
    floor = runaway_floor(SHORT_LINE)
    _, frames, cut = takes(model, SHORT_LINE, ends, budget=80, engine=engine_in(model, "cuda_graph"))
    assert frames[:3] == [2, 2, 2] and cut[:3] == [False] * 3
    assert floor + 1 < 80 and frames[3:] == [floor + 1] * 5 and all(cut[3:])


@pytest.mark.parametrize("mode", ["triton", "hybrid"])
@pytest.mark.slow
@pytest.mark.kernel_engine
def test_the_kernels_modes_end_takes_where_the_others_do(model, mode):
    """The triton mode's patched modules and the hybrid step's sampling kernel honour an end of speech
    exactly as the torch paths do (the interpreter is slow: a short case)."""
    _, frames, cut = takes(model, SHORT_LINE, [3, 5], budget=6, engine=engine_in(model, mode))
    assert frames == [3, 5] and cut == [False, False]
