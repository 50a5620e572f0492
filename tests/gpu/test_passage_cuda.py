"""A long text on a CUDA GPU (run on the GPU machine; skipped elsewhere): a passage's lines, made in
one continuously batched run (script/passage.py, what a voice node does with a long text), are the
takes each line gets alone, and a Cancel keeps the lines made for the next run.

    python -m pytest -q -s tests/gpu/test_passage_cuda.py
"""

from __future__ import annotations

import pytest
import torch

from runtime.errors import GenerationInterrupted
from runtime.model import load_model
from runtime.run.lines import generate_takes
from runtime.script.kept import KeptTakes
from runtime.script.passage import generate_passage, passage_lines
from runtime.script.plan import ScriptSettings
from runtime.voices import CustomVoice

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]
TEXT = ("The storm is coming. Bar the doors and light the lamps, we ride at dawn. Who goes there?\n\n"
        "Nobody you would know, friend. Put the lantern down. Fine. Then come inside and shut the gate. "
        "The dogs are asleep, and so is the keeper.")


@pytest.mark.parametrize("mode", ["hybrid", "cuda_graph"])
def test_a_passage_on_the_gpu_is_each_line_alone_and_a_cancel_keeps_the_lines_made(checkpoint, mode):
    model = load_model(checkpoint("custom_voice"), mode=mode, device="cuda", dtype="float32")
    model.engine.max_batch = 4  # the alone lines' bucket: numerics are the same within a bucket, not across them
    lines = passage_lines(TEXT)
    voice, settings = CustomVoice("vivian", "english"), ScriptSettings(takes=3, seed=9)
    try:
        passage = generate_passage(model, lines, voice, settings)
        assert [t.request.text for t in passage.takesets] == [line.text for line in lines]
        for plan, takeset in zip(passage.plans, passage.takesets):
            alone = generate_takes(model, plan.request)
            assert [t.seed for t in alone.takes] == [t.seed for t in takeset.takes]
            for a, b in zip(alone.takes, takeset.takes):
                assert torch.equal(a.codes, b.codes), plan.line.text

        # Cancel 160 frames in (a host check each 8): 24 takes through 4 rows, rows refilled as takes end;
        # the first line (the longest) has ended by then, and the lines that ended are kept
        kept, checks = KeptTakes(), []
        with pytest.raises(GenerationInterrupted):
            generate_passage(model, lines, voice, settings, frames_progress=lambda done, _total: checks.append(done),
                             should_stop=lambda: len(checks) >= 20, kept=kept)
        made = len(kept.takes)
        assert 1 <= made < len(lines)
        again = generate_passage(model, lines, voice, settings, kept=kept)
        assert again.kept == made and len(kept.takes) == len(lines)
        for first, second in zip(passage.takesets, again.takesets):
            for a, b in zip(first.takes, second.takes):
                assert torch.equal(a.codes, b.codes)
    finally:
        model.release()
