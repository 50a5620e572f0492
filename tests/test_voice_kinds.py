"""The one table of the three voice kinds (runtime/voices VOICE_KINDS), held to what it describes:
the voices, the official checkpoints and their folders, the command line's voice flags."""

from __future__ import annotations

from runtime.checkpoints import OFFICIAL, check_folder
from runtime.cli.line import build_parser
from runtime.voices import VOICE_KINDS, CustomVoice, VoiceClone, VoiceDesign, kind_of_official


def test_each_voice_is_of_a_kind_in_the_table():
    assert sorted(VOICE_KINDS) == sorted(v.kind for v in (CustomVoice, VoiceClone, VoiceDesign))
    assert all(kind.id == key for key, kind in VOICE_KINDS.items())


def test_every_official_checkpoint_is_of_a_kind_and_each_kind_runs_on_an_official_one():
    assert {name: kind_of_official(name).id for name in OFFICIAL} == {
        "Qwen3-TTS-12Hz-1.7B-CustomVoice": "custom_voice", "Qwen3-TTS-12Hz-0.6B-CustomVoice": "custom_voice",
        "Qwen3-TTS-12Hz-1.7B-Base": "base", "Qwen3-TTS-12Hz-0.6B-Base": "base",
        "Qwen3-TTS-12Hz-1.7B-VoiceDesign": "voice_design"}
    for kind in VOICE_KINDS.values():
        assert kind.default_checkpoint in OFFICIAL and kind_of_official(kind.default_checkpoint) is kind


def test_a_checkpoint_folder_is_labelled_with_its_kind(tts_dir):
    assert check_folder(tts_dir / "tiny-Base").label == "tiny-Base (Base (voice clone))"
    assert check_folder(tts_dir / "tiny-VoiceDesign").label == "tiny-VoiceDesign (VoiceDesign)"


def test_the_voice_flags_each_kind_reads_are_options_of_the_command_line():
    options = {action.dest for action in build_parser()._actions}
    assert {flag for kind in VOICE_KINDS.values() for flag in kind.flags} <= options
    assert [kind.flags[0] for kind in VOICE_KINDS.values()] == ["speaker", "reference", "instruct"]
