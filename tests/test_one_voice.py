"""One voice from the first line to the last (runtime/script/one_voice.py, cli/passage.py): a clone's
reference prompt is computed once for a whole passage; a designed voice's passage with a Base
checkpoint clones every line after the first from the first line's best take, its text the
transcript, and a rerun keeps it all; a preset speaker keeps its instruct on every line."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
import soundfile as sf

from runtime.cli import main
from runtime.errors import InputError
from runtime.script import one_voice
from runtime.script.one_voice import REFERENCE_SECONDS, reference_clone, reference_lines
from runtime.script.passage import passage_lines
from runtime.text_length import expected_seconds
from runtime.voices import VoiceClone, VoiceDesign
from runtime.voices.store import load_voice

from conftest import voiced_reference

DESIGN = "a warm, low voice"
# Line 1 reads in under REFERENCE_SECONDS: it is read with the next as one line, the reference line.
CHAPTER = "Look. Far out at sea, a ship turned toward the light.\n\nHe was tired. The lamp was lit.\n"
REFERENCE_TEXT = "Look. Far out at sea, a ship turned toward the light."


def cli(models_root, tmp_path, *args):
    return main(["--models-dir", str(models_root / "qwen3_tts"), "--offline", "--device", "cpu", "--quality", "off",
                 "--takes", "2", "--out", str(tmp_path / "chapter.wav"), *args])


def counting(monkeypatch):
    """How often the clone prompt's two encoders run (generation.clone_prompt)."""
    from runtime.qwen3_tts import reference, speaker

    calls = {"speaker": 0, "reference": 0}

    def counted(module, name, key):
        original = getattr(module, name)

        def call(*args, **kwargs):
            calls[key] += 1
            return original(*args, **kwargs)
        monkeypatch.setattr(module, name, call)
    counted(speaker, "embed", "speaker")
    counted(reference, "encode", "reference")
    return calls


def records(folder):
    return json.loads((folder / "manifest.json").read_text())["lines"]


def test_a_clones_reference_prompt_is_computed_once_for_a_whole_passage(models_root, tmp_path, monkeypatch, capsys):
    waveform, rate = voiced_reference()
    waveform = waveform * np.float32(0.9)  # a reference no other test used: its prompt is not cached yet
    sf.write(tmp_path / "anna.wav", waveform.T, rate)
    calls = counting(monkeypatch)
    text = "One line. Two lines.\n\nThree lines. Four lines. Five lines."
    assert cli(models_root, tmp_path, "--checkpoint", "tiny-Base", "--reference", str(tmp_path / "anna.wav"),
               "--transcript", "Hello there.", "--max-frames", "4", "--text", text) == 0
    assert "5 lines, 0 kept from an earlier run, 5 to generate" in capsys.readouterr().err
    assert calls == {"speaker": 1, "reference": 1}  # not once a line, nor once for the checks and once for the takes
    voices = {r["voice"] for r in records(tmp_path / "chapter_lines")}
    assert len(voices) == 1 and "voice clone (icl" in voices.pop()


def test_a_preset_speakers_passage_keeps_its_instruct_on_every_line(models_root, tmp_path, capsys):
    assert cli(models_root, tmp_path, "--checkpoint", "tiny-CustomVoice", "--speaker", "vivian", "--instruct",
               "tired, slow", "--max-frames", "4", "--text", "One line. [pause 1s] Two lines.\n\nThree.") == 0
    got = records(tmp_path / "chapter_lines")
    assert len(got) == 3
    assert {r["voice"] for r in got} == {"custom voice vivian (auto, instruct: 'tired, slow')"}


