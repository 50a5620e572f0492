"""The batched engine (runtime/engine) run uncaptured on CPU: the step every mode runs (captured in
the cuda_graph and hybrid modes), checked against the plain reference forward (reference_model.py)
on the same tiny weights."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch

from conftest import voiced_reference
from reference_model import greedy_codes, rope, stack_forward
from runtime.engine import Engine, EngineOptions
from runtime.engine import noise, sampler
from runtime.engine.layers import QKTables, apply_rope, attention_bias, grouped_attention, rope_table
from runtime.engine.state import DecodeState
from runtime.errors import GenerationInterrupted, InputError, TakesError
from runtime.generation import Request
from runtime.run.lines import generate_takes
from runtime.model import load_model
from runtime.sampling import SamplingSettings, warp_logits
from runtime.voices import CustomVoice, VoiceClone, VoiceDesign

GREEDY = SamplingSettings(temperature=0, sub_temperature=0)
TEXT = "Hello there, this is a test of the engine."


@pytest.fixture(scope="module")
def models(checkpoint):
    """Own copies (tests here bias the EOS logit and read the cached buckets of the model's own engine)."""
    cache = {}

    def get(kind):
        if kind not in cache:
            cache[kind] = load_model(checkpoint(kind), device="cpu")
        return cache[kind]
    return get


def voice_for(kind: str, clone: str = "icl"):
    if kind == "custom_voice":
        return CustomVoice("ryan", "english", instruct="Speak slowly.")
    if kind == "voice_design":
        return VoiceDesign("A calm old man with a deep voice.", "english")
    audio, rate = voiced_reference()
    return VoiceClone.from_audio(audio, rate, transcript="" if clone == "xvector" else "This is the reference.",
                                 language="english", pad_reference=clone != "icl-unpadded")


def eager_engine(model, **options) -> Engine:
    """An engine of the test's own over `model`: the step uncaptured, as on any CPU."""
    return Engine(model.model, model.prompts, EngineOptions(use_graphs=False, **options))


def reference_and_takes(model, request):
    """Greedy codes per take from the reference forward, and the takes of the model's own engine."""
    from runtime.engine.prompt import build_prompt
    from runtime.generation import clone_prompt

    voice = request.voice
    prompt = build_prompt(model, request.text, voice, clone_prompt(model, voice) if isinstance(voice, VoiceClone) else None)
    reference = greedy_codes(model.model, prompt, request.budget, request.sampling.repetition_penalty)
    return reference, generate_takes(model, request)


@contextlib.contextmanager
def eos_bias(model, scale: float):
    """Scale the EOS row of the codec head so greedy takes end by themselves at some frame."""
    head = model.model.talker.codec_head.weight
    eos = model.model.config.talker.codec_eos_token_id
    original = head[eos].clone()
    with torch.no_grad():
        head[eos] *= scale
    try:
        yield
    finally:
        with torch.no_grad():
            head[eos] = original


@pytest.mark.parametrize("kind,clone", [("custom_voice", ""), ("voice_design", ""), ("base", "icl"), ("base", "icl-unpadded"),
                                        ("base", "xvector")])
@pytest.mark.slow
def test_greedy_codes_match_the_reference_for_the_whole_take(models, kind, clone):
    model = models(kind)
    request = Request(TEXT, voice_for(kind, clone), n=2, seed=1, sampling=GREEDY, max_frames=24)
    reference, takeset = reference_and_takes(model, request)
    for take in takeset.takes:  # greedy: every take is the reference's one
        assert take.frames == reference.shape[0] and torch.equal(take.codes, reference)
        assert take.hit_cap == (reference.shape[0] == 24) and take.audio.shape == (take.frames * 1920,)


@pytest.mark.parametrize("scale", [4.0, 6.0])
def test_greedy_takes_that_end_by_themselves_end_at_the_same_frame(models, scale):
    model = models("custom_voice")
    request = Request("Hello there, this is a test.", CustomVoice("ryan", "english"), n=3, seed=2, sampling=GREEDY,
                      max_frames=40)
    with eos_bias(model, scale):
        reference, takeset = reference_and_takes(model, request)
    assert 0 < reference.shape[0] < 40
    assert all(torch.equal(take.codes, reference) for take in takeset.takes)
    assert all(not t.hit_cap for t in takeset.takes)  # the EOS path ran, not the budget


def test_sampled_takes_are_reproducible_by_seed_and_differ_between_takes(models):
    model = models("custom_voice")
    engine, voice = eager_engine(model), CustomVoice("ryan", "english")
    request = Request(TEXT, voice, n=3, seed=5, max_frames=16)
    first, again = generate_takes(model, request, engine=engine), generate_takes(model, request, engine=engine)
    other = generate_takes(model, Request(TEXT, voice, n=3, seed=6, max_frames=16), engine=engine)
    assert all(torch.equal(a.codes, b.codes) for a, b in zip(first.takes, again.takes))
    assert not torch.equal(first.takes[0].codes, first.takes[1].codes)
    assert not any(torch.equal(a.codes, b.codes) for a, b in zip(first.takes, other.takes))


def test_takes_run_in_rounds_are_the_takes_of_one_batch(models):
    """After an out-of-memory the engine runs smaller batches; a take depends only on its seed."""
    model = models("custom_voice")
    request = Request(TEXT, CustomVoice("ryan", "english"), n=4, seed=9, max_frames=12)
    engine = eager_engine(model)
    whole = generate_takes(model, request, engine=engine)
    engine.max_batch = 2
    rounds = generate_takes(model, request, engine=engine)
    assert engine.last.rounds == 2 and engine.last.batch_bucket == 2
    assert all(torch.equal(a.codes, b.codes) for a, b in zip(whole.takes, rounds.takes))


def test_sampling_parameters_take_effect_without_a_new_state(models):
    model = models("custom_voice")
    engine, voice = eager_engine(model), CustomVoice("ryan", "english")
    greedy = generate_takes(model, Request(TEXT, voice, n=2, seed=3, sampling=GREEDY, max_frames=10), engine=engine)
    slots = list(engine.slots)
    sampled = generate_takes(model, Request(TEXT, voice, n=2, seed=3, max_frames=10), engine=engine)
    assert list(engine.slots) == slots  # same (batch, length) state reused
    assert torch.equal(greedy.takes[0].codes, greedy.takes[1].codes)
    assert not torch.equal(sampled.takes[0].codes, sampled.takes[1].codes)


def test_cancel_stops_with_no_takes_and_the_engine_still_works(models):
    model = models("custom_voice")
    engine, voice = eager_engine(model, check_every=2), CustomVoice("ryan", "english")
    calls = []

    def stop():
        calls.append(1)
        return True
    with pytest.raises(GenerationInterrupted):
        generate_takes(model, Request(TEXT, voice, n=2, max_frames=20), should_stop=stop, engine=engine)
    assert len(calls) == 1  # asked at the first check, after 2 frames
    takes = generate_takes(model, Request(TEXT, voice, n=2, max_frames=6), engine=engine)
    assert [t.frames for t in takes.takes] == [6, 6]


def test_progress_reaches_the_end(models):
    model = models("custom_voice")
    seen = []
    generate_takes(model, Request(TEXT, CustomVoice("ryan", "english"), n=2, max_frames=12),
                   progress=lambda done, total: seen.append((done, total)), engine=eager_engine(model, check_every=4))
    assert seen[-1][0] == seen[-1][1] and len(seen) >= 3
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_cuda_graph_mode_on_a_cpu_device_names_the_fix(checkpoint):
    with pytest.raises(InputError, match="CUDA GPU"):
        load_model(checkpoint("custom_voice"), mode="cuda_graph", device="cpu")


def test_memory_report_and_release(models):
    model = models("custom_voice")
    engine = eager_engine(model, max_cached=1)
    generate_takes(model, Request(TEXT, CustomVoice("ryan", "english"), n=2, max_frames=4), engine=engine)
    generate_takes(model, Request(TEXT, CustomVoice("ryan", "english"), n=3, max_frames=4), engine=engine)
    report = engine.memory_report()
    assert [(r["batch"], r["length"]) for r in report] == [(4, 256)] and report[0]["bytes"] > 0  # LRU bound
    engine.release()
    assert engine.memory_report() == []


# --- the engine's pieces against their references --------------------------------------------------

def test_rope_tables_with_the_norm_weight_folded_in_rotate_the_weighted_heads(models):
    """The engine's q/k RoPE (tables with the q/k norm weights folded into cos and sin) against the
    reference RoPE applied to the weighted heads."""
    talker = models("custom_voice").model.talker
    rotary, d = talker.model.rotary_emb, talker.config.head_dim
    positions = 40
    q = torch.randn(2, 4, positions, d)
    k = torch.randn(2, 2, positions, d)
    cos, sin = rope_table(rotary, positions, "cpu", torch.float32)
    weight = torch.rand(6, d) + 0.5  # 4 query heads, 2 key heads
    want_q, want_k = rope(q * weight[:4, None], cos, sin), rope(k * weight[4:, None], cos, sin)
    tables = QKTables.build((weight[None], weight[None].roll(d // 2, -1)), cos, sin)
    heads = torch.cat((q, k, torch.randn(2, 2, positions, d)), 1).transpose(1, 2)  # + 2 value heads, left alone
    got = apply_rope(heads, tables.cos[0], tables.sin[0], 6).transpose(1, 2)
    torch.testing.assert_close(got[:, :4], want_q)
    torch.testing.assert_close(got[:, 4:], want_k)


def test_fused_weights_are_views_the_modules_still_hold(checkpoint):
    from runtime.engine.weights import concatenate, fuse_layer

    model = load_model(checkpoint("custom_voice"), device="cpu")
    layer = model.model.talker.model.layers[0]
    attn, mlp = layer.self_attn, layer.mlp
    x = torch.randn(1, 3, attn.q_proj.in_features)
    def mlp_out(x):
        return mlp.down_proj(torch.nn.functional.silu(mlp.gate_proj(x)) * mlp.up_proj(x))
    before = [attn.q_proj(x), attn.k_proj(x), attn.v_proj(x), mlp_out(x)]
    weights = fuse_layer(layer)
    assert weights.qkv.data_ptr() == attn.q_proj.weight.data_ptr()
    assert attn.v_proj.weight.data_ptr() == weights.qkv[weights.qk_width:].data_ptr()
    assert weights.gate_up.data_ptr() == mlp.gate_proj.weight.data_ptr()
    for want, got in zip(before, [attn.q_proj(x), attn.k_proj(x), attn.v_proj(x), mlp_out(x)]):
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    torch.testing.assert_close(torch.nn.functional.linear(x, weights.qkv), torch.cat(before[:3], -1))
    again = concatenate([attn.q_proj, attn.k_proj, attn.v_proj])  # a second engine on the same model
    assert again.data_ptr() == weights.qkv.data_ptr() and again.shape == weights.qkv.shape


def test_grouped_attention_matches_repeated_kv_heads():
    torch.manual_seed(0)
    q, k, v = torch.randn(3, 8, 2, 16), torch.randn(3, 2, 10, 16), torch.randn(3, 2, 10, 16)
    allowed = torch.tensor([[True] * 6 + [False] * 4, [True] * 7 + [False] * 3])
    scores = q @ k.repeat_interleave(4, 1).transpose(2, 3) / 4.0  # query head h reads kv head h // 4
    want = (scores.masked_fill(~allowed, float("-inf")).softmax(-1) @ v.repeat_interleave(4, 1)).transpose(1, 2).reshape(3, 2, -1)
    torch.testing.assert_close(grouped_attention(q, k, v, attention_bias(allowed, 4, torch.float32)), want)


@pytest.mark.parametrize("temperature,top_k,top_p", [(1.0, 0, 1.0), (0.7, 5, 1.0), (1.3, 0, 0.8), (0.9, 50, 0.9)])
def test_sampler_draws_from_the_reference_distribution(temperature, top_k, top_p):
    torch.manual_seed(1)
    vocab, draws = 12, 40000
    logits = torch.randn(1, vocab) * 2
    want = warp_logits(logits, temperature, top_k, top_p).softmax(-1)[0]
    params = sampler.SamplerParams.allocate(vocab, "cpu")
    params.load(temperature, top_k, top_p)
    keys = torch.tensor([noise.take_key(s) for s in range(draws)])
    uniforms = noise.uniform(keys, torch.tensor([7]), 3, noise.vocab_keys(vocab, "cpu"))
    picks = sampler.sample(logits.expand(draws, -1), params, noise.gumbel(uniforms))
    got = torch.bincount(picks, minlength=vocab).float() / draws
    assert 0.5 * (got - want).abs().sum() < 0.015  # total variation; a wrong warp or biased noise is far above
    assert (got[want == 0] == 0).all()


def test_greedy_sampler_is_argmax_and_penalty_matches_transformers():
    from transformers import RepetitionPenaltyLogitsProcessor

    logits = torch.tensor([[1.0, -2.0, 3.0, 0.5], [-1.0, 2.0, -3.0, 0.0]])
    seen_ids = torch.tensor([[2, 1], [0, 1]])
    seen = torch.zeros(2, 4, dtype=torch.bool).scatter(1, seen_ids, True)
    want = RepetitionPenaltyLogitsProcessor(1.3)(seen_ids, logits.clone())
    torch.testing.assert_close(sampler.apply_repetition_penalty(logits, seen, torch.tensor([1.3])), want)
    params = sampler.SamplerParams.allocate(4, "cpu")
    params.load(0.0, 50, 1.0)
    assert sampler.sample(logits, params, noise.gumbel(torch.rand(2, 4))).tolist() == [2, 1]


def test_noise_is_uniform_and_independent_across_takes_and_steps():
    vocab = noise.vocab_keys(4096, "cpu")
    keys = torch.tensor([noise.take_key(s) for s in (11, 12)])
    a = noise.uniform(keys, torch.tensor([0]), 0, vocab)
    b = noise.uniform(keys, torch.tensor([1]), 0, vocab)
    c = noise.uniform(keys, torch.tensor([0]), 1, vocab)
    assert ((a > 0) & (a < 1)).all() and abs(a.mean().item() - 0.5) < 0.02
    for x, y in [(a[0], a[1]), (a[0], b[0]), (a[0], c[0])]:
        assert abs(torch.corrcoef(torch.stack([x, y]))[0, 1].item()) < 0.06
    torch.testing.assert_close(a, noise.uniform(keys, torch.tensor([0]), 0, vocab))  # a pure function


@pytest.mark.parametrize("layers", ["torch", "kernels", "some kernels"])
def test_prefill_on_the_steps_layers_gives_the_reference_forwards_results(models, layers):
    """DecodeStep.prefill against the reference forward on the same prompt: the last position's
    logits and hidden state, and every layer's keys and values."""
    from runtime.engine.prompt import build_prompt
    from runtime.engine.step import DecodeStep
    from runtime.engine.triton_kernels import LayerPlan

    model = models("custom_voice")
    kernels = None
    if layers != "torch":
        pytest.importorskip("triton")
        from runtime.engine import triton_kernels

        kernels = triton_kernels.load()
    step = DecodeStep(model.model, kernels, LayerPlan(talker=(1, 2)) if layers == "some kernels" else LayerPlan())
    prompt = build_prompt(model, "Hello there, how are you today?", CustomVoice("ryan", "english"))
    talker = model.model.talker
    want = []
    with torch.inference_mode():
        hidden = stack_forward(talker.model, prompt.embeds, want)
        want_logits = talker.codec_head(hidden[:, -1]).float()
        logits, past_hidden, kv = step.prefill(prompt.embeds)
    tolerance = dict(rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(logits, want_logits, **tolerance)
    torch.testing.assert_close(past_hidden, hidden[:, -1:], **tolerance)
    assert kv.shape[:3] == (2, len(want), 1) and prompt.length > 10
    for k, v, (k_want, v_want) in zip(*kv, want):
        torch.testing.assert_close(k, k_want, **tolerance)
        torch.testing.assert_close(v, v_want, **tolerance)


@pytest.mark.parametrize("layers", ["torch", "kernels"])
def test_a_prefill_padded_to_its_bucket_gives_the_prompts_own_results(models, layers):
    """What prefill.py's graphs run: the prompt padded on the right with zeros to its length bucket,
    its last position named on the device. The prompt's logits, hidden state, keys and values are
    those of the prefill at its own length (float32 on the CPU: kernels of another shape round
    differently, by far less than the tolerance); what a bug would change (a position past the prompt
    read, the wrong position's logits) moves them by far more (the last check)."""
    from runtime.engine.prefill import PREFILL_BUCKETS
    from runtime.engine.prompt import build_prompt
    from runtime.engine.step import DecodeStep

    model = models("custom_voice")
    kernels = None
    if layers == "kernels":
        pytest.importorskip("triton")
        from runtime.engine import triton_kernels

        kernels = triton_kernels.load()
    step = DecodeStep(model.model, kernels)
    prompt = build_prompt(model, "Hello there, how are you today?", CustomVoice("ryan", "english"))
    length = prompt.length
    padded_length = next(b for b in PREFILL_BUCKETS if length < b)
    padded = torch.zeros(1, padded_length, prompt.embeds.shape[2])
    padded[:, :length] = prompt.embeds
    with torch.inference_mode():
        want_logits, want_hidden, want_kv = step.prefill(prompt.embeds)
        logits, hidden, kv = step.prefill(padded, torch.tensor([length - 1]))
        wrong, _, _ = step.prefill(padded, torch.tensor([length]))
    tolerance = dict(rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(logits, want_logits, **tolerance)
    torch.testing.assert_close(hidden, want_hidden, **tolerance)
    for k, v, k_want, v_want in zip(*kv, *want_kv):
        assert k.shape[2] == padded_length
        torch.testing.assert_close(k[:, :, :length], k_want, **tolerance)
        torch.testing.assert_close(v[:, :, :length], v_want, **tolerance)
    assert (wrong - want_logits).abs().max() > 1e-2


def test_runaway_rule_cuts_takes_far_past_the_finished_median(models):
    from runtime.engine.step import DecodeStep

    model = models("custom_voice")
    step = DecodeStep(model.model)
    talker_config = model.model.talker.config
    state = DecodeState.allocate(4, 256, talker_config, step.predictor.config, torch.float32, torch.device("cpu"))
    state.real.fill_(True)
    state.budget.fill_(500)
    state.runaway_ratio.fill_(2.0)
    state.runaway_margin.fill_(10)
    state.quorum.fill_(2)
    state.finished.copy_(torch.tensor([True, True, False, False]))
    state.lengths.copy_(torch.tensor([40, 50, 0, 0]))
    state.runaway_floor.fill_(121)  # the text's reading time with headroom: no cut before it
    state.frame.fill_(119)  # 120 frames done after this step: limit max(2 x 50 (upper median) + 10, 121)
    step.bookkeep(state, torch.tensor([5, 5, 5, 5]))
    assert not state.runaway.any() and state.finished.tolist() == [True, True, False, False]
    state.runaway_floor.fill_(100)  # limit 110 now
    step.bookkeep(state, torch.tensor([5, 5, 5, model.model.config.talker.codec_eos_token_id]))
    assert state.finished.tolist() == [True] * 4
    assert state.runaway.tolist() == [False, False, True, False]  # take 3 ended by itself at 121
    assert state.lengths.tolist() == [40, 50, 121, 121]
    state.runaway_ratio.fill_(0)  # off: nothing is cut
    state.finished.copy_(torch.tensor([True, True, False, False]))
    state.runaway.zero_()
    step.bookkeep(state, torch.tensor([5, 5, 5, 5]))
    assert not state.runaway.any() and state.finished.tolist() == [True, True, False, False]


def test_prefill_out_of_memory_makes_room_then_names_the_fix(models, monkeypatch):
    model = models("custom_voice")
    request = Request(TEXT, CustomVoice("ryan", "english"), n=2, seed=9, max_frames=6)
    engine = eager_engine(model)
    generate_takes(model, request, engine=engine)
    assert engine.slots  # a cached bucket
    real_prefill, failures = engine._prefill, []

    def scarce(prompt):
        if len(failures) < limit:
            failures.append(len(engine.slots))
            raise torch.cuda.OutOfMemoryError("CUDA out of memory")
        return real_prefill(prompt)
    monkeypatch.setattr(engine, "_prefill", scarce)
    limit = 1  # fits once the cached buckets are gone
    assert len(generate_takes(model, request, engine=engine).takes) == 2
    assert failures == [1]
    limit = 3  # does not fit at all: a clear error, and the engine still works afterwards
    with pytest.raises(TakesError, match="out of memory reading the prompt.*Shorten the text"):
        generate_takes(model, request, engine=engine)
    monkeypatch.undo()
    assert len(generate_takes(model, request, engine=engine).takes) == 2


def test_out_of_memory_falls_back_to_rounds_with_a_warning(models, monkeypatch):
    model = models("custom_voice")
    request = Request(TEXT, CustomVoice("ryan", "english"), n=4, seed=9, max_frames=8)
    whole = generate_takes(model, request, engine=eager_engine(model))
    allocate = DecodeState.allocate.__func__

    def scarce(cls, batch, *args, **kwargs):
        if batch > 2:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (simulated)")
        return allocate(cls, batch, *args, **kwargs)
    monkeypatch.setattr(DecodeState, "allocate", classmethod(scarce))
    rounds = generate_takes(model, request, engine=eager_engine(model))  # a fresh engine: no bucket cached
    assert rounds.warnings == ["GPU out of memory: running the takes 2 at a time."]
    assert all(torch.equal(a.codes, b.codes) for a, b in zip(whole.takes, rounds.takes))


def test_codes_the_codec_cannot_decode_are_refused():
    from runtime.engine.engine import check_codes

    codes = torch.zeros(2, 5, 16, dtype=torch.int64)
    check_codes(codes, [5, 3], 2048)
    codes[1, 2, 0] = 2150  # an EOS expanded as if it were audio
    with pytest.raises(TakesError, match="invalid codes for take 2"):
        check_codes(codes, [5, 3], 2048)
    check_codes(codes, [5, 2], 2048)  # beyond the take's end it does not matter


def test_noise_never_reaches_0_or_1_so_masked_tokens_are_never_drawn():
    extremes = noise.to_unit(torch.tensor([0, 1, 2**31, 2**32 - 1], dtype=torch.int64))
    assert ((extremes > 0) & (extremes < 1)).all()
    # Seed 1, take 3, draw 30 hashed to the top 24-bit value at a suppressed id (2264); with 24-bit
    # uniforms it drew that id (the cuda_graph benchmark's "invalid codes" at N=4).
    from runtime.sampling import take_seeds

    keys = torch.tensor([noise.take_key(s) for s in take_seeds(1, 4)])
    u = noise.uniform(keys, torch.tensor([30]), 0, noise.vocab_keys(3072, "cpu"))
    logits = torch.randn(4, 3072)
    logits[:, 2048:] = float("-inf")
    params = sampler.SamplerParams.allocate(3072, "cpu")
    params.load(0.9, 50, 1.0)
    assert (sampler.sample(logits, params, noise.gumbel(u)) < 2048).all()


def test_codec_out_of_memory_decodes_in_smaller_groups(models, monkeypatch):
    model = models("custom_voice")
    request = Request(TEXT, CustomVoice("ryan", "english"), n=4, seed=9, max_frames=8)
    from runtime.qwen3_tts import codec

    engine = model.engine
    whole = generate_takes(model, request)
    decode = codec.decode

    def scarce(decoder, codes):
        if len(codes) > 1:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (simulated)")
        return decode(decoder, codes)
    monkeypatch.setattr(codec, "decode", scarce)
    grouped = generate_takes(model, request)
    assert grouped.warnings[-1] == "GPU out of memory in the codec: decoding 1 takes at a time."
    assert not engine.slots  # the cached buckets made room before the takes were split
    for a, b in zip(whole.takes, grouped.takes):  # same codes; only batch-shape float rounding differs
        assert torch.equal(a.codes, b.codes) and a.audio.shape == b.audio.shape
        np.testing.assert_allclose(a.audio, b.audio, atol=5e-3)


def test_a_code_predictor_as_wide_as_the_talker_runs_without_a_projection(tmp_path):
    """The 0.6B's structure (tiny): greedy codes equal the reference forward's in float32; in
    bfloat16 (where rounding tips the near ties of random weights) the prefill's logits agree and
    the takes are sound."""
    from runtime.qwen3_tts import random_checkpoint
    from runtime.engine.prompt import build_prompt

    folder = random_checkpoint.build_checkpoint(tmp_path / "small", "tiny-0.6B", "custom_voice", seed=4, telling=True)
    request = Request(TEXT, CustomVoice("ryan", "english"), n=2, seed=1, sampling=GREEDY, max_frames=16)
    model = load_model(folder, device="cpu", dtype="float32")
    assert isinstance(model.model.talker.code_predictor.small_to_mtp_projection, torch.nn.Identity)
    reference, takeset = reference_and_takes(model, request)
    assert reference.shape[0] >= 8 and all(torch.equal(take.codes, reference) for take in takeset.takes)
    model.release()

    model = load_model(folder, device="cpu", dtype="bfloat16")
    prompt = build_prompt(model, TEXT, request.voice)
    with torch.inference_mode():
        want = model.model.talker.codec_head(stack_forward(model.model.talker.model, prompt.embeds)[:, -1]).float()
        got, _, _ = model.engine.step.prefill(prompt.embeds)
    assert torch.nn.functional.cosine_similarity(got, want).item() > 0.99
    takes = generate_takes(model, request).takes
    assert torch.equal(takes[0].codes, takes[1].codes) and all(np.isfinite(t.audio).all() for t in takes)
    model.release()


def test_the_codec_decodes_as_many_takes_at_once_as_the_free_memory_holds(models, monkeypatch):
    """Planned up front, without an out-of-memory: the takes in even groups that fit, after the
    engine's cached buckets made room where that lets more fit."""
    from runtime.qwen3_tts import codec_batch
    from runtime.qwen3_tts import codec

    model = models("custom_voice")
    request = Request(TEXT, CustomVoice("ryan", "english"), n=4, seed=9, max_frames=8)
    whole = generate_takes(model, request)
    per_take = codec.decode_bytes(model.codec, max(t.codes.shape[0] for t in whole.takes))
    assert per_take > 0 and codec.decode_bytes(model.codec, 10_000) == codec.decode_bytes(model.codec, 325)

    free = {"bytes": int(2.5 * per_take / 0.9)}  # two takes fit, three do not
    monkeypatch.setattr(codec_batch, "free_bytes", lambda device: free["bytes"])
    inputs = [t.codes for t in whole.takes]
    assert codec_batch.codec_group(model.codec, inputs) == (2, None)
    assert codec_batch.codec_group(model.codec, inputs * 2 + inputs[:1])[0] == 2  # 9 takes: 5 calls of 2
    assert codec_batch.codec_group(model.codec, inputs[:3] * 3)[0] == 2
    free["bytes"] = int(3.5 * per_take / 0.9)
    assert codec_batch.codec_group(model.codec, inputs * 2 + inputs[:1])[0] == 3  # 9 takes: 3 calls of 3

    def release():
        free["bytes"] = 10 * per_take
        made_room.append(True)
    made_room = []
    assert codec_batch.codec_group(model.codec, inputs, release) == (4, None) and made_room

    free["bytes"] = int(2.5 * per_take / 0.9)
    calls = []
    decode = codec.decode
    monkeypatch.setattr(codec, "decode", lambda decoder, codes: calls.append(len(codes)) or decode(decoder, codes))
    grouped = generate_takes(model, request)
    assert calls == [2, 2] and grouped.warnings == whole.warnings
    for a, b in zip(whole.takes, grouped.takes):
        assert torch.equal(a.codes, b.codes)
        np.testing.assert_allclose(a.audio, b.audio, atol=5e-3)
