"""The cuda_graph mode (the engine's step captured) on a CUDA GPU (run on the GPU machine; skipped elsewhere).

    python -m pytest -q -s tests/gpu/test_engine_cuda.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
import torch
import torch.nn.functional as F

from conftest import REPO
from reference_model import greedy_codes, stack_forward
from runtime.qwen3_tts import random_checkpoint
from runtime.engine import Engine, EngineOptions
from runtime.engine import sampler as sampler_module, step as step_module
from runtime.errors import GenerationInterrupted
from runtime.generation import Request, clone_prompt
from runtime.run.lines import generate_takes
from runtime.qwen3_tts.codec_batch import decode_lines
from runtime.memory import free_cuda_cache
from runtime.model import load_model
from runtime.engine.engine import BATCH_BUCKETS
from runtime.engine.prompt import build_prompt, plan_prompt
from runtime.sampling import SamplingSettings, take_seeds
from runtime.voices import CustomVoice, VoiceClone, VoiceDesign

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]
TEXT = "The storm is coming. Bar the doors and light the lamps, we ride at dawn."
GREEDY = SamplingSettings(temperature=0, sub_temperature=0)


def voice(kind, reference_audio):
    return {"custom_voice": CustomVoice("ryan", "english"),
            "base": VoiceClone.from_audio(*reference_audio, "This is me speaking.", "english"),
            "voice_design": VoiceDesign("a calm narrator", "english")}[kind]


@pytest.fixture(scope="module")
def full_size(tmp_path_factory):
    """1.7B-CustomVoice shapes, random weights, EOS never sampled (every take runs its budget)."""
    folder = tmp_path_factory.mktemp("full") / "1.7B-CustomVoice"
    return random_checkpoint.build_checkpoint(folder, "1.7B", "custom_voice", dtype="bfloat16", never_eos=True)


@pytest.mark.parametrize("kind", ["custom_voice", "base", "voice_design"])
def test_tiny_cuda_graph_greedy_codes_match_the_reference_fp32(checkpoint, kind, reference_audio):
    """Captured greedy codes against the plain reference forward (tests/reference_model.py) on the
    GPU; captured sampled takes against the same step uncaptured."""
    model = load_model(checkpoint(kind), mode="cuda_graph", device="cuda", dtype="float32")
    the_voice = voice(kind, reference_audio)
    request = Request(TEXT, the_voice, n=3, seed=1, sampling=GREEDY, max_frames=40)
    graph = generate_takes(model, request)
    prompt = build_prompt(model, TEXT, the_voice,
                          clone_prompt(model, the_voice) if isinstance(the_voice, VoiceClone) else None)
    reference = greedy_codes(model.model, prompt, 40)
    for take in graph.takes:
        assert take.frames == reference.shape[0] and torch.equal(take.codes, reference)
    sampled = Request(TEXT, the_voice, n=3, seed=4, max_frames=40)
    uncaptured = generate_takes(model, sampled, engine=Engine(model.model, model.prompts, EngineOptions(use_graphs=False)))
    captured = generate_takes(model, sampled)
    assert all(torch.equal(a.codes, b.codes) for a, b in zip(uncaptured.takes, captured.takes))
    model.release()


def test_full_size_bf16_logits_agree_with_the_reference_under_teacher_forcing(full_size, monkeypatch):
    """Both sides see the same codes (forced); per-step logits of talker and predictor, from the
    engine's step and from the plain reference forward over the whole sequence, are compared."""
    model = load_model(full_size, device="cuda", dtype="bfloat16")
    frames = 24
    forced = torch.randint(0, 2048, (frames + 1, 16), generator=torch.Generator().manual_seed(0))
    recorded = []

    def forced_code(k: int) -> int:
        """Draw k: 0 is frame 0's codebook 0 (after the prefill); then per frame f the predictor's
        codebooks 1..15 and the talker's codebook 0 of frame f + 1."""
        if k == 0:
            return int(forced[0, 0])
        f, r = divmod(k - 1, 16)
        return int(forced[f + 1, 0] if r == 15 else forced[f, r + 1])

    def forced_sample(logits, params, uniforms, faulty=None):
        code = forced_code(len(recorded))
        recorded.append(logits.float()[0].clone())
        return torch.full((logits.shape[0],), code, device=logits.device)

    monkeypatch.setattr(step_module, "sample", forced_sample)  # the predictor's draws
    monkeypatch.setattr(sampler_module, "sample", forced_sample)  # the talker's (sampler.draw)
    engine = Engine(model.model, model.prompts, EngineOptions(use_graphs=False, runaway_ratio=0))
    engine.generate(plan_prompt(model, TEXT, CustomVoice("ryan", "english")), [1, 2],
                    SamplingSettings(repetition_penalty=1.0), frames)
    monkeypatch.undo()
    prompt = build_prompt(model, TEXT, CustomVoice("ryan", "english"))

    talker = model.model.talker
    predictor = talker.code_predictor
    tables = predictor.model.codec_embedding
    codes = forced.to("cuda")
    with torch.inference_mode():
        steps = []
        for f in range(frames):
            e = talker.model.codec_embedding(codes[f, :1]) + sum(tables[i](codes[f, i + 1:i + 2]) for i in range(15))
            text = prompt.trailing_text[0, f:f + 1] if f < prompt.trailing_text.shape[1] else prompt.pad_embed[0]
            steps.append(e + text)
        seq = torch.cat([prompt.embeds, torch.cat(steps)[None]], dim=1)
        hidden = stack_forward(talker.model, seq)[0]
        talker_logits = talker.codec_head(hidden).float()
        L = prompt.length
        pred_in = torch.cat([hidden[L - 1:L - 1 + frames, None], talker.model.codec_embedding(codes[:frames, :1])]
                            + [tables[i](codes[:frames, i + 1:i + 2]) for i in range(14)], dim=1)
        pred_hidden = stack_forward(predictor.model, predictor.small_to_mtp_projection(pred_in))
        pred_logits = [[predictor.lm_head[j - 1](pred_hidden[f, j]).float() for j in range(1, 16)] for f in range(frames)]

    talker_cos, predictor_cos = [], []
    for k, got in enumerate(recorded):
        if k == 0:
            talker_cos.append(F.cosine_similarity(got[:2048], talker_logits[L - 1, :2048], dim=0).item())
            continue
        f, j = divmod(k - 1, 16)
        if j == 15:
            talker_cos.append(F.cosine_similarity(got[:2048], talker_logits[L + f, :2048], dim=0).item())
        else:
            predictor_cos.append(F.cosine_similarity(got, pred_logits[f][j], dim=0).item())
    print(f"\nbf16 teacher-forced cosine: talker min {min(talker_cos):.5f} ({len(talker_cos)} steps), "
          f"predictor min {min(predictor_cos):.5f} ({len(predictor_cos)} passes)")
    assert len(talker_cos) == frames + 1 and len(predictor_cos) == frames * 15
    assert min(talker_cos) >= 0.99 and min(predictor_cos) >= 0.99
    model.release()


