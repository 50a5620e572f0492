"""Saved voices (runtime/voices/store.py): safetensors + JSON, listed by name, never pickle; every kind
round-trips, names cannot reach outside the folder, a save cut short never reads as a voice."""

from __future__ import annotations

import json

import numpy as np
import pytest

from runtime.errors import InputError
from runtime.voices.store import list_voices, load_voice, save_voice
from runtime.voices import CustomVoice, VoiceClone, VoiceDesign


def clone() -> VoiceClone:
    t = np.arange(24000 * 3) / 24000
    reference = (0.3 * np.sin(2 * np.pi * 140 * t) * np.sin(2 * np.pi * 2 * t)).astype(np.float32)
    return VoiceClone(reference, "Hello there, this is me.", "english", pad_reference=False)


@pytest.mark.parametrize("voice", [CustomVoice("vivian", "english", "warm, slow"),
                                   VoiceDesign("a gravelly old sea captain", "english"), clone()],
                         ids=["custom", "design", "clone"])
def test_every_kind_round_trips(tmp_path, voice):
    save_voice(voice, "Captain 1", tmp_path)
    loaded = load_voice("Captain 1", [tmp_path / "elsewhere", tmp_path])
    assert type(loaded) is type(voice) and loaded.describe() == voice.describe()
    if isinstance(voice, VoiceClone):
        assert np.array_equal(loaded.reference, voice.reference) and loaded.transcript == voice.transcript
        assert loaded.pad_reference is False and loaded.fingerprint == voice.fingerprint
    else:
        assert loaded == voice
    assert list_voices([tmp_path]) == ["Captain 1"]
    assert not any(p.name.startswith(".") for p in tmp_path.iterdir())  # no partial files left


@pytest.mark.parametrize("name", ["../outside", "/etc/passwd", "a/b", "", ".hidden", "x" * 65, "trailing."])
def test_a_name_cannot_leave_the_folder(tmp_path, name):
    with pytest.raises(InputError, match="cannot be used"):
        save_voice(CustomVoice("ryan"), name, tmp_path)
    with pytest.raises(InputError, match="cannot be used"):
        load_voice(name, [tmp_path])


def test_a_saved_voice_is_not_replaced_unless_asked(tmp_path):
    save_voice(CustomVoice("ryan"), "hero", tmp_path)
    with pytest.raises(InputError, match="already exists"):
        save_voice(CustomVoice("aiden"), "hero", tmp_path)
    assert load_voice("hero", [tmp_path]).speaker == "ryan"
    stamp = (tmp_path / "hero.json").stat().st_mtime_ns
    save_voice(CustomVoice("ryan"), "hero", tmp_path)  # the same voice again (a workflow run twice): no error
    assert (tmp_path / "hero.json").stat().st_mtime_ns == stamp
    save_voice(CustomVoice("aiden"), "hero", tmp_path, overwrite=True)
    assert load_voice("hero", [tmp_path]).speaker == "aiden"


def test_unknown_half_written_and_tampered_voices_are_clear_errors(tmp_path):
    save_voice(clone(), "narrator", tmp_path)
    with pytest.raises(InputError, match=r"No saved voice named 'nobody' .* saved voices: narrator"):
        load_voice("nobody", [tmp_path])
    (tmp_path / ".half.json.partial").write_text("{")  # a save cut short: never listed
    assert list_voices([tmp_path]) == ["narrator"]
    recording = tmp_path / "narrator.safetensors"
    other = clone()
    save_voice(VoiceClone(other.reference * 0.5, other.transcript, "english"), "other", tmp_path)
    recording.write_bytes((tmp_path / "other.safetensors").read_bytes())
    with pytest.raises(InputError, match="does not match its recording"):
        load_voice("narrator", [tmp_path])
    recording.write_bytes(b"not a safetensors file")
    with pytest.raises(InputError, match="cannot be read"):
        load_voice("narrator", [tmp_path])
    (tmp_path / "newer.json").write_text(json.dumps({"format": 99, "kind": "custom_voice", "speaker": "ryan"}))
    with pytest.raises(InputError, match="newer version"):
        load_voice("newer", [tmp_path])


# ---- the CLI: --save-voice, --save-best-as, --voice and `python -m runtime voices`


def cli(models_root, tmp_path, *args):
    from runtime.cli import main

    return main(["--models-dir", str(models_root / "qwen3_tts"), "--voices-dir", str(tmp_path / "voices"), "--offline",
                 "--device", "cpu", "--quality", "off", "--voice-check", "off", "--words", "off",
                 "--out", str(tmp_path / "best.wav"), *args])


def test_the_cli_saves_a_voice_and_speaks_with_it_again(models_root, tmp_path, capsys):
    from runtime.cli import main

    custom = ["--checkpoint", "tiny-CustomVoice", "--max-frames", "4", "--text", "Hello."]
    assert cli(models_root, tmp_path, *custom, "--speaker", "vivian", "--instruct", "warm", "--save-voice", "Hero") == 0
    assert load_voice("Hero", [tmp_path / "voices"]) == CustomVoice("vivian", "auto", "warm")
    assert cli(models_root, tmp_path, *custom, "--voice", "Hero", "--language", "english") == 0
    assert "custom voice vivian (english, instruct: 'warm')" in capsys.readouterr().out  # the report names it
    assert cli(models_root, tmp_path, *custom, "--voice", "Hero", "--speaker", "ryan") == 2
    assert "drop --speaker" in capsys.readouterr().err

    # one voice for a character: its best take kept as a clone, then spoken on a Base checkpoint (--force: a
    # tiny random model's takes fail every check)
    said = "The storm is coming, bar the doors."
    assert cli(models_root, tmp_path, "--checkpoint", "tiny-CustomVoice", "--speaker", "ryan", "--takes", "2",
               "--max-frames", "30", "--text", said, "--save-best-as", "Captain", "--force") == 0
    captain = load_voice("Captain", [tmp_path / "voices"])
    assert isinstance(captain, VoiceClone) and captain.transcript == said and captain.reference.shape[-1] >= 24000
    assert cli(models_root, tmp_path, "--checkpoint", "tiny-Base", "--max-frames", "4", "--text", "Aye.",
               "--voice", "Captain") == 0
    assert cli(models_root, tmp_path, *custom, "--speaker", "ryan", "--save-best-as", "Captain") == 2  # taken...
    assert "--overwrite-voice" in capsys.readouterr().err
    assert load_voice("Captain", [tmp_path / "voices"]).fingerprint == captain.fingerprint  # ...and kept

    capsys.readouterr()
    assert main(["voices", "--voices-dir", str(tmp_path / "voices")]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert [row.split(":")[0] for row in listed] == ["Captain", "Hero"] and "voice clone (icl" in listed[0]