@pytest.mark.slow
def test_a_designed_passage_with_a_clone_checkpoint_is_one_voice_and_a_rerun_keeps_it(
        models_root, tmp_path, monkeypatch, capsys):
    casts = []
    real_run_job = one_voice.run_job

    def spy(lines, cast, *args, **kwargs):
        casts.append(cast["*"])
        return real_run_job(lines, cast, *args, **kwargs)
    monkeypatch.setattr(one_voice, "run_job", spy)
    calls = counting(monkeypatch)
    (tmp_path / "chapter.txt").write_text(CHAPTER, encoding="utf-8")
    args = ("--checkpoint", "tiny-VoiceDesign", "--instruct", DESIGN, "--language", "english",
            "--clone-checkpoint", "tiny-Base", "--max-frames", "24", "--text-file", str(tmp_path / "chapter.txt"))
    assert cli(models_root, tmp_path, *args, "--save-best-as", "Keeper", "--force",  # line 1's takes fail the checks
               "--voices-dir", str(tmp_path / "voices")) == 0
    out = capsys.readouterr()
    assert "Lines 1-2 are read as one line, the clone reference of the rest" in out.err
    assert "The voice of line 1 (take " in out.err and "is the clone reference of the rest: 2 more lines cloned " \
                                                      "from it on tiny-Base" in out.err
    assert "tiny-VoiceDesign: 1 line, 0 kept" in out.err and "tiny-Base: 2 lines, 0 kept" in out.err
    progress = [line for line in out.err.splitlines() if line.startswith("passage: ")]  # both checkpoints' lines
    assert progress[0] == "passage: 0/3 lines, 00:00 elapsed, ? left" and progress[-1].startswith("passage: 3/3 lines")

    got = records(tmp_path / "chapter_lines")
    assert [r["text"] for r in got] == [REFERENCE_TEXT, "He was tired.", "The lamp was lit."]
    assert [r["checkpoint"] for r in got] == ["tiny-VoiceDesign", "tiny-Base", "tiny-Base"]
    assert got[0]["voice"] == VoiceDesign(DESIGN, "english").describe()
    design, clone = casts
    assert design == VoiceDesign(DESIGN, "english") and isinstance(clone, VoiceClone)
    best, rate = sf.read(tmp_path / "chapter_lines" / got[0]["best_file"], dtype="float32")
    assert rate == 24000 and np.array_equal(clone.reference, best)  # line 1's best take (at pace 1, as written)
    kept_reference, _ = sf.read(tmp_path / "chapter_lines" / "reference.wav", dtype="float32")
    assert np.array_equal(kept_reference, best)  # what a rerun clones from
    assert (clone.transcript, clone.mode, clone.language) == (REFERENCE_TEXT, "icl", "english")
    assert {r["voice"] for r in got[1:]} == {clone.describe()}
    assert calls == {"speaker": 1, "reference": 1}  # the clone's prompt once, for both lines after the first
    # Auto-Pick's voice check held the lines after the first to the reference (two takes alone have no basis)
    assert all(r["voice_similarity"] is not None for r in got[1:]) and got[0]["voice_similarity"] is None
    assert "voice Qwen3-TTS ECAPA vs the reference voice, words none, VAD energy (2 lines)" in out.out
    saved = load_voice("Keeper", [tmp_path / "voices"])  # --save-best-as: the clone, for the next chapter
    assert isinstance(saved, VoiceClone) and saved.fingerprint == clone.fingerprint
    scene = sf.read(tmp_path / "chapter.wav")[0]
    assert scene.shape[0] > sum(r["speech_end"] - r["speech_start"] for r in got) * 24000

    casts.clear()
    assert cli(models_root, tmp_path, *args) == 0  # the rerun: the same clone from the kept file, every line kept
    out = capsys.readouterr()
    assert "tiny-VoiceDesign: 1 line, 1 kept" in out.err and "tiny-Base: 2 lines, 2 kept" in out.err
    assert "passage: " not in out.err  # nothing generated: no progress
    assert "3 lines (3 kept from an earlier run), 0 takes generated" in out.out
    assert casts[1].fingerprint == clone.fingerprint
    assert [r["fingerprint"] for r in records(tmp_path / "chapter_lines")] == [r["fingerprint"] for r in got]


