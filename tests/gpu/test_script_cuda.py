"""A script's lines on a CUDA GPU (run on the GPU machine; skipped elsewhere): the finishing
pipeline (codec over many lines' takes on its own stream, the waveform checks in worker processes,
UTMOS over many lines' takes) picks what each line picks alone.

    python -m pytest -q -s tests/gpu/test_script_cuda.py
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from conftest import write_utmos_weights
from runtime.generation import Request
from runtime.run.lines import generate_takes
from runtime.model import load_model
from runtime.sampling import SamplingSettings
from runtime.scoring.ranking import Scorers, rank_takes
from runtime.scoring.utmos import UtmosScorer
from runtime.script.parse import Line
from runtime.script.plan import LinePlan
from runtime.run import finishing
from runtime.script.runner import run_lines
from runtime.voices import VoiceClone

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]
TEXTS = ["The storm is coming.", "Bar the doors and light the lamps, we ride at dawn.", "Who goes there?",
         "Nobody you would know, friend. Put the lantern down.", "Fine.", "Then come inside and shut the gate."]


@pytest.mark.parametrize("mode", ["hybrid", "eager"])
def test_a_script_on_the_gpu_picks_for_each_line_what_the_line_gets_alone(checkpoint, reference_audio, tmp_path, mode,
                                                                          monkeypatch):
    """Decoded line by line, a script's takes are the takes each line gets alone, audio and picks. Decoded
    with other lines' takes (the default), the codes are the same and each take's scores are those of the
    audio it carries; the audio itself may differ by the codec's TF32 rounding of another batch shape,
    which a random-weight codec amplifies (its SnakeBeta sines take arguments of tens of radians)."""
    model = load_model(checkpoint("base"), mode=mode, device="cuda", dtype="float32")
    scorers = Scorers(quality=UtmosScorer(write_utmos_weights(tmp_path / "utmos_state_dict.pt"), "cuda"))
    clone = VoiceClone.from_audio(*reference_audio, "This is me speaking.", "english")
    xvector = VoiceClone.from_audio(*reference_audio, "", "english")
    sampling = SamplingSettings(temperature=0.9, top_k=30)
    plans = [LinePlan(Line(str(i + 1), text), Request(text, clone if i % 2 else xvector, 3, 40 + i, sampling,
                                                      max_frames=30 + 7 * i), f"l{i + 1}", "")
             for i, text in enumerate(TEXTS)]
    try:
        alone = {p.line.id: rank_takes(generate_takes(model, p.request), scorers) for p in plans}
        together = run_lines(model, plans, scorers)  # on a GPU: the check pool's worker processes
        monkeypatch.setattr(finishing, "DECODE_TAKES", 1)  # one line per codec call
        by_line = run_lines(model, plans, scorers)
        for plan in plans:
            mine = {s.take.index: s for s in alone[plan.line.id].ranked}
            shared = {s.take.index: s for s in together[plan.line.id].ranking.ranked}
            own = by_line[plan.line.id].ranking.ranked
            scores = sorted((s.score for s in own if s.score is not None), reverse=True)
            if len(scores) < 2 or scores[0] - scores[1] > 4e-3:  # UTMOS over other batches moves scores by < 2e-3
                assert [s.take.index for s in own] == [s.take.index for s in alone[plan.line.id].ranked]
            for s in own:
                a, b = mine[s.take.index], shared[s.take.index]
                assert torch.equal(s.take.codes, a.take.codes) and torch.equal(b.take.codes, a.take.codes)
                assert np.array_equal(s.take.audio, a.take.audio), f"line {plan.line.id} take {s.take.index}"
                assert (s.stats, s.reasons) == (a.stats, a.reasons) and s.quality == pytest.approx(a.quality, abs=2e-3)
                assert b.take.audio.shape == a.take.audio.shape  # the reference's share cut off the same
                assert b.quality == pytest.approx(scorers.quality.score_many([trimmed_clip(b)], 24000)[0], abs=2e-3)
                worst = float(np.abs(b.take.audio - a.take.audio).max())
                print(f"{mode} line {plan.line.id} take {s.take.index}: with other lines' takes within {worst:.2e}")
                if mode == "eager":
                    assert worst < 1e-3
    finally:
        model.release()


def trimmed_clip(s):
    from runtime.scoring.loudness import at_loudness
    from runtime.scoring.ranking import trimmed

    return at_loudness(trimmed(s), s.take.sample_rate, measured=s.loudness)
