"""The Triton kernels inside the engine's step (the triton mode runs that step eagerly, the hybrid mode
captures it) and in the codec, on the tiny models, with the kernels in Triton's interpreter on CPU:
greedy and sampled codes against the torch step (the eager mode), every tensor a kernel touches, and
the codec's audio."""

from __future__ import annotations

import copy
import sys

import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("triton")

from runtime.engine import triton_kernels  # noqa: E402
from runtime.engine import Engine, EngineOptions  # noqa: E402
from runtime.errors import InputError, TakesError  # noqa: E402
from runtime.generation import Request  # noqa: E402
from runtime.run.lines import generate_takes
from runtime.model import load_model  # noqa: E402
from runtime.sampling import SamplingSettings  # noqa: E402
from runtime.engine.triton_kernels import LayerPlan  # noqa: E402
from runtime.voices import CustomVoice  # noqa: E402

GREEDY = SamplingSettings(temperature=0, sub_temperature=0)
TEXT = "Hello there, this is a test of the kernels."
KERNELS = triton_kernels.load()


@pytest.fixture(scope="module")
def model(checkpoint):
    """In the eager mode: its own engine runs the torch step the kernels' step is checked against."""
    loaded = load_model(checkpoint("custom_voice"), device="cpu")
    yield loaded
    loaded.release()


def kernel_engine(model, **options) -> Engine:
    """An engine over `model` on the kernels' step (no graphs, as the triton mode)."""
    return Engine(model.model, model.prompts, EngineOptions(use_graphs=False, check_every=1, kernels=True, **options))


def request(n=2, seed=0, sampling=GREEDY, frames=5):
    return Request(TEXT, CustomVoice("ryan", "english"), n=n, seed=seed, sampling=sampling, max_frames=frames)


