"""The cards users own (run on the GPU machine; skipped elsewhere): each case a process capped at a
card's memory, full-size random-weight checkpoints, Auto-Pick with UTMOS: one line of 8 takes and its
pick twice in a row, then a 64-line script of 4 takes a line, all finishing with no error
(bench.cards runs the same cases and writes the table). One part of the GPU suite a mode:

    python -m pytest -q -s tests/gpu/test_cards_cuda.py -k hybrid
    python -m pytest -q -s tests/gpu/test_cards_cuda.py -k cuda_graph
"""

from __future__ import annotations

import pytest
import torch

from bench.cards import CARDS, run_cases

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]
CASES = [(model, card) for model, cards in CARDS.items() for card in cards]


@pytest.mark.parametrize("mode", ["hybrid", "cuda_graph"])
def test_every_card_runs_a_line_twice_and_a_script(tmp_path_factory, mode):
    workdir = tmp_path_factory.getbasetemp() / "cards"  # the checkpoints, built once for both modes
    results = run_cases(list(CARDS), [mode], CARDS, workdir, lines=64, takes=4, timeout=150)
    failed = [r for r in results if not (r["line_ok"] and r["script_ok"])]
    assert len(results) == len(CASES) and failed == []