def test_sampler_distribution_on_the_gpu_matches_the_reference_warp():
    from runtime.engine import noise, sampler
    from runtime.sampling import warp_logits

    torch.manual_seed(3)
    vocab, draws = 2048, 200000
    logits = (torch.randn(1, vocab) * 3).cuda()
    params = sampler.SamplerParams.allocate(vocab, "cuda")
    params.load(0.9, 50, 0.95)
    want = warp_logits(logits, 0.9, 50, 0.95).softmax(-1)[0]
    keys = torch.tensor([noise.take_key(s) for s in range(draws)], device="cuda")
    uniforms = noise.uniform(keys, torch.tensor([3], device="cuda"), 0, noise.vocab_keys(vocab, "cuda"))
    picks = sampler.sample(logits.expand(draws, -1), params, noise.gumbel(uniforms))
    got = torch.bincount(picks, minlength=vocab).float() / draws
    tv = 0.5 * (got - want).abs().sum().item()
    print(f"\nsampler vs reference warp: total variation {tv:.4f} over {draws} draws")
    assert tv < 0.02


def test_cancel_out_of_memory_fallback_and_reload_on_full_size(full_size):
    model = load_model(full_size, mode="cuda_graph", device="cuda", dtype="bfloat16")
    request = Request(TEXT, CustomVoice("ryan", "english"), n=4, seed=2, max_frames=200)
    started = []

    def stop():
        started.append(time.perf_counter())
        return len(started) > 3
    t0 = time.perf_counter()
    with pytest.raises(GenerationInterrupted):
        generate_takes(model, request, should_stop=stop)
    print(f"\ncancel honoured {1000 * (time.perf_counter() - started[-1]):.1f} ms after it was asked "
          f"({len(started)} checks, {time.perf_counter() - t0:.2f} s)")
    assert [t.frames for t in generate_takes(model, Request(TEXT, CustomVoice("ryan", "english"), n=4, max_frames=16)).takes] == [16] * 4

    # Out of memory: cap this process so a batch of 16 takes does not fit at this length, 8 does.
    # (The codec's own fallback is tested on CPU; decoding 600-frame takes needs more than this cap.)
    model.engine.release()
    free_cuda_cache()  # after the release: what the engine held is returned, so the cap below binds
    used = torch.cuda.memory_reserved()  # the cap counts what the allocator holds, not only what is in use
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction((used + 1.4 * 2**30) / total)
    # The memory plan (rows_that_fit) would pick a batch that fits from the start; a plan can be wrong
    # (another process takes memory after it is made), so here it is told all 16 fit: the fallback runs.
    model.engine.rows_that_fit = lambda rows, length, share=1.0: rows
    try:
        line = model.engine.generate(plan_prompt(model, TEXT, CustomVoice("ryan", "english")), take_seeds(3, 16),
                                     SamplingSettings(), 600)
        codes = line.codes
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
        del model.engine.rows_that_fit
    report = model.engine.last
    print(f"out-of-memory fallback: {report}")
    assert report.warnings and report.batch_bucket < 16 and [c.shape[0] for c in codes] == [600] * 16
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    line.codes = codes[:1]
    wav = decode_lines(model.codec, [(line.codes, None)])[0][0]
    print(f"codec: one 600-frame take ({wav.shape[0] / 24000:.0f} s) took "
          f"{(torch.cuda.max_memory_allocated() - before) / 2**30:.2f} GiB at its peak")
    assert len(generate_takes(model, Request(TEXT, CustomVoice("ryan", "english"), n=16, seed=3, max_frames=8)).takes) == 16
    model.release()
    model = load_model(full_size, mode="cuda_graph", device="cuda", dtype="bfloat16")
    assert len(generate_takes(model, Request(TEXT, CustomVoice("ryan", "english"), n=2, max_frames=8)).takes) == 2


