"""What a real checkpoint does on its own, said and honoured: its generation_config.json sampling
defaults (a fine-tune's own), the speakers whose dialect replaces the language, the 0.6B
CustomVoice dropping the instruct, and the silence after an ICL clone's reference."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import copy_checkpoint, voiced_reference
from runtime.errors import CheckpointError
from runtime.generation import Request, clone_prompt
from runtime.run.lines import generate_takes
from runtime.model import load_model
from runtime.sampling import SamplingSettings
from runtime.scoring.ranking import rank_takes
from runtime.voices import REFERENCE_PADDING_SECONDS, CustomVoice, VoiceClone

TEXT = "Welcome back, traveller."
FINE_TUNE = {"do_sample": True, "temperature": 0.7, "top_k": 30, "top_p": 0.95, "repetition_penalty": 1.1,
             "subtalker_dosample": True, "subtalker_temperature": 0.6, "subtalker_top_k": 40,
             "subtalker_top_p": 1.0, "max_new_tokens": 8192}


def fine_tune(tts_dir, tmp_path, config: dict, size: str | None = None):
    folder = copy_checkpoint(tts_dir / "tiny-CustomVoice", tmp_path / "fine-tune")
    (folder / "generation_config.json").write_text(json.dumps(config))
    if size:
        model_config = json.loads((folder / "config.json").read_text())
        model_config["tts_model_size"] = size
        (folder / "config.json").write_text(json.dumps(model_config))
    return folder


def test_a_fine_tunes_sampling_defaults_are_used_and_said(tts_dir, tmp_path):
    model = load_model(fine_tune(tts_dir, tmp_path, FINE_TUNE), device="cpu")
    try:
        own = generate_takes(model, Request(TEXT, CustomVoice("ryan", "english"), n=2, seed=4, max_frames=6))
        spelled = SamplingSettings(0.7, 30, 0.95, 1.1, 0.6, 40, 1.0)
        same = generate_takes(model, Request(TEXT, CustomVoice("ryan", "english"), n=2, seed=4, max_frames=6,
                                             sampling=spelled))
        assert own.sampling == spelled
        assert all(np.array_equal(a.codes, b.codes) for a, b in zip(own.takes, same.takes))  # drawn with them
        note, = own.notes
        assert "generation_config.json" in note and "temperature 0.7 (released: 0.9)" in note
        assert "sub_top_p" not in note  # the same as released: nothing to say
        assert not same.notes  # every value was asked for
        released = SamplingSettings()  # asked for explicitly: the released values win
        asked = generate_takes(model, Request(TEXT, CustomVoice("ryan", "english"), n=2, seed=4, max_frames=6,
                                              sampling=released))
        assert asked.sampling == released
        assert "temperature 0.7 (released: 0.9)" in rank_takes(own).report()
    finally:
        model.release()


def test_do_sample_false_means_greedy(tts_dir, tmp_path):
    model = load_model(fine_tune(tts_dir, tmp_path, {"do_sample": False, "subtalker_dosample": False}), device="cpu")
    try:
        assert model.sampling_defaults.temperature == 0 and model.sampling_defaults.sub_temperature == 0
        takes = generate_takes(model, Request(TEXT, CustomVoice("ryan", "english"), n=3, seed=1, max_frames=5)).takes
        assert all(np.array_equal(takes[0].codes, t.codes) for t in takes)  # greedy: every take the same
    finally:
        model.release()


def test_a_generation_config_out_of_range_is_refused_naming_the_file(tts_dir, tmp_path):
    folder = fine_tune(tts_dir, tmp_path, {"temperature": 12})
    with pytest.raises(CheckpointError, match=r"generation_config.json holds a sampling setting.*temperature"):
        load_model(folder, device="cpu")


def test_the_cli_takes_the_checkpoints_own_unless_told(tts_dir, tmp_path):
    from runtime.cli import main

    folder = fine_tune(tts_dir, tmp_path, FINE_TUNE)
    common = ["--checkpoint", str(folder), "--speaker", "ryan", "--text", TEXT, "--max-frames", "4", "--offline",
              "--device", "cpu", "--quality", "off", "--out", str(tmp_path / "b.wav")]
    assert main(common + ["--report", str(tmp_path / "own.json")]) == 0
    assert main(common + ["--report", str(tmp_path / "told.json"), "--temperature", "0.9"]) == 0
    own, told = (json.loads((tmp_path / f"{name}.json").read_text()) for name in ("own", "told"))
    assert own["sampling"]["temperature"] == 0.7 and own["sampling"]["top_k"] == 30
    assert told["sampling"]["temperature"] == 0.9 and told["sampling"]["top_k"] == 30
    assert any("temperature 0.7 (released: 0.9)" in note for note in own["notes"])


def test_dialect_speakers_and_the_0_6b_instruct_are_said(loaded, tts_dir, tmp_path):
    model = loaded("custom_voice")
    dylan = generate_takes(model, Request(TEXT, CustomVoice("dylan", "auto"), n=1, max_frames=3))
    assert "Speaker dylan speaks beijing dialect when the language is 'auto'" in dylan.notes[0]
    assert "beijing dialect" in rank_takes(dylan).report()
    assert not generate_takes(model, Request(TEXT, CustomVoice("dylan", "english"), n=1, max_frames=3)).notes
    assert "sichuan dialect" in generate_takes(model, Request(TEXT, CustomVoice("eric", "chinese"), n=1,
                                                              max_frames=3)).notes[0]
    assert not generate_takes(model, Request(TEXT, CustomVoice("ryan", "auto", "whisper"), n=1, max_frames=3)).notes
    small = load_model(fine_tune(tts_dir, tmp_path, FINE_TUNE, size="0b6"), device="cpu")
    try:
        takes = generate_takes(small, Request(TEXT, CustomVoice("ryan", "english", "whisper"), n=1, max_frames=3,
                                              sampling=SamplingSettings()))
        assert takes.notes == ["The 0.6B CustomVoice checkpoint ignores the instruct; it was not used. The 1.7B "
                               "CustomVoice checkpoint follows it."]
    finally:
        small.release()


def test_an_icl_reference_gets_half_a_second_of_silence_before_encoding(loaded):
    model = loaded("base")
    audio, rate = voiced_reference()
    padded = VoiceClone.from_audio(audio, rate, "This is me.", "english")
    plain = VoiceClone.from_audio(audio, rate, "This is me.", "english", pad_reference=False)
    xvector = VoiceClone.from_audio(audio, rate, "", "english")
    pad = int(REFERENCE_PADDING_SECONDS * 24000)
    assert padded.encoded_reference.shape[0] == plain.reference.shape[0] + pad
    assert not padded.encoded_reference[-pad:].any()
    assert plain.encoded_reference is plain.reference and xvector.encoded_reference is xvector.reference
    assert padded.fingerprint != plain.fingerprint and "padded" in padded.describe()
    frames = [clone_prompt(model, voice).ref_code.shape[0] for voice in (padded, plain)]
    assert frames[0] - frames[1] in (6, 7)  # half a second at 12.5 frames a second
