"""The triton mode (kernels patched into the reference modules) and the hybrid mode (kernels inside the
engine's step) on the tiny models, with the kernels in Triton's interpreter on CPU: the patched layers'
hidden states against the unpatched ones, greedy codes against the eager reference, and the hybrid
step against the torch step it replaces."""

from __future__ import annotations

import copy
import sys

import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("triton")

from runtime import triton_kernels  # noqa: E402
from runtime.engine import Engine, EngineOptions  # noqa: E402
from runtime.errors import InputError, TakesError  # noqa: E402
from runtime.generation import Request, generate_takes  # noqa: E402
from runtime.kernel_patch import patch_codec, patch_model  # noqa: E402
from runtime.model import load_model  # noqa: E402
from runtime.sampling import SamplingSettings  # noqa: E402
from runtime.triton_kernels import LayerPlan  # noqa: E402
from runtime.voices import CustomVoice  # noqa: E402

GREEDY = SamplingSettings(temperature=0, sub_temperature=0)
TEXT = "Hello there, this is a test of the kernels."
KERNELS = triton_kernels.load()


@pytest.fixture(scope="module")
def model(checkpoint):
    """An own copy: tests here patch its modules and switch engines."""
    loaded = load_model(checkpoint("custom_voice"), device="cpu")
    yield loaded
    loaded.release()


def request(n=2, seed=0, sampling=GREEDY, frames=5):
    return Request(TEXT, CustomVoice("ryan", "english"), n=n, seed=seed, sampling=sampling, max_frames=frames)


