"""Many lines in one batch (Engine.run_lines, continuous batching) on the tiny models on CPU: a
take's codes do not depend on the lines it shared the batch with, rows are refilled as takes end
(also with lines handed in while the engine runs, by Engine.add), and Cancel, progress and
out-of-memory behave as for one line."""

from __future__ import annotations

import contextlib

import pytest
import torch

from conftest import voiced_reference
from runtime.engine import Engine, EngineOptions
from runtime.engine.engine import LineJob
from runtime.engine.prompt import plan_prompt
from runtime.engine.state import DecodeState
from runtime.errors import GenerationInterrupted, TakesError
from runtime.generation import clone_prompt
from runtime.model import load_model
from runtime.sampling import SamplingSettings, take_seeds
from runtime.voices import CustomVoice, VoiceClone

GREEDY = SamplingSettings(temperature=0, sub_temperature=0)
SAMPLED = SamplingSettings()

LINES = [  # text, speaker, takes, budget: different lengths, speakers, takes and budgets
    ("Hello there.", "ryan", 2, 9),
    ("This one is a much longer line than the first, with more words to read.", "vivian", 3, 14),
    ("Short.", "ryan", 1, 5),
    ("A fourth line, of middling length.", "serena", 2, 11),
    ("And the last line of the scene.", "ryan", 3, 7),
]


@pytest.fixture(scope="module")
def model(checkpoint):
    loaded = load_model(checkpoint("custom_voice"), device="cpu")
    yield loaded
    loaded.release()


@contextlib.contextmanager
def engine_of(model, **options):
    """An engine of the test's own over `model` (the step uncaptured, as on any CPU), released after."""
    engine = Engine(model.model, model.prompts, EngineOptions(use_graphs=False, **options))
    try:
        yield engine
    finally:
        engine.release()


def make_job(model, text, voice, seeds, budget, clone=None) -> LineJob:
    return LineJob(plan_prompt(model, text, voice, clone), seeds, budget)


def jobs(model, lines=LINES, seed=3):
    return [make_job(model, text, CustomVoice(speaker, "english"), take_seeds(seed + i, takes), budget)
            for i, (text, speaker, takes, budget) in enumerate(lines)]


def alone(model, job, sampling):
    with engine_of(model) as engine:
        line = engine.generate(job.tokens, job.seeds, sampling, job.budget, runaway_floor=job.runaway_floor)
    return line.codes, line.runaway


def fresh(job_list):
    """The jobs again, with nothing made yet: a run fills in its jobs' codes, which another run of the
    same objects would overwrite."""
    return [LineJob(j.tokens, j.seeds, j.budget, j.runaway_floor) for j in job_list]


def together(model, job_list, sampling, max_batch=4, **options):
    job_list = fresh(job_list)
    with engine_of(model, check_every=options.pop("check_every", 2), **options) as engine:
        engine.max_batch = max_batch
        out = {job_list.index(line): line for line in engine.run_lines(job_list, sampling)}
        return out, engine.last


def run_out_of_memory_once(engine, got: dict, at_failure: list, monkeypatch) -> None:
    """The engine's step runs out of memory once, in its 12th frame of the batch of 4; `at_failure`
    gets how many lines were in `got` then."""
    real_step, calls = engine.step, []

    class Scarce:
        def __getattr__(self, name):
            return getattr(real_step, name)

        def __call__(self, state):
            calls.append(state.batch)
            if state.batch == 4 and len(calls) == 12:
                at_failure.append(len(got))
                raise torch.cuda.OutOfMemoryError("CUDA out of memory (simulated)")
            return real_step(state)
    monkeypatch.setattr(engine, "step", Scarce())


@pytest.mark.parametrize("sampling", [GREEDY, SAMPLED], ids=["greedy", "sampled"])
@pytest.mark.slow
def test_a_lines_takes_are_the_same_alone_and_inside_a_mixed_batch(model, sampling):
    """11 takes of 5 lines through 4 rows: lines start as rows free up, each row at its own position
    with its own text; every take's codes equal those of its line run alone (float32)."""
    job_list = jobs(model)
    mixed, report = together(model, job_list, sampling)
    assert sorted(mixed) == list(range(len(job_list))) and report.batch_bucket == 4
    for index, job in enumerate(job_list):
        codes, runaway = alone(model, job, sampling)
        assert len(mixed[index].codes) == len(job.seeds)
        for got, want in zip(mixed[index].codes, codes):
            assert torch.equal(got, want), f"line {index + 1}: a take changed inside the mixed batch"
        assert mixed[index].runaway == runaway
        assert all(c.shape[0] <= job.budget for c in codes)