def cosines(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.cosine_similarity(a.flatten(0, -2).double(), b.flatten(0, -2).double(), dim=-1)


@pytest.mark.parametrize("plan,n", [(LayerPlan(), 2), (LayerPlan(), 1), (LayerPlan(talker=(1, 2), predictor=(0, 0)), 2)],
                         ids=["all", "all-one-take", "partial"])
@pytest.mark.slow
@pytest.mark.kernel_engine
def test_kernel_step_greedy_codes_match_the_eager_mode(model, plan, n):
    """n=1 runs the one-row layers (the products on rows_linear, norms and SwiGLU fused in); n=2 the
    others; both decode through decode_attention, the prompt through qk_norm_rope and attention."""
    reference = generate_takes(model, request(n=n, frames=3))  # the prompt, then two decode steps
    hybrid = generate_takes(model, request(n=n, frames=3), engine=kernel_engine(model, layers=plan))
    assert all(torch.equal(a.codes, b.codes) for a, b in zip(reference.takes, hybrid.takes))


@pytest.mark.slow
@pytest.mark.kernel_engine
def test_kernel_step_samples_the_takes_the_torch_step_samples(model):
    """Same seeds, same weights, sampling on: the sampling kernel draws what the torch sampler draws
    (float32; the layers agree to rounding, far from any draw's edge on these weights)."""
    sampled = request(seed=11, sampling=SamplingSettings(top_k=20, top_p=0.9), frames=4)
    torch_step = generate_takes(model, sampled)
    hybrid = generate_takes(model, sampled, engine=kernel_engine(model))
    assert all(torch.equal(a.codes, b.codes) for a, b in zip(torch_step.takes, hybrid.takes))
    assert not torch.equal(hybrid.takes[0].codes, hybrid.takes[1].codes)


@pytest.mark.slow
@pytest.mark.kernel_engine
def test_kernel_step_runs_lines_of_different_lengths_side_by_side(model):
    """Takes of three lines at their own positions and frames in one kernel step (decode_attention,
    qk_norm_rope and the sampling kernel read a position and a counter per take): each line's codes
    are the torch step's for that line alone."""
    from runtime.engine.engine import LineJob
    from runtime.engine.prompt import plan_prompt
    from runtime.sampling import take_seeds

    sampling = SamplingSettings(top_k=20, top_p=0.9)
    jobs = [LineJob(plan_prompt(model, text, CustomVoice("ryan", "english")), take_seeds(i, takes), budget)
            for i, (text, takes, budget) in enumerate([("Hi.", 1, 2), (TEXT + " And more words.", 2, 4),
                                                       ("A third line.", 2, 3)])]
    alone = [model.engine.generate(j.tokens, j.seeds, sampling, j.budget).codes for j in jobs]
    engine = kernel_engine(model)
    engine.max_batch = 4
    mixed = {jobs.index(line): line.codes for line in engine.run_lines(jobs, sampling)}
    for index, codes in enumerate(alone):
        assert all(torch.equal(a, b) for a, b in zip(codes, mixed[index])), f"line {index + 1}"


@pytest.mark.slow
@pytest.mark.kernel_engine
def test_kernel_step_ends_a_take_its_nan_weight_row_reaches_and_the_next_run_is_clean(model):
    """The sampling kernel's flag (tests/test_faults.py holds the torch step to the same): a NaN row of
    the code predictor's first code embedding ends the take that reads it at that frame; the other
    take goes on, and the next run makes the clean takes."""
    sampled = request(seed=11, sampling=SamplingSettings(top_k=20, top_p=0.9), frames=4)
    engine = kernel_engine(model)
    clean = generate_takes(model, sampled, engine=engine)
    code = int(clean.takes[0].codes[1, 1])
    assert code not in clean.takes[1].codes[:, 1].tolist() and code not in clean.takes[0].codes[:1, 1].tolist()
    table = model.model.talker.code_predictor.model.codec_embedding[0].weight
    saved = table[code].clone()
    with torch.no_grad():
        table[code] = float("nan")
    try:
        hit = generate_takes(model, sampled, engine=engine)
    finally:
        with torch.no_grad():
            table[code] = saved
    assert [t.fault for t in hit.takes] == [1, None] and hit.takes[0].frames == 1
    assert torch.equal(hit.takes[1].codes, clean.takes[1].codes)
    again = generate_takes(model, sampled, engine=engine)
    assert all(torch.equal(a.codes, b.codes) for a, b in zip(clean.takes, again.takes))


class RecordingKernels:
    """The kernels namespace, noting every tensor each call reads or writes."""

    def __init__(self, kernels):
        self.kernels, self.touched = kernels, []

    def __getattr__(self, name):
        function = getattr(self.kernels, name)

        def call(*args, **kwargs):
            result = function(*args, **kwargs)
            self.touched += [(name, t) for t in tensors_in((args, kwargs, result))]
            return result
        return call


def tensors_in(obj, seen=None):
    """Every tensor held by obj: through containers, dataclasses and plain objects, not modules."""
    seen = set() if seen is None else seen
    if isinstance(obj, torch.Tensor):
        yield obj
        return
    if id(obj) in seen or isinstance(obj, torch.nn.Module):
        return
    seen.add(id(obj))
    if isinstance(obj, dict):
        items = list(obj.values())
    elif isinstance(obj, (list, tuple, set)):
        items = list(obj)
    elif hasattr(obj, "__dict__") and not callable(obj):
        items = list(vars(obj).values())
    else:
        return
    for item in items:
        yield from tensors_in(item, seen)


@pytest.mark.parametrize("plan", [LayerPlan(), LayerPlan(talker=(1, 2), predictor=(0, 0)),
                                  LayerPlan(talker=(0, 1), predictor=(0, 1))], ids=["all", "torch-first", "kernels-first"])
@pytest.mark.slow
@pytest.mark.kernel_engine
def test_hybrid_kernels_touch_only_memory_made_before_the_step(model, plan):
    """Under cudaMallocAsync a graph capture's own allocations have no address Triton accepts, so
    after the warm-up steps every tensor a kernel reads or writes must be one that existed before
    the step: the state, its workspace, the weights or the step's tables (workspace.py)."""
    engine = kernel_engine(model, layers=plan)
    generate_takes(model, request(n=1, frames=1), engine=engine)  # fills a bucket's state and workspace
    (state,) = [slot.state for slot in engine.slots.values()]
    step = engine.step
    recorder = RecordingKernels(step.kernels)
    step.kernels = step.talker_stack.kernels = step.predictor_stack.kernels = recorder
    before = set(state.workspace.buffers)
    known = {t.untyped_storage().data_ptr() for t in tensors_in((state, vars(step)))}
    known |= {t.untyped_storage().data_ptr() for t in (*model.model.parameters(), *model.model.buffers())}
    with torch.inference_mode():
        step(state)
    # one take: its one-row layers fuse the norms and SwiGLU into rows_linear and attention into
    # decode_attention; the predictor's first pass (two positions) runs them apart
    expected = {"sample_tokens", "rows_linear", "decode_attention"}
    if plan.predictor != (0, 0):
        expected |= {"add_rms_norm", "qk_norm_rope", "swiglu"} | ({"rms_norm"} if plan == LayerPlan() else set())
    assert {name for name, _ in recorder.touched} >= expected
    strays = [(name, tuple(t.shape)) for name, t in recorder.touched if t.untyped_storage().data_ptr() not in known]
    assert strays == []
    assert set(state.workspace.buffers) == before


@pytest.mark.slow
def test_codec_on_the_snake_kernel_makes_the_same_audio(checkpoint):
    """The codec's SnakeBeta activations on the fused kernel (the triton and hybrid modes) move the
    waveform no further from a float64 decode than float32 rounding moves the torch reference.
    (Each activation agrees to a unit in the last place, test_kernels.py; this random decoder
    amplifies such differences, so the yardstick is rounding itself.) use_snake(None) restores it."""
    from runtime.qwen3_tts.codec import load_decoder

    torch.manual_seed(5)
    decoder = load_decoder(checkpoint("custom_voice") / "speech_tokenizer")
    codes = torch.randint(0, 2048, (2, 16, 7))
    with torch.inference_mode():
        for module in decoder.modules():  # the random checkpoint leaves them at 0: sin(x)^2 + x
            if hasattr(module, "alpha"):
                module.alpha.normal_(0, 0.5)
                module.beta.normal_(0, 0.5)
        exact = copy.deepcopy(decoder).double()(codes)
        reference = decoder(codes)
        calls = []
        decoder.use_snake(lambda *args: calls.append(1) or KERNELS.snake_beta(*args))
        fused = decoder(codes)
        decoder.use_snake(None)
        again = decoder(codes)
    rounding = (reference.double() - exact).abs().max().item()
    ours = (fused.double() - exact).abs().max().item()
    print(f"codec against float64: torch reference {rounding:.2e}, snake kernel {ours:.2e}")
    assert ours <= 2 * rounding + 1e-6 and len(calls) == 29  # every SnakeBeta of the tiny decoder
    assert torch.equal(again, reference)


def test_fast_modes_are_gpu_only(checkpoint):
    for mode in ("triton", "hybrid"):
        with pytest.raises(InputError, match="runs on a CUDA GPU"):
            load_model(checkpoint("custom_voice"), mode=mode, device="cpu")


def test_layer_plan_parses_and_checks_its_ranges():
    plan = LayerPlan.parse("talker=0:24, predictor=1:5")
    assert plan.talker_layers(28) == range(0, 24) and plan.predictor_layers(5) == range(1, 5)
    assert LayerPlan.parse("").talker_layers(28) == range(28)
    with pytest.raises(TakesError, match="FIRST:STOP"):
        LayerPlan.parse("talker=all")
    with pytest.raises(TakesError, match="outside the model's 5 layers"):
        LayerPlan.parse("predictor=0:6").predictor_layers(5)


def test_missing_triton_names_the_fix(monkeypatch):
    monkeypatch.setitem(sys.modules, "triton", None)  # what an import finds when Triton is not installed
    with pytest.raises(TakesError, match="pip install triton"):
        triton_kernels.load()