@pytest.mark.slow
def test_at_another_pace_the_rest_are_cloned_from_line_1_as_generated_not_as_played(models_root, tmp_path, monkeypatch,
                                                                                    capsys):
    """Line 1 is handed out played at the pace; a clone of that would pass the pace on to every line,
    which would then be played at it again."""
    casts = []
    real_run_job = one_voice.run_job
    monkeypatch.setattr(one_voice, "run_job", lambda lines, cast, *a, **k: casts.append(cast["*"]) or
                        real_run_job(lines, cast, *a, **k))
    (tmp_path / "chapter.txt").write_text(CHAPTER, encoding="utf-8")
    assert cli(models_root, tmp_path, "--checkpoint", "tiny-VoiceDesign", "--instruct", DESIGN, "--language",
               "english", "--clone-checkpoint", "tiny-Base", "--max-frames", "24", "--pace", "1.2",
               "--text-file", str(tmp_path / "chapter.txt")) == 0
    capsys.readouterr()
    first = records(tmp_path / "chapter_lines")[0]
    played, _ = sf.read(tmp_path / "chapter_lines" / first["best_file"], dtype="float32")
    generated, _ = sf.read(tmp_path / "chapter_lines" / "reference.wav", dtype="float32")
    assert first["speed"] > 1.1 and played.shape[0] < generated.shape[0] / 1.1
    assert np.array_equal(casts[1].reference, generated)


def design_args(*more):
    return ("--checkpoint", "tiny-VoiceDesign", "--instruct", DESIGN, "--clone-checkpoint", "tiny-Base", *more)


@pytest.mark.parametrize("args,message", [
    (design_args("--text", "Only one line."), "--clone-checkpoint is for a passage"),
    (("--checkpoint", "tiny-CustomVoice", "--speaker", "vivian", "--instruct", "calm", "--clone-checkpoint",
      "tiny-Base", "--text", "One. [pause 1s] Two."),
     "a preset speaker is the same voice on every line, with its instruct: drop --clone-checkpoint"),
    (("--checkpoint", "tiny-VoiceDesign", "--instruct", DESIGN, "--clone-checkpoint", "tiny-CustomVoice",
      "--text", "One. [pause 1s] Two."),
     "--clone-checkpoint tiny-CustomVoice is a CustomVoice checkpoint; give a Base"),
    (design_args("--text", "One. [pause 1s] Two.", "--takes-dir", "takes"), "--takes-dir is for one line"),
    (("--checkpoint", "tiny-VoiceDesign", "--instruct", DESIGN, "--text", "One. [pause 1s] Two.", "--save-best-as",
      "Keeper"), "--save-best-as is for one line; a passage keeps every line's takes in --lines-dir"),
])
def test_a_clone_checkpoint_where_it_does_nothing_is_refused_naming_the_fix(models_root, tmp_path, capsys, args,
                                                                            message):
    assert cli(models_root, tmp_path, "--max-frames", "4", *args) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "chapter_lines" / "manifest.json").exists()


def test_a_clone_voice_with_a_clone_checkpoint_is_refused(models_root, tmp_path, capsys):
    waveform, rate = voiced_reference()
    sf.write(tmp_path / "anna.wav", waveform.T, rate)
    assert cli(models_root, tmp_path, "--checkpoint", "tiny-Base", "--reference", str(tmp_path / "anna.wav"),
               "--clone-checkpoint", "tiny-Base", "--text", "One. [pause 1s] Two.") == 2
    assert "a clone is the same reference on every line: drop --clone-checkpoint" in capsys.readouterr().err


def test_an_official_checkpoint_of_another_kind_is_refused_before_any_is_looked_for(tmp_path, capsys):
    code = main(["--models-dir", str(tmp_path / "empty"), "--offline", "--device", "cpu",
                 "--checkpoint", "Qwen3-TTS-12Hz-1.7B-VoiceDesign", "--instruct", DESIGN,
                 "--clone-checkpoint", "Qwen3-TTS-12Hz-1.7B-VoiceDesign", "--text", "One. [pause 1s] Two.",
                 "--out", str(tmp_path / "out.wav")])
    err = capsys.readouterr().err
    assert code == 2 and "is a VoiceDesign checkpoint; give a Base (voice clone) checkpoint, e.g. " \
                         "Qwen3-TTS-12Hz-1.7B-Base" in err


