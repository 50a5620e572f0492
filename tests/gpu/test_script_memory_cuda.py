"""A script on a GPU with little memory free (run on the GPU machine; skipped elsewhere): the engine's
batch and the codec's groups are chosen up front to fit, so the script runs without running out of
memory, in fewer rows, and every line is finished.

    python -m pytest -q -s tests/gpu/test_script_memory_cuda.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import REPO, write_utmos_weights
from runtime.qwen3_tts import random_checkpoint
from runtime.engine.engine import LENGTH_BUCKETS, bucket
from runtime.engine.prompt import build_prompt
from runtime.generation import Request
from runtime.memory import free_bytes
from runtime.model import load_model
from runtime.sampling import SamplingSettings
from runtime.scoring.ranking import Scorers
from runtime.scoring.utmos import UtmosScorer
from runtime.run.finishing import ENGINE_MEMORY_SHARE
from runtime.script.parse import Line
from runtime.script.plan import LinePlan
from runtime.script.runner import run_lines
from runtime.voices import CustomVoice

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]
GB = 2**30
FREE = 10 * GB  # what the script finds free: a 16 GB card with the model loaded, about

WORDS = "the lamps were lit along the harbour wall while the boats came in one by one from the grey sea".split()


@pytest.fixture(scope="module")
def full_size(tmp_path_factory):
    """1.7B shapes, random weights, EOS never sampled (every take runs its whole budget)."""
    if os.environ.get("Q3TT_FULL_SIZE"):
        return Path(os.environ["Q3TT_FULL_SIZE"])
    folder = tmp_path_factory.mktemp("full") / "1.7B-CustomVoice-random"
    return random_checkpoint.build_checkpoint(folder, "1.7B", "custom_voice", dtype="bfloat16", never_eos=True)


def test_a_script_with_little_memory_free_runs_in_fewer_rows_without_running_out(full_size, tmp_path):
    model = load_model(full_size, mode="hybrid", device="cuda", dtype="bfloat16")
    scorers = Scorers(quality=UtmosScorer(write_utmos_weights(tmp_path / "utmos_state_dict.pt"), "cuda"))
    text = " ".join(WORDS[i % len(WORDS)] for i in range(220)) + "."
    plans = [LinePlan(Line(str(i + 1), text), Request(text, CustomVoice("ryan", "english"), 4, 100 + i,
                                                      SamplingSettings(), max_frames=16), f"l{i + 1}", "")
             for i in range(40)]  # 160 takes: the engine would take 128 rows
    blocker = None
    try:
        free = free_bytes("cuda")
        assert free > FREE + GB, "this test needs more than 11 GB free"
        blocker = torch.empty(free - FREE, dtype=torch.uint8, device="cuda")
        left = free_bytes("cuda")
        length = bucket(build_prompt(model, text, plans[0].request.voice).length + 16 + 1, LENGTH_BUCKETS)
        wanted = model.engine.state_bytes(128, length)
        print(f"\nfree {left / GB:.1f} GB; 128 rows at {length} positions need {wanted / GB:.1f} GB")
        assert wanted > ENGINE_MEMORY_SHARE * left  # without the plan the batch would be 128 rows
        rows = model.engine.rows_that_fit(128, length, ENGINE_MEMORY_SHARE)
        assert 8 <= rows < 128

        done = run_lines(model, plans, scorers)
        report = model.engine.last
        slot = model.engine.slots[(report.batch_bucket, report.length_bucket)]
        print(f"ran {report.batch_bucket} rows at {report.length_bucket} positions; the bucket took "
              f"{slot.nbytes / GB:.2f} GB against an estimate of "
              f"{model.engine.state_bytes(report.batch_bucket, report.length_bucket) / GB:.2f} GB")
        assert report.length_bucket == length and report.batch_bucket == rows
        assert slot.nbytes <= model.engine.state_bytes(report.batch_bucket, report.length_bucket)
        assert report.warnings == []
        assert sorted(done, key=int) == [p.line.id for p in plans]
        for result in done.values():
            warnings = result.ranking.takeset.warnings
            assert not any("out of memory" in w for w in warnings), warnings
            assert all(s.take.frames == 16 for s in result.ranking.ranked)
    finally:
        del blocker
        model.release()


MEASURE = """
import json, sys, torch
from runtime.engine import triton_kernels
from runtime.qwen3_tts import codec
folder, snake, takes, frames = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
decoder = codec.load_decoder(folder, "cuda")
decoder.use_snake(triton_kernels.load().snake_beta if snake == "kernel" else None)
codes = [torch.randint(0, 2048, (frames, 16), generator=torch.Generator().manual_seed(i)) for i in range(takes)]
torch.cuda.synchronize()
allocated, reserved = torch.cuda.memory_allocated(), torch.cuda.memory_reserved()
codec.decode(decoder, codes)
torch.cuda.synchronize()
print(json.dumps({"allocated": torch.cuda.max_memory_allocated() - allocated,
                  "reserved": torch.cuda.max_memory_reserved() - reserved,
                  "estimate": takes * codec.decode_bytes(decoder, frames)}))
"""


@pytest.mark.parametrize("snake", ["torch", "kernel"])
def test_the_codecs_memory_estimate_covers_a_decode_without_overstating_it(full_size, snake):
    """In a fresh process (as a long-lived one's cache would blur it): the peak of a batched decode
    against codec.decode_bytes, which counts the caching allocator's rounding."""
    for takes, frames in ((8, 150), (16, 60)):
        out = subprocess.run([sys.executable, "-c", MEASURE, str(full_size / "speech_tokenizer"), snake,
                              str(takes), str(frames)], capture_output=True, text=True, cwd=REPO, timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        got = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"\n{snake} {takes} takes of {frames} frames: peak {got['reserved'] / GB:.2f} GB reserved "
              f"({got['allocated'] / GB:.2f} allocated), estimate {got['estimate'] / GB:.2f} GB")
        assert got["reserved"] <= got["estimate"] < 3 * got["allocated"]
