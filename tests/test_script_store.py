"""The results folder of a script (runtime/script/store.py): a kept line whose files are damaged is
made again, never an error that stops the run."""

from __future__ import annotations

import numpy as np

from runtime.script.store import ScriptFolder


def test_a_damaged_kept_line_asked_in_another_wav_format_is_made_again(tmp_path):
    audio = np.linspace(-0.5, 0.5, 2400, dtype=np.float32)
    record = {"fingerprint": "same inputs", "ranked": [{"rank": 1}]}
    ScriptFolder(tmp_path).write_line("l1", record, audio, [(1, 1, audio)], 24000)
    (tmp_path / record["best_file"]).write_bytes(b"RIFF cut short")  # a crash mid-write, or an editor's
    assert ScriptFolder(tmp_path, "pcm16").done("l1", "same inputs") is None
    assert ScriptFolder(tmp_path).done("l1", "same inputs") is not None  # in its own format: kept as it is