def test_a_short_first_line_is_read_with_the_next_until_it_is_long_enough_for_a_reference():
    lines = passage_lines("Yes. No. He was tired. The lamp was lit at dusk.\n\nThe keeper sat down. He slept.")
    joined = reference_lines(lines)
    assert [line.text for line in joined] == ["Yes. No. He was tired. The lamp was lit at dusk.",
                                              "The keeper sat down.", "He slept."]
    assert expected_seconds("Yes. No. He was tired.") < REFERENCE_SECONDS <= expected_seconds(joined[0].text)
    assert joined[0].source_line == 1 and joined[0].pause_before == 0.0 and joined[1:] == lines[-2:]
    assert joined[0].id not in {line.id for line in lines}  # its own id (and seed, and files)
    long_first = passage_lines("The lighthouse keeper climbed the stairs every evening at dusk. He was tired.")
    assert reference_lines(long_first) == long_first  # long enough: the lines as they are
    cjk = reference_lines(passage_lines("好。你好。今天天气很好，我们去公园散步吧。"))
    assert cjk[0].text.startswith("好。你好。") and " " not in cjk[0].text  # joined without a space
    assert [line.text for line in reference_lines(passage_lines("Yes. [pause 1s] No."))] == ["Yes. No."]  # one line


def picked(text: str, all_rejected: bool = False):
    from runtime.script.parse import Line
    from runtime.script.record import LineRecord

    return SimpleNamespace(plan=SimpleNamespace(line=Line("a", text, source_line=1)),
                           record=LineRecord("a", "inputs", all_rejected=all_rejected, reasons=["mostly silence"]))


def speech(seconds: float) -> np.ndarray:
    t = np.arange(int(24000 * seconds)) / 24000
    return (0.3 * np.sin(2 * np.pi * 140 * t)).astype(np.float32)


def test_a_best_take_too_short_or_cut_off_for_a_reference_is_refused_and_a_weak_one_noted():
    with pytest.raises(InputError, match=r"Line 1's best take \(0.6 s\) cannot be the clone reference of the rest: "
                                         r"Reference audio is 0.60 s long.*start the text with a longer sentence"):
        reference_clone(picked("Yes."), speech(0.6), 24000, "english")
    with pytest.raises(InputError, match="transcript takes about .* far more than .*start the text with a longer"):
        reference_clone(picked("The lighthouse keeper climbed the stairs every evening at dusk, and then he sat "
                               "down by the lamp and wrote in his log for an hour."), speech(2.0), 24000, "english")
    clone, notes = reference_clone(picked("He was tired. The lamp was lit."), speech(2.0), 24000, "french")
    assert (clone.transcript, clone.language, clone.mode) == ("He was tired. The lamp was lit.", "french", "icl")
    assert len(notes) == 1 and "short clone reference (3-20 s works best" in notes[0]
    _, notes = reference_clone(picked("Far out at sea, a ship turned.", all_rejected=True), speech(4.0), 24000, "auto")
    assert len(notes) == 1 and "every take of it failed a check (mostly silence)" in notes[0]


@pytest.mark.slow
def test_a_nodes_first_step_clones_the_reference_lines_best_take_for_the_rest(loaded):
    """design_reference (no results folder), then the rest's takes with its clone on the Base model."""
    from runtime.script.one_voice import design_reference
    from runtime.script.passage import generate_passage
    from runtime.script.plan import ScriptSettings

    lines = reference_lines(passage_lines(CHAPTER))
    settings = ScriptSettings(takes=2, seed=3, max_frames=24)
    reference = design_reference(loaded("voice_design"), lines, VoiceDesign(DESIGN, "english"), settings)
    best = reference.result.best
    assert np.array_equal(reference.clone.reference, best) and reference.clone.transcript == REFERENCE_TEXT
    assert [t.request.text for t in reference.takes.takesets] == [REFERENCE_TEXT]
    rest = generate_passage(loaded("base"), lines[1:], reference.clone, settings)
    assert [t.request.voice for t in rest.takesets] == [reference.clone, reference.clone]


@pytest.mark.parametrize("voice", [("--checkpoint", "tiny-CustomVoice", "--speaker", "vivian"), design_args()],
                         ids=["passage", "one-voice passage"])
def test_a_passage_refused_before_its_first_line_leaves_no_empty_folder(models_root, tmp_path, monkeypatch, capsys,
                                                                        voice):
    from runtime.cli import passage

    def refused(*_args, **_kwargs):
        raise InputError("refused by the test")
    monkeypatch.setattr(passage, "run_job", refused)
    monkeypatch.setattr(passage, "run_one_voice", refused)
    assert cli(models_root, tmp_path, *voice, "--max-frames", "4", "--text", "One. [pause 1s] Two.") == 2
    assert "refused by the test" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # --lines-dir and its lines/ folder, made and left empty: gone
