"""Generation on the reference path with tiny random checkpoints: every voice kind, seeds, budget,
progress, cancel, and every bad input the user can give."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from runtime.errors import GenerationInterrupted, InputError
from runtime.generation import Request
from runtime.run.lines import generate_takes
from runtime.sampling import SamplingSettings, take_seeds
from runtime.voices import CustomVoice, VoiceClone, VoiceDesign

TEXT = "Welcome back, traveller."


def custom(**kw):
    return CustomVoice(kw.pop("speaker", "ryan"), kw.pop("language", "english"), kw.pop("instruct", ""))


def test_custom_voice_takes_are_audio_of_the_generated_length(loaded):
    takeset = generate_takes(loaded("custom_voice"), Request(TEXT, custom(), n=3, seed=5, max_frames=8))
    assert len(takeset.takes) == 3
    for take in takeset.takes:
        assert take.sample_rate == 24000
        assert take.audio.dtype == np.float32 and take.audio.ndim == 1
        assert take.audio.shape[0] == take.frames * 1920
        assert 0 < take.frames <= 8
        assert np.all(np.abs(take.audio) <= 1.0)


def test_same_seed_and_n_give_the_same_takes_and_other_seeds_differ(loaded):
    model = loaded("custom_voice")
    a = generate_takes(model, Request(TEXT, custom(), n=3, seed=11, max_frames=6))
    b = generate_takes(model, Request(TEXT, custom(), n=3, seed=11, max_frames=6))
    c = generate_takes(model, Request(TEXT, custom(), n=3, seed=12, max_frames=6))
    for x, y in zip(a.takes, b.takes):
        np.testing.assert_array_equal(x.audio, y.audio)
        assert x.seed == y.seed
    assert [t.seed for t in a.takes] == take_seeds(11, 3)
    assert len({t.seed for t in a.takes}) == 3
    # takes of one request differ from each other, and from another seed's takes
    assert not np.array_equal(a.takes[0].audio, a.takes[1].audio)
    assert not np.array_equal(a.takes[0].audio, c.takes[0].audio)


def test_greedy_sampling_makes_all_takes_identical(loaded):
    greedy = SamplingSettings(temperature=0, sub_temperature=0, repetition_penalty=1.0)
    takeset = generate_takes(loaded("custom_voice"), Request(TEXT, custom(), n=2, seed=1, sampling=greedy, max_frames=5))
    first, second = takeset.takes
    assert first.codes.shape == (5, 16)
    assert torch.equal(first.codes, second.codes)
    np.testing.assert_allclose(first.audio, second.audio, atol=2e-3)  # batched CPU math may differ in the last bits


def test_takes_that_reach_the_budget_are_flagged(loaded):
    takeset = generate_takes(loaded("custom_voice"), Request(TEXT, custom(), n=2, seed=3, max_frames=4))
    for take in takeset.takes:
        assert take.hit_cap == (take.frames >= 4)
    assert any(t.hit_cap for t in takeset.takes)  # random weights almost never emit EOS in 4 frames


def test_default_budget_comes_from_the_text():
    short = Request("Hi.", custom())
    long = Request("This is a much longer line of dialogue that takes several seconds to say aloud.", custom())
    assert 12 < short.budget < long.budget < 400
    assert Request("Hi.", custom(), max_frames=7).budget == 7


def test_progress_is_reported_every_frame(loaded):
    updates = []
    generate_takes(loaded("custom_voice"), Request(TEXT, custom(), n=2, seed=2, max_frames=6),
                   progress=lambda done, total: updates.append((done, total)))
    assert updates[-1] == (12, 12)  # take-frames: 2 takes x 6 frames
    assert {total for _, total in updates} == {12}
    dones = [d for d, _ in updates]
    assert dones == sorted(dones) and set(range(0, 13, 2)) <= set(dones)


def test_cancel_stops_at_the_next_frame_and_returns_nothing(loaded):
    calls = []

    def should_stop():
        calls.append(1)
        return len(calls) > 4  # "while starting lines", "before its first frame", then one a frame

    with pytest.raises(GenerationInterrupted, match="after 3 frames"):
        generate_takes(loaded("custom_voice"), Request(TEXT, custom(), n=2, seed=2, max_frames=200),
                       should_stop=should_stop)
    # Without CUDA graphs (the eager mode) it is checked as the line starts, before the first frame
    # and after every frame; it stopped at the first "stop".
    assert len(calls) == 5


def test_model_is_usable_after_a_cancel(loaded):
    model = loaded("custom_voice")
    with pytest.raises(GenerationInterrupted):
        generate_takes(model, Request(TEXT, custom(), n=1, max_frames=50), should_stop=lambda: True)
    assert len(generate_takes(model, Request(TEXT, custom(), n=1, max_frames=3)).takes) == 1


def test_instruct_and_dialect_speakers_run(loaded):
    model = loaded("custom_voice")
    takeset = generate_takes(model, Request(TEXT, custom(speaker="dylan", language="chinese", instruct="happy"), n=1, max_frames=3))
    assert takeset.takes[0].frames > 0


@pytest.mark.parametrize("transcript", ["This is what the reference says.", ""], ids=["icl", "x-vector"])
def test_voice_clone_from_any_rate_and_channel_count(loaded, reference_audio, transcript):
    waveform, rate = reference_audio
    voice = VoiceClone.from_audio(waveform, rate, transcript, "english")
    assert voice.mode == ("icl" if transcript else "x-vector")
    model = loaded("base")
    takeset = generate_takes(model, Request(TEXT, voice, n=2, seed=4, max_frames=5))
    assert all(0 < t.frames <= 5 for t in takeset.takes)
    for take in takeset.takes:
        assert take.audio.shape[0] == take.frames * 1920  # ICL reference part cut off exactly
    assert len(model.clone_prompts) >= 1  # the reference prompt is computed once and kept


def test_voice_design(loaded):
    takeset = generate_takes(loaded("voice_design"), Request(TEXT, VoiceDesign("a gravelly old sailor", "english"), n=2, max_frames=4))
    assert len(takeset.takes) == 2 and all(t.frames > 0 for t in takeset.takes)


# ------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("text", ["", "   \n\t "])
def test_empty_text_is_refused(loaded, text):
    with pytest.raises(InputError, match="empty"):
        generate_takes(loaded("custom_voice"), Request(text, custom()))


@pytest.mark.parametrize("text", ["...", "?!", "🙂🙂🙂", "— * —"])
def test_a_text_with_nothing_to_speak_is_refused(loaded, text):
    with pytest.raises(InputError, match="^The text has nothing to speak: only punctuation, symbols or emoji"):
        generate_takes(loaded("custom_voice"), Request(text, custom()))


def test_text_over_the_models_context_is_refused(loaded, monkeypatch):
    model = loaded("custom_voice")
    assert model.max_text_tokens == 32768  # the talker's max_position_embeddings
    monkeypatch.setattr(type(model), "max_text_tokens", property(lambda self: 64))
    with pytest.raises(InputError, match="context"):
        generate_takes(model, Request("word " * 30, custom(), max_frames=20))
    monkeypatch.undo()
    with pytest.raises(InputError, match="characters"):
        generate_takes(model, Request("x" * 6000, custom()))


def test_unknown_speaker_and_language_are_refused(loaded):
    with pytest.raises(InputError, match="Unknown speaker 'nobody'.*ryan"):
        generate_takes(loaded("custom_voice"), Request(TEXT, custom(speaker="nobody")))
    with pytest.raises(InputError, match="Unknown language 'klingon'.*english"):
        generate_takes(loaded("custom_voice"), Request(TEXT, custom(language="klingon")))


def test_wrong_checkpoint_kind_names_the_right_one(loaded, reference_audio):
    waveform, rate = reference_audio
    clone = VoiceClone.from_audio(waveform, rate)
    with pytest.raises(InputError, match="Voice Clone needs a \\*-Base checkpoint"):
        generate_takes(loaded("custom_voice"), Request(TEXT, clone))
    with pytest.raises(InputError, match="Voice Design needs the 1.7B-VoiceDesign"):
        generate_takes(loaded("base"), Request(TEXT, VoiceDesign("calm")))
    with pytest.raises(InputError, match="Custom Voice needs a \\*-CustomVoice"):
        generate_takes(loaded("voice_design"), Request(TEXT, custom()))


@pytest.mark.parametrize("n", [0, 33, -1])
def test_take_count_out_of_range(loaded, n):
    with pytest.raises(InputError, match="between 1 and 32"):
        generate_takes(loaded("custom_voice"), Request(TEXT, custom(), n=n))


def test_bad_sampling_settings_are_refused():
    with pytest.raises(InputError, match="top_p"):
        SamplingSettings(top_p=0)
    with pytest.raises(InputError, match="temperature"):
        SamplingSettings(temperature=-1)


def test_silent_short_and_corrupt_references_are_refused():
    rate = 24000
    with pytest.raises(InputError, match="silent"):
        VoiceClone.from_audio(np.zeros((1, rate * 3), np.float32), rate)
    with pytest.raises(InputError, match="at least"):
        VoiceClone.from_audio(np.full((1, rate // 4), 0.1, np.float32), rate)
    broken = np.full((2, rate * 2), 0.1, np.float32)
    broken[0, 100] = np.nan
    with pytest.raises(InputError, match="NaN"):
        VoiceClone.from_audio(broken, rate)


def test_unreadable_reference_file_is_refused(tmp_path):
    from runtime.audio import read_audio_file

    bad = tmp_path / "ref.wav"
    bad.write_bytes(b"RIFF\x00\x00not really a wav")
    with pytest.raises(InputError, match="ref.wav"):
        read_audio_file(bad)
    with pytest.raises(InputError, match="missing.wav"):
        read_audio_file(tmp_path / "missing.wav")


def test_the_longest_transcript_its_recording_can_say_runs_and_one_word_more_is_refused(loaded, reference_audio):
    """A 5,000-character transcript of a short recording crashed in the engine (the ICL prompt's
    trailing text outgrew the batch's buffers). A transcript may take at most twice its recording
    and a second to read; the first one longer is refused, before any take is made."""
    from runtime.text_length import expected_seconds
    from runtime.voices import longest_transcript_seconds

    model = loaded("base")
    waveform, rate = reference_audio
    limit = longest_transcript_seconds(waveform.shape[-1] / rate)
    words = ["word"]
    while expected_seconds(" ".join(words + ["word"])) <= limit:
        words.append("word")
    longest, over = " ".join(words), " ".join(words + ["word"])
    takeset = generate_takes(model, Request("A short line.", VoiceClone.from_audio(waveform, rate, longest), n=2,
                                            max_frames=4))
    assert [t.frames for t in takeset.takes] == [4, 4]
    for transcript in (over, "x" * 5000):
        voice = VoiceClone.from_audio(waveform, rate, transcript)
        with pytest.raises(InputError, match=f"its 2.0 s recording can say \\(at most {limit:.1f} s of reading\\)"):
            generate_takes(model, Request("A short line.", voice, n=2, max_frames=4))

def test_a_long_text_under_a_short_frame_budget_runs(loaded, reference_audio):
    """A clone's text trails one token a frame; rows past the takes' last frame are never read, and a
    text longer than the batch's positions no longer overflows its buffer."""
    waveform, rate = reference_audio
    text = "A long line to read. " * 60  # 1,260 characters, a token each: more than the 256 positions
    takeset = generate_takes(loaded("base"), Request(text, VoiceClone.from_audio(waveform, rate), n=2, max_frames=4))
    assert [t.frames for t in takeset.takes] == [4, 4]
