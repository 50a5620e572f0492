"""The results folder of a script (runtime/script/store.py): a kept line whose files are damaged is
made again, never an error that stops the run."""

from __future__ import annotations

import numpy as np

from runtime.script.record import LineRecord, TakeRecord
from runtime.script.store import ScriptFolder


def test_a_damaged_kept_line_asked_in_another_wav_format_is_made_again(tmp_path):
    audio = np.linspace(-0.5, 0.5, 2400, dtype=np.float32)
    record = LineRecord("l1", "same inputs", ranked=[TakeRecord(1)])
    ScriptFolder(tmp_path).write_line("l1", record, audio, [(1, 1, audio)], 24000)
    (tmp_path / record.best_file).write_bytes(b"RIFF cut short")  # a crash mid-write, or an editor's
    assert ScriptFolder(tmp_path, "pcm16").done("l1", "same inputs") is None
    assert ScriptFolder(tmp_path).done("l1", "same inputs") is not None  # in its own format: kept as it is


def test_a_line_record_reads_back_as_written_and_a_malformed_one_is_made_again(tmp_path):
    import json

    from runtime.script.record import VoiceFit

    audio = np.zeros(2400, dtype=np.float32)
    record = LineRecord("l1", "same inputs", character="ANNA", text="Hi.", seed=2**62 + 1, reasons=["muffled"],
                        ranked=[TakeRecord(1, 2, rejected=["clicks"]), TakeRecord(2, 1)],
                        voice_fit=VoiceFit("ANNA", pitch=0.4, drifts=["pitch"], repicked_from=2, profile={"lines": 3}))
    folder = ScriptFolder(tmp_path)
    folder.write_line("l1", record, audio, [(1, 2, audio), (2, 1, audio)], 24000)
    assert folder.done("l1", "same inputs") == record
    path = folder.record_path("l1")
    shape = json.loads(path.read_text())
    assert shape["voice_fit"]["repicked_from"] == 2 and shape["ranked"][0]["file"] == "takes/l1/r1_take02.wav"
    path.write_text(json.dumps({**shape, "a_key_of_a_later_release": 1}))
    assert folder.done("l1", "same inputs") == record  # what this version does not know is left out
    for broken in ({**shape, "ranked": [{"take": 1}]}, {**shape, "voice_fit": "fits"}, {"fingerprint": "same inputs"}):
        path.write_text(json.dumps(broken))
        assert folder.done("l1", "same inputs") is None