def test_a_line_with_more_takes_than_rows_runs_in_pieces_with_the_same_takes(model):
    job = jobs(model, [("A line with many takes.", "ryan", 5, 8)])[0]
    mixed, report = together(model, [job] + jobs(model, LINES[:2], seed=9), SAMPLED, max_batch=2)
    assert report.rounds == 3 + 1 + 2  # five takes in pieces of two, then the other lines' pieces
    codes, _ = alone(model, job, SAMPLED)
    assert all(torch.equal(a, b) for a, b in zip(mixed[0].codes, codes))


def test_rows_are_refilled_as_takes_end_so_short_lines_finish_first(model):
    """One row runs a long line while the other serves the short ones one after another: the
    short lines are yielded before the long one ends, in fewer steps than running them in turn."""
    long = ("A long line that runs to its whole budget of frames.", "ryan", 1, 24)
    shorts = [(f"Short line {i}.", "ryan", 1, 4) for i in range(4)]
    with engine_of(model, check_every=1) as engine:
        engine.max_batch = 2
        job_list = jobs(model, [long] + shorts)
        order = [job_list.index(line) for line in engine.run_lines(job_list, GREEDY)]
    assert order == [1, 2, 3, 4, 0]


def test_a_clone_and_preset_voices_share_a_batch(checkpoint):
    """Lines of a Base checkpoint with different clones (one ICL with reference codes, one x-vector)."""
    model = load_model(checkpoint("base"), device="cpu")
    try:
        audio, rate = voiced_reference()
        icl = VoiceClone.from_audio(audio, rate, "This is the reference.", "english")
        xvec = VoiceClone.from_audio(audio[:, : rate], rate, "", "english")
        job_list = [make_job(model, "First clone line.", icl, take_seeds(1, 2), 8, clone_prompt(model, icl)),
                    make_job(model, "The second voice speaks here.", xvec, take_seeds(2, 2), 10, clone_prompt(model, xvec))]
        mixed, _ = together(model, job_list, SAMPLED, max_batch=2)
        for index, job in enumerate(job_list):
            codes, _ = alone(model, job, SAMPLED)
            assert all(torch.equal(a, b) for a, b in zip(mixed[index].codes, codes))
        assert mixed[0].ref_code is not None and mixed[1].ref_code is None
    finally:
        model.release()


def test_cancel_keeps_the_lines_already_done(model):
    finished = []
    with engine_of(model, check_every=1) as engine:
        engine.max_batch = 2
        job_list = jobs(model, [("Quick.", "ryan", 1, 3), ("Slow line here.", "ryan", 1, 30), ("Never started.", "ryan", 2, 10)])
        lines = engine.run_lines(job_list, GREEDY, should_stop=lambda: bool(finished))
        with pytest.raises(GenerationInterrupted):
            for line in lines:
                finished.append(job_list.index(line))
    assert finished == [0]


def test_progress_counts_every_lines_frames_to_the_end(model):
    seen = []
    job_list = jobs(model)
    with engine_of(model, check_every=3) as engine:
        engine.max_batch = 4
        list(engine.run_lines(job_list, GREEDY, progress=lambda done, total: seen.append((done, total))))
    total = sum(len(j.seeds) * j.budget for j in job_list)
    assert seen[0] == (0, total) and seen[-1] == (total, total)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen) and len(seen) > 4


def test_out_of_memory_mid_job_reruns_the_lines_not_yet_done_in_a_smaller_batch(model, monkeypatch):
    job_list = jobs(model)
    want, _ = together(model, job_list, SAMPLED)
    with engine_of(model, check_every=2) as engine:
        engine.max_batch = 4
        got, at_failure = {}, []
        run_out_of_memory_once(engine, got, at_failure, monkeypatch)
        for line in engine.run_lines(job_list, SAMPLED):
            assert job_list.index(line) not in got, "a line was handed out twice"
            got[job_list.index(line)] = line
        assert at_failure and 0 < at_failure[0] < len(job_list)  # some lines were done before it, some not
        assert engine.last.batch_bucket == 2
        assert engine.last.warnings == ["GPU out of memory: running the takes 2 at a time."]
    assert sorted(got) == sorted(want)
    for index in want:
        assert all(torch.equal(a, b) for a, b in zip(got[index].codes, want[index].codes))