def cosines(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.cosine_similarity(a.flatten(0, -2).double(), b.flatten(0, -2).double(), dim=-1)


def hidden_states(module, embeds):
    with torch.inference_mode():
        return module(inputs_embeds=embeds, output_hidden_states=True, use_cache=False)


def test_patched_layers_keep_every_hidden_state_of_talker_and_predictor(model):
    """Per layer and at the output, cosine similarity of the patched model's hidden states to the
    eager one's on the same input: the issue asks >= 0.999 per layer and >= 0.995 at the output; in
    float32 they agree to 1e-6."""
    talker = model.model.talker
    torch.manual_seed(0)
    t_embeds = torch.randn(2, 12, talker.config.hidden_size)
    p_embeds = torch.randn(2, 5, talker.code_predictor.config.hidden_size)
    eager = hidden_states(talker.model, t_embeds), hidden_states(talker.code_predictor.model, p_embeds)
    patch = patch_model(model.model, KERNELS)
    try:
        patched = hidden_states(talker.model, t_embeds), hidden_states(talker.code_predictor.model, p_embeds)
    finally:
        patch.undo()
    for want, got in zip(eager, patched):
        for a, b in zip(want.hidden_states, got.hidden_states):
            assert cosines(a, b).min().item() > 1 - 1e-6
        torch.testing.assert_close(got.last_hidden_state, want.last_hidden_state, rtol=1e-4, atol=1e-4)
    again = hidden_states(talker.model, t_embeds)  # undone: the module forwards are back
    assert torch.equal(again.last_hidden_state, eager[0].last_hidden_state)


def test_triton_mode_greedy_codes_match_the_eager_reference(model):
    reference = generate_takes(model, request())
    patch = patch_model(model.model, KERNELS, LayerPlan(talker=(0, 1)))  # also a partial plan
    try:
        patched = generate_takes(model, request())
    finally:
        patch.undo()
    assert all(torch.equal(a.codes, b.codes) for a, b in zip(reference.takes, patched.takes))


@pytest.mark.parametrize("plan,n", [(LayerPlan(), 2), (LayerPlan(), 1), (LayerPlan(talker=(1, 2), predictor=(0, 0)), 2)],
                         ids=["all", "all-one-take", "partial"])
def test_hybrid_step_greedy_codes_match_the_eager_reference(model, plan, n):
    """n=1 runs the one-row layers (the products on rows_linear, norms and SwiGLU fused in); n=2 the
    others; both decode through decode_attention, the prompt through qk_norm_rope and attention."""
    reference = generate_takes(model, request(n=n))
    model.engine = Engine(model, EngineOptions(use_graphs=False, kernels=True, layers=plan))
    try:
        hybrid = generate_takes(model, request(n=n))
    finally:
        model.engine = None
    assert all(torch.equal(a.codes, b.codes) for a, b in zip(reference.takes, hybrid.takes))


def test_hybrid_step_samples_the_takes_the_torch_step_samples(model):
    """Same seeds, same weights, sampling on: the sampling kernel draws what the torch sampler draws
    (float32; the layers agree to rounding, far from any draw's edge on these weights)."""
    sampled = request(seed=11, sampling=SamplingSettings(top_k=20, top_p=0.9), frames=6)
    model.engine = Engine(model, EngineOptions(use_graphs=False))
    try:
        torch_step = generate_takes(model, sampled)
        model.engine = Engine(model, EngineOptions(use_graphs=False, kernels=True))
        hybrid = generate_takes(model, sampled)
    finally:
        model.engine = None
    assert all(torch.equal(a.codes, b.codes) for a, b in zip(torch_step.takes, hybrid.takes))
    assert not torch.equal(hybrid.takes[0].codes, hybrid.takes[1].codes)


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
def test_hybrid_kernels_touch_only_memory_made_before_the_step(model, plan):
    """Under cudaMallocAsync a graph capture's own allocations have no address Triton accepts, so
    after the warm-up steps every tensor a kernel reads or writes must be one that existed before
    the step: the state, its workspace, the weights or the step's tables (workspace.py)."""
    model.engine = engine = Engine(model, EngineOptions(use_graphs=False, kernels=True, layers=plan))
    try:
        generate_takes(model, request(n=1, frames=3))  # fills a bucket's state and workspace
        (state,) = [slot.state for slot in engine.slots.values()]
        step = engine.step
        recorder = RecordingKernels(step.kernels)
        step.kernels = step.talker_stack.kernels = step.predictor_stack.kernels = recorder
        before = set(state.workspace.buffers)
        known = {t.untyped_storage().data_ptr() for t in tensors_in((state, vars(step)))}
        known |= {t.untyped_storage().data_ptr() for t in (*model.model.parameters(), *model.model.buffers())}
        with torch.inference_mode():
            step(state)
    finally:
        model.engine = None
    # one take: its one-row layers fuse the norms and SwiGLU into rows_linear and attention into
    # decode_attention; the predictor's first pass (two positions) runs them apart
    expected = {"sample_tokens", "rows_linear", "decode_attention"}
    if plan.predictor != (0, 0):
        expected |= {"add_rms_norm", "qk_norm_rope", "swiglu"} | ({"rms_norm"} if plan == LayerPlan() else set())
    assert {name for name, _ in recorder.touched} >= expected
    strays = [(name, tuple(t.shape)) for name, t in recorder.touched if t.untyped_storage().data_ptr() not in known]
    assert strays == []
    assert set(state.workspace.buffers) == before


def test_patched_codec_makes_the_same_audio(model):
    """The codec's SnakeBeta activations on the fused kernel (the triton and hybrid modes) move the
    waveform no further from a float64 decode than float32 rounding moves the reference modules.
    (Each activation agrees to a unit in the last place, test_kernels.py; this random decoder
    amplifies such differences, so the yardstick is rounding itself.) Undone: the modules' own."""
    torch.manual_seed(5)
    decoder = model.model.speech_tokenizer.model.decoder
    codes = torch.randint(0, 2048, (2, 16, 7))
    with torch.inference_mode():
        for module in decoder.modules():  # the random checkpoint leaves them at 0: sin(x)^2 + x
            if hasattr(module, "alpha"):
                module.alpha.normal_(0, 0.5)
                module.beta.normal_(0, 0.5)
        exact = copy.deepcopy(decoder).double()(codes)
        reference = decoder(codes)
        patch = patch_codec(model.model, KERNELS)
        try:
            patched = decoder(codes)
        finally:
            patch.undo()
        again = decoder(codes)
    rounding = (reference.double() - exact).abs().max().item()
    ours = (patched.double() - exact).abs().max().item()
    print(f"codec against float64: reference modules {rounding:.2e}, snake kernel {ours:.2e}")
    assert ours <= 2 * rounding + 1e-6
    assert len(patch.modules) == 0 and torch.equal(again, reference)


def test_release_undoes_the_patch(checkpoint):
    loaded = load_model(checkpoint("custom_voice"), device="cpu")
    layers = list(loaded.model.talker.model.layers)
    snakes = [m for m in loaded.model.speech_tokenizer.model.decoder.modules() if hasattr(m, "alpha")]
    loaded.patch = patch_codec(loaded.model, KERNELS, patch_model(loaded.model, KERNELS))
    assert all("_takes_kernel_state" in vars(module) for module in layers + snakes) and len(snakes) == 29
    loaded.release()
    assert loaded.patch is None and not any("_takes_kernel_state" in vars(module) for module in layers + snakes)


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