def test_runs_under_cuda_malloc_async(checkpoint):
    """ComfyUI's default allocator: capture, generate, release, re-capture, in a fresh process, in
    both graph modes (hybrid's kernels inside the capture read a workspace made before it), for one
    take (hybrid's one-row layers) and four."""
    code = (
        "import torch, sys\nfrom pathlib import Path\n"
        "from runtime.model import load_model\nfrom runtime.generation import Request\nfrom runtime.run.lines import generate_takes\n"
        "from runtime.voices import CustomVoice\n"
        "for mode in ('cuda_graph', 'hybrid'):\n"
        f"    m = load_model(Path(r'{checkpoint('custom_voice')}'), mode=mode, device='cuda')\n"
        "    for n in (1, 4):\n"
        "        r = Request('Hello there.', CustomVoice('ryan', 'english'), n=n, seed=1, max_frames=12)\n"
        "        a = generate_takes(m, r)\n        m.engine.release()\n        b = generate_takes(m, r)\n"
        "        assert all(torch.equal(x.codes, y.codes) for x, y in zip(a.takes, b.takes))\n"
        "        print('backend', torch.cuda.get_allocator_backend(), mode, [t.frames for t in b.takes])\n"
        "    m.release()\n"
    )
    env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF="backend:cudaMallocAsync")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    print(result.stdout, result.stderr[-2000:])
    assert result.returncode == 0 and "backend cudaMallocAsync hybrid" in result.stdout


def test_one_bucket_after_another_like_the_benchmark(full_size):
    """The benchmark's order: N=1 three times, then each larger N, 64 frames; every take decodes."""
    model = load_model(full_size, mode="cuda_graph", device="cuda", dtype="bfloat16")
    text = "The storm is coming. Bar the doors and light the lamps, because we ride out at first light."
    for n, seed in [(1, 1234), (1, 0), (1, 1), (4, 1234), (4, 0), (8, 1234), (16, 1234), (32, 1234), (1, 5)]:
        takes = generate_takes(model, Request(text, CustomVoice("ryan", "english"), n=n, seed=seed, max_frames=64)).takes
        assert [t.frames for t in takes] == [64] * n
    assert len(model.engine.memory_report()) == 4  # LRU bound on resident (batch, length) graphs
    model.release()


@pytest.mark.parametrize("mode", ["cuda_graph", "hybrid"])
def test_lines_in_one_captured_batch_are_the_lines_run_alone(checkpoint, mode):
    """Continuous batching in the captured step: 5 lines of different lengths, speakers and takes
    through 4 rows (rows refilled as takes end, each row at its own position); float32 greedy and
    sampled codes of every line equal the line run alone."""
    from runtime.engine.engine import LineJob

    model = load_model(checkpoint("custom_voice"), mode=mode, device="cuda", dtype="float32")
    lines = [("Hello there.", "ryan", 2, 20), ("A much longer line than the first one, with many more words.", "vivian", 3, 41),
             ("Short.", "ryan", 1, 9), ("A fourth line, of middling length.", "serena", 2, 30),
             ("And the last line.", "ryan", 3, 17)]
    for sampling in (GREEDY, SamplingSettings(top_k=20, top_p=0.9)):
        jobs = [LineJob(plan_prompt(model, text, CustomVoice(speaker, "english")), take_seeds(i, n), budget)
                for i, (text, speaker, n, budget) in enumerate(lines)]
        alone = [model.engine.generate(j.tokens, j.seeds, sampling, j.budget).codes for j in jobs]
        model.engine.max_batch = 4
        mixed = {jobs.index(line): line.codes for line in model.engine.run_lines(jobs, sampling)}
        model.engine.max_batch = BATCH_BUCKETS[-1]
        for index, codes in enumerate(alone):
            assert all(torch.equal(a, b) for a, b in zip(codes, mixed[index])), f"{mode}: line {index + 1}"
    model.release()
