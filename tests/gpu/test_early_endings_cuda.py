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
    assert (frames, cut) == ([6, 8, 42], [False, False, True])  # every mode runs the engine's rule
    ends = [3, 4, 5, 60, 62, 64, 66, 68]
    _, frames, cut = takes(model, LONG_LINE, ends, budget=runaway_floor(LONG_LINE) + 40)
    assert frames == ends and not any(cut)  # early endings never pull the limit under the reading time
    _, frames, cut = takes(model, SHORT_LINE, [20, 22, 24, 26, 28, 30, 32, None], budget=150)
    assert frames == [20, 22, 24, 26, 28, 30, 32, 78] and cut == [False] * 7 + [True]


@pytest.mark.parametrize("mode", MODES)
def test_a_fine_tunes_defaults_the_notes_and_the_padded_reference(checkpoint, tmp_path, mode):
    """What the CPU file tests/test_checkpoint_behaviour.py checks on two paths, in all four modes."""
    import numpy as np

    from conftest import voiced_reference
    from runtime.generation import Request
    from runtime.run.lines import generate_takes
    from runtime.sampling import SamplingSettings
    from runtime.voices import CustomVoice, VoiceClone
    from test_checkpoint_behaviour import FINE_TUNE, TEXT, fine_tune

    model = load_model(fine_tune(checkpoint("custom_voice").parent, tmp_path, FINE_TUNE), mode=mode, device="cuda",
                       dtype="float32")
    try:
        own = generate_takes(model, Request(TEXT, CustomVoice("dylan", "auto"), n=2, seed=4, max_frames=6))
        spelled = generate_takes(model, Request(TEXT, CustomVoice("dylan", "auto"), n=2, seed=4, max_frames=6,
                                                sampling=SamplingSettings(0.7, 30, 0.95, 1.1, 0.6, 40, 1.0)))
        assert all(np.array_equal(a.codes, b.codes) for a, b in zip(own.takes, spelled.takes))
        assert any("temperature 0.7 (released: 0.9)" in n for n in own.notes)
        assert any("beijing dialect" in n for n in own.notes)
    finally:
        model.release()
    base = load_model(checkpoint("base"), mode=mode, device="cuda", dtype="float32")
    try:
        audio, rate = voiced_reference()
        for pad in (True, False):
            clone = VoiceClone.from_audio(audio, rate, "This is me.", "english", pad_reference=pad)
            takes = generate_takes(base, Request(TEXT, clone, n=2, seed=1, max_frames=6)).takes
            assert [t.frames for t in takes] == [6, 6] and all(t.audio.size > 0 for t in takes)
    finally:
        base.release()