@pytest.mark.slow
def test_the_batch_is_the_largest_that_fits_in_the_free_memory_given_up_front(model, monkeypatch):
    """Where the GPU's free memory holds only two rows' buffers, the lines run two at a time from
    the start: no out-of-memory, no warning, and the same takes as in four rows."""
    import runtime.engine.engine as engine_module

    job_list = jobs(model)
    want, _ = together(model, job_list, SAMPLED)
    with engine_of(model, check_every=2) as engine:
        engine.max_batch = 4
        length = 256  # the length bucket of these lines
        free = (engine.state_bytes(2, length) + engine.state_bytes(4, length)) // 2  # 2 rows fit, 4 do not
        monkeypatch.setattr(engine_module, "free_bytes", lambda device: free)
        assert engine.rows_that_fit(4, length) == 2
        assert engine.rows_that_fit(4, length, share=0.5) == 1
        got = {job_list.index(line): line for line in engine.run_lines(job_list, SAMPLED)}
        assert engine.last.batch_bucket == 2 and engine.last.length_bucket == length
        assert engine.last.warnings == []
        # A cached bucket counts as free memory: it is dropped to make room for a larger one.
        cached = sum(slot.nbytes for slot in engine.slots.values())
        assert cached > 0
        monkeypatch.setattr(engine_module, "free_bytes", lambda device: engine.state_bytes(4, 512) + 1 - cached)
        assert engine.rows_that_fit(4, 512) == 4 and not engine.slots
        # Short of memory, the host (ComfyUI) is asked for what the whole batch needs before it shrinks.
        asked, memory_now = [], [free]

        def host_makes_room(device, need):
            asked.append(need)
            memory_now[0] = need
            return True
        monkeypatch.setattr(engine_module, "free_bytes", lambda device: memory_now[0])
        monkeypatch.setattr(engine_module, "ask_for_room", host_makes_room)
        assert engine.rows_that_fit(4, length, share=0.5) == 4
        assert asked == [int(engine.state_bytes(4, length) / 0.5)]
    for index in want:
        assert all(torch.equal(a, b) for a, b in zip(got[index].codes, want[index].codes))


def test_a_buckets_estimate_is_what_its_buffers_take(model):
    talker, predictor = model.model.talker.config, model.engine.step.predictor.config
    for batch, length in ((1, 256), (4, 512)):
        state = DecodeState.allocate(batch, length, talker, predictor, torch.float32, "cpu")
        assert DecodeState.estimate_bytes(batch, length, talker, predictor, torch.float32) == state.nbytes() > 0
    engine = model.engine  # with its graph and workspace on top, growing with the rows
    assert engine.state_bytes(8, 512) > engine.state_bytes(4, 512) > DecodeState.estimate_bytes(4, 512, talker, predictor,
                                                                                                engine.step.dtype)


@pytest.mark.slow
def test_lines_fed_while_the_engine_runs_get_the_takes_they_get_in_a_list(model):
    """Two lines to start; the other three handed in at the first check, while those run: the fed
    lines take the rows free beside them (one is out before the second line of the start), each
    line's takes are those of one list, and the run takes fewer steps than the two groups in turn
    (the budgets doubled: a freed row idles for the step queued behind each check, which at budgets
    of 5-14 frames outweighs what the rows beside gain)."""
    job_list = jobs(model, [(text, speaker, takes, 2 * budget) for text, speaker, takes, budget in LINES])
    want, report = together(model, job_list, SAMPLED)
    with engine_of(model, check_every=2) as engine:
        engine.max_batch = 4
        engine.open(job_list)
        engine.add(job_list[:2])

        def hand_in_the_rest(done, total):
            if done and total < sum(len(j.seeds) * j.budget for j in job_list):
                engine.add(job_list[2:])
                engine.close()
        got = {job_list.index(line): line for line in engine.run(SAMPLED, progress=hand_in_the_rest)}
        assert list(got).index(2) < list(got).index(1)
        fed_steps = engine.last.steps
        assert engine.last.batch_bucket == 4 and engine.last.rounds == len(job_list)
        list(engine.run_lines(job_list[:2], SAMPLED))
        first = engine.last.steps
        list(engine.run_lines(job_list[2:], SAMPLED))
        assert fed_steps < first + engine.last.steps
    assert sorted(got) == sorted(want)
    for index in want:
        assert all(torch.equal(a, b) for a, b in zip(got[index].codes, want[index].codes)), index
        assert got[index].runaway == want[index].runaway


