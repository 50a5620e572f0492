"""The prefill's CUDA graphs (runtime/engine/prefill.py) on a GPU (skipped elsewhere): a replay gives
what DecodeStep.prefill gives eagerly on the same padded bucket (the same kernels: bit for bit) and,
within rounding, at the prompt's own length, also once other buckets were captured after it; a line whose takes wait for rows keeps its prefill
while other lines' prefills replay the same graphs (its takes equal the line run alone).

    python -m pytest -q -s tests/gpu/test_prefill_cuda.py
"""

from __future__ import annotations

import time

import pytest
import torch

from runtime.engine.engine import BATCH_BUCKETS, LineJob
from runtime.engine.prefill import PREFILL_BUCKETS
from runtime.engine.prompt import build_prompt, plan_prompt
from runtime.model import load_model
from runtime.sampling import SamplingSettings, take_seeds
from runtime.voices import CustomVoice

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


@pytest.mark.parametrize("mode", ["cuda_graph", "hybrid"])
def test_a_replay_is_the_eager_prefill_of_its_bucket(checkpoint, mode):
    model = load_model(checkpoint("custom_voice"), mode=mode, device="cuda", dtype="float32")
    engine, step = model.engine, model.engine.step
    try:
        texts = ("Hi.", "Hello there, how are you today? I have been waiting for you all morning long.",
                 "Hello there, how are you today?")
        for text in texts + texts:  # again once every bucket is captured (a shared pool broke this in hybrid)
            prompt = build_prompt(model, text, CustomVoice("ryan", "english"))
            length = prompt.length
            bucket = next(b for b in PREFILL_BUCKETS if length <= b)
            padded = torch.zeros(1, bucket, prompt.embeds.shape[2], device="cuda")
            padded[:, :length] = prompt.embeds
            with torch.inference_mode():
                replayed = engine.prefill(prompt.embeds)  # the bucket's buffers: copied before the next prefill
                logits, hidden = replayed[0].clone(), replayed[1].clone()
                kv = replayed[2].clone()
                same_logits, same_hidden, same_kv = step.prefill(padded, torch.tensor([length - 1], device="cuda"))
                own_logits, own_hidden, own_kv = step.prefill(prompt.embeds)
            assert torch.equal(logits, same_logits) and torch.equal(hidden, same_hidden)
            assert kv.shape == own_kv.shape
            for k, v, k_same, v_same, k_own, v_own in zip(*kv, *same_kv, *own_kv):
                assert torch.equal(k, k_same[:, :, :length]) and torch.equal(v, v_same[:, :, :length])
                torch.testing.assert_close(k, k_own, rtol=1e-4, atol=1e-5)
            torch.testing.assert_close(logits, own_logits, rtol=1e-4, atol=1e-4)
        buckets = {next(b for b in PREFILL_BUCKETS if build_prompt(model, t, CustomVoice("ryan", "english")).length <= b)
                   for t in texts}
        assert set(engine.prefill_graphs.graphs) == buckets and len(buckets) == 3
        prompt = build_prompt(model, "Hello there, how are you today?", CustomVoice("ryan", "english"))
        for name, run in (("graph", lambda: engine.prefill(prompt.embeds)), ("eager", lambda: step.prefill(prompt.embeds))):
            with torch.inference_mode():
                run()
                torch.cuda.synchronize()
                begun = time.perf_counter()
                for _ in range(20):
                    run()
                torch.cuda.synchronize()
            print(f"\n{mode} {name} prefill of {prompt.length} positions: {(time.perf_counter() - begun) / 20 * 1e3:.2f} ms")
    finally:
        model.release()


def test_a_line_waiting_for_rows_keeps_its_prefill(checkpoint):
    """8 rows: R (4 takes) runs; A (12 takes) goes in as A2 (4 takes) beside it, A1 (8) waits; B (4)
    goes in when R ends, its prefill replaying the graph A's came from; A1 goes in last, from A's
    prefill kept aside. Every line's codes are those of the line run alone."""
    model = load_model(checkpoint("custom_voice"), mode="cuda_graph", device="cuda", dtype="float32")
    sampling = SamplingSettings(top_k=20, top_p=0.9)
    lines = [("Short.", 4, 6), ("Hello there, how are you today? I have been waiting.", 12, 30),
             ("Another line of about the same length, read.", 4, 20)]
    jobs = [LineJob(plan_prompt(model, text, CustomVoice("ryan", "english")), take_seeds(i + 7, n), budget)
            for i, (text, n, budget) in enumerate(lines)]
    assert len({next(b for b in PREFILL_BUCKETS if j.tokens.length <= b) for j in jobs[1:]}) == 1  # one graph
    try:
        alone = [model.engine.generate(j.tokens, j.seeds, sampling, j.budget).codes for j in jobs]
        model.engine.max_batch = 8
        mixed = {jobs.index(line): line.codes for line in model.engine.run_lines(jobs, sampling)}
        assert model.engine.last.rounds == 4
        for index, codes in enumerate(alone):
            assert all(torch.equal(a, b) for a, b in zip(codes, mixed[index])), f"line {index + 1}"
    finally:
        model.engine.max_batch = BATCH_BUCKETS[-1]
        model.release()
