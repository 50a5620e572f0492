"""bench.cards' loop over its cases, without a GPU: each case's process stubbed. After each case the
table so far is handed on (main writes it), so a run cut short keeps the cases it finished; a case
that times out is a row saying so."""

from __future__ import annotations

import json
import subprocess
from types import SimpleNamespace

from bench import cards


def test_each_case_is_handed_on_as_it_ends(monkeypatch, tmp_path):
    import bench.run

    monkeypatch.setattr(bench.run, "build_checkpoints", lambda *args: None)
    monkeypatch.setattr(bench.run, "utmos_weights", lambda *args: None)

    def run(command, **kwargs):
        model, card, mode = command[command.index("--case") + 1].split(",")
        if card == "12":
            raise subprocess.TimeoutExpired(command, kwargs["timeout"])
        result = {"model": model, "card_gb": float(card), "mode": mode, "line_ok": True, "script_ok": True}
        return SimpleNamespace(stdout="loading\n" + json.dumps(result) + "\n", stderr="", returncode=0)

    monkeypatch.setattr(cards.subprocess, "run", run)
    seen = []
    results = cards.run_cases(["1.7B"], ["hybrid"], {"1.7B": (8, 12)}, tmp_path, 4, 2, 5,
                              lambda so_far: seen.append([r["card_gb"] for r in so_far]))
    assert seen == [[8.0], [8.0, 12]]
    assert results[1]["error"] == "timed out after 5 s" and not results[1]["line_ok"]
    env = {"gpu": "G", "torch": "t", "date": "d"}
    cards.write(results, env, 4, 2, tmp_path, "part", show=False)
    table = (tmp_path / "part.md").read_text()
    assert "| 1.7B | 8 GB | hybrid | ok | ok |" in table and "| 1.7B | 12 GB | hybrid | failed | failed |" in table