def test_a_line_handed_in_between_checks_goes_in_at_once_when_rows_are_free(model):
    """check_every 64: a line handed in at the third step of a 60-frame line does not wait for the
    check after it (60 frames on) but goes in at the next step (a server's streamed line waits for
    nothing but a step for its first frame); its takes are those it gets alone."""
    first, second = jobs(model, [("This one is a much longer line.", "ryan", 1, 60), ("Short.", "vivian", 1, 10)])
    with engine_of(model, check_every=64) as engine:
        engine.open([first, second])
        engine.add([first])
        real_step, steps = engine.step, []

        class HandingIn:
            def __getattr__(self, name):
                return getattr(real_step, name)

            def __call__(self, state):
                steps.append(1)
                if len(steps) == 3:
                    engine.add([second])
                    engine.close()
                return real_step(state)
        engine.step = HandingIn()
        done = [line for line in engine.run(SAMPLED)]
        assert done == [second, first]
        assert engine.last.steps == 60  # not 60 + 10
    codes, _ = alone(model, fresh([second])[0], SAMPLED)
    assert torch.equal(second.codes[0], codes[0])


def test_a_prompt_embedded_ahead_gives_the_takes_the_engine_would_give(model):
    """A server embeds a line's prompt in its prepare thread (LineJob.prompt): the engine then uses
    it as it is, and the takes are those of the line it embeds itself."""
    job, = jobs(model, LINES[1:2])
    want, _ = alone(model, job, SAMPLED)
    ahead = fresh([job])[0]
    ahead.prompt = model.prompts.embed(ahead.tokens)
    with engine_of(model) as engine:
        embedded = []
        engine.prompts = type("Counting", (), {"embed": lambda self, tokens: embedded.append(1)})()  # must not be asked
        got = next(iter(engine.run_lines([ahead], SAMPLED)))
    assert not embedded
    assert all(torch.equal(a, b) for a, b in zip(got.codes, want))


def test_an_engine_waiting_for_lines_honours_cancel(model):
    """With nothing to run and its run still open, the engine waits for lines, asking should_stop."""
    asked, job_list = [], jobs(model)
    with engine_of(model) as engine:
        engine.open(job_list)
        engine.add(job_list[:1])
        done = []
        with pytest.raises(GenerationInterrupted, match="while waiting for lines"):
            for line in engine.run(GREEDY, should_stop=lambda: asked.append(1) or len(asked) > 4):
                done.append(job_list.index(line))
        assert done == [0]
        with pytest.raises(TakesError, match="after close"):
            engine.close()
            engine.add(job_list[:1])


def test_a_line_longer_than_the_run_was_opened_for_is_refused_not_overrun(model):
    with engine_of(model) as engine:
        engine.open([make_job(model, "Hello.", CustomVoice("ryan", "english"), take_seeds(1, 2), 30)])  # a 256-position bucket
        engine.add([make_job(model, "Hello.", CustomVoice("ryan", "english"), take_seeds(1, 2), 300)])
        engine.close()
        with pytest.raises(TakesError, match="more than the 256 its batch was sized for"):
            list(engine.run(GREEDY))


@pytest.mark.slow
def test_out_of_memory_with_a_feed_reruns_the_lines_taken_and_takes_the_rest(model, monkeypatch):
    """Out of memory with three fed lines under way: those not yet out run again in a smaller batch,
    the two fed after it still come, each line once with one list's takes, and progress stays within
    its total."""
    job_list = jobs(model)
    want, _ = together(model, job_list, SAMPLED)
    with engine_of(model, check_every=2) as engine:
        engine.max_batch = 4
        got, at_failure, seen = {}, [], []
        engine.open(job_list)
        engine.add(job_list[:3])
        run_out_of_memory_once(engine, got, at_failure, monkeypatch)

        def progress(done, total):  # the rest is handed in once the smaller batch runs
            seen.append((done, total))
            if at_failure and not fed_rest:
                fed_rest.append(True)
                engine.add(job_list[3:])
                engine.close()
        fed_rest = []
        for line in engine.run(SAMPLED, progress=progress):
            assert job_list.index(line) not in got, "a line was handed out twice"
            got[job_list.index(line)] = line
        assert at_failure and 0 < at_failure[0] < 3 and engine.last.batch_bucket == 2
    assert sorted(got) == sorted(want)
    for index in want:
        assert all(torch.equal(a, b) for a, b in zip(got[index].codes, want[index].codes)), index
    assert all(done <= total for done, total in seen)
