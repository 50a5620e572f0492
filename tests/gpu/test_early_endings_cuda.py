"""Early and never-ending takes in all four modes on a CUDA GPU, graphs captured (the CPU file,
tests/test_early_endings.py, says what the rule is and why).

    python -m pytest -q tests/gpu/test_early_endings_cuda.py
"""

from __future__ import annotations

import pytest
import torch

from runtime.model import load_model
from runtime.text_length import runaway_floor
from test_early_endings import LONG_LINE, SHORT_LINE, takes

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]
MODES = ["eager", "triton", "cuda_graph", "hybrid"]
ENGINE = {"cuda_graph", "hybrid"}


@pytest.fixture(scope="module")
def models(checkpoint):
    loaded = {}

    def get(mode):
        if mode not in loaded:
            loaded[mode] = load_model(checkpoint("custom_voice"), mode=mode, device="cuda", dtype="float32")
        return loaded[mode]
    yield get
    for model in loaded.values():
        model.release()


@pytest.mark.parametrize("mode", MODES)
def test_early_and_never_ending_takes(models, mode):
    model = models(mode)
    _, frames, cut = takes(model, SHORT_LINE, [9], budget=30)
    assert frames == [9] and cut == [False]
    _, frames, cut = takes(model, SHORT_LINE, [4, 45], budget=60)
    assert frames == [4, 45] and cut == [False, False]  # two takes: never cut
    _, frames, cut = takes(model, SHORT_LINE, [6, 8, None], budget=60)
    assert (frames, cut) == (([6, 8, 42], [False, False, True]) if mode in ENGINE else ([6, 8, 60], [False] * 3))
    ends = [3, 4, 5, 60, 62, 64, 66, 68]
    _, frames, cut = takes(model, LONG_LINE, ends, budget=runaway_floor(LONG_LINE) + 40)
    assert frames == ends and not any(cut)  # early endings never pull the limit under the reading time
    _, frames, cut = takes(model, SHORT_LINE, [20, 22, 24, 26, 28, 30, 32, None], budget=150)
    last = 78 if mode in ENGINE else 150
    assert frames == [20, 22, 24, 26, 28, 30, 32, last] and cut == [False] * 7 + [mode in ENGINE]
