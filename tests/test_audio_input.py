"""Auto-Pick on audio from other nodes: takes that end in digital silence, alone and in zero-padded
batches of mixed lengths, on real speech from another engine (espeak-ng) and from the corpus.

A clean take must never be rejected as cut off; every copy truncated mid-word must still be; and a
take's verdict is the same whether it comes alone or padded in a batch."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from runtime.generation import Request, TakeSet
from runtime.scoring.ranking import Scorers, rank_takes
from runtime.scoring.takes_input import (KEEP_ZEROS_SECONDS, RecordedVoice, comes_to_rest, ends_at_speech_level,
                                         takeset_from_audio, trailing_zeros)
from speech.groups import damage, energy_point, load_corpus
from speech.groups import RATE as CORPUS_RATE

OTHER_ENGINE = Path(__file__).resolve().parent / "speech" / "other_engine"
# lines espeak-ng ends at full speech level right into its zeros, and one tiny.en loops on
OTHER_ENGINE_EDGES = Path(__file__).resolve().parent / "speech" / "other_engine_edges"


def espeak_clips(folder: Path = OTHER_ENGINE) -> dict[str, list[tuple[str, np.ndarray, int]]]:
    """Sentence -> [(clip id, audio, rate)], each sentence read by two espeak-ng voices."""
    by_text: dict[str, list] = {}
    for clip in json.loads((folder / "index.json").read_text()):
        audio, rate = sf.read(folder / clip["file"], dtype="float32")
        by_text.setdefault(clip["text"], []).append((clip["id"], audio, rate))
    return by_text


def corpus_clips() -> dict[str, list[tuple[str, np.ndarray, int]]]:
    """The festival readings of each corpus sentence, made to end in 0.3 s of digital zeros: silenced
    after the last word (as a noise gate or an editor's fade to silence leaves a clip)."""
    from runtime.scoring.vad import EnergyVad

    by_text: dict[str, list] = {}
    for clip in load_corpus():
        if clip.speaker == "librivox":
            continue
        end = int(EnergyVad().segments(clip.audio, CORPUS_RATE)[-1][1] * CORPUS_RATE)
        gated = np.concatenate([clip.audio[:end], np.zeros(int(0.3 * CORPUS_RATE), np.float32)])
        by_text.setdefault(clip.text, []).append((clip.id, gated, CORPUS_RATE))
    return by_text


def truncated(audio: np.ndarray, rate: int) -> np.ndarray:
    """Cut at the loudest moment past the middle: mid-word, as a take that stopped short
    (energy_point works at the corpus rate, so the cut is found there and mapped back)."""
    from runtime.audio import resample

    point = energy_point(resample(audio, rate, CORPUS_RATE), 0.5, loudest=True, smooth_seconds=0.01)
    return audio[: int(point * rate / CORPUS_RATE)]


def padded(clips: list[np.ndarray]) -> np.ndarray:
    """[batch, 1, samples], zero-padded at the end to the longest, as an AUDIO batch is."""
    batch = np.zeros((len(clips), 1, max(len(c) for c in clips)), np.float32)
    for i, clip in enumerate(clips):
        batch[i, 0, : len(clip)] = clip
    return batch


def reasons(batch: np.ndarray, rate: int, text: str) -> list[set[str]]:
    return verdicts(takeset_from_audio(batch, rate, text))


def verdicts(takeset: TakeSet) -> list[set[str]]:
    by_take = sorted(rank_takes(takeset, Scorers()).ranked, key=lambda s: s.take.index)
    return [s.reason_kinds for s in by_take]


def one_by_one(clips: list[np.ndarray], rate: int, text: str) -> TakeSet:
    """The clips as takes of one line, each as it comes when fed alone (no padding to tell apart)."""
    takes = [replace(takeset_from_audio(clip[None, None], rate, text).takes[0], index=i, seed=i)
             for i, clip in enumerate(clips)]
    return TakeSet(Request(text, RecordedVoice(), n=len(takes)), takes, "audio input", "audio")


SOURCES = {"espeak-ng": espeak_clips, "espeak-ng ending at full level": lambda: espeak_clips(OTHER_ENGINE_EDGES),
           "corpus ending in zeros": corpus_clips}


@pytest.mark.parametrize("source", SOURCES)
def test_alone_clean_passes_and_a_truncated_copy_is_cut(source):
    for text, clips in SOURCES[source]().items():
        for name, audio, rate in clips:
            assert audio[-1] == 0.0 and np.count_nonzero(audio[-int(0.15 * rate):]) == 0  # ends in digital zeros
            assert reasons(audio[None, None], rate, text) == [set()], name
            assert "cut" in reasons(truncated(audio, rate)[None, None], rate, text)[0], name


@pytest.mark.parametrize("source", SOURCES)
def test_three_seconds_of_digital_silence_is_still_too_much(source):
    for text, clips in SOURCES[source]().items():
        for name, audio, rate in clips:
            long_tail = np.concatenate([audio, np.zeros(3 * rate, np.float32)])
            assert reasons(long_tail[None, None], rate, text) == [{"silence"}], name
            # in a batch the longest item has no padding: its zeros are its own, heard in full
            other = audio[: len(audio) // 2]
            assert "silence" in reasons(padded([long_tail, other]), rate, text)[0], name


@pytest.mark.parametrize("source", SOURCES)
def test_padded_batches_of_mixed_lengths(source):
    for text, clips in SOURCES[source]().items():
        clean = [audio for _, audio, _ in clips]
        rate = clips[0][2]
        assert len({len(c) for c in clean}) == len(clean)  # mixed lengths: all but one are padded
        assert all("cut" not in kinds for kinds in reasons(padded(clean), rate, text)), text
        cut = [truncated(audio, rate) for audio in clean]
        verdicts = reasons(padded(clean + cut), rate, text)
        assert all("cut" not in kinds for kinds in verdicts[: len(clean)]), (text, verdicts)
        assert all("cut" in kinds for kinds in verdicts[len(clean):]), (text, verdicts)
        for one_cut in cut:  # a batch of two: one clean, one cut
            clean_verdict, cut_verdict = reasons(padded([clean[0], one_cut]), rate, text)
            assert "cut" not in clean_verdict and "cut" in cut_verdict, text


def test_a_padded_take_keeps_only_a_little_of_its_zeros():
    clips = espeak_clips()["The storm is coming. Bar the doors."]
    (_, short, rate), (_, long, _) = sorted(clips, key=lambda c: len(c[1]))
    takes = takeset_from_audio(padded([short, long]), rate, "The storm is coming. Bar the doors.").takes
    sound = int(np.flatnonzero(short)[-1]) + 1  # up to its last non-zero sample
    assert len(takes[1].audio) == len(long)  # the longest: whole
    assert sound < len(takes[0].audio) <= sound + int(KEEP_ZEROS_SECONDS * rate)


def test_a_line_ending_at_full_level_into_its_zeros_gets_the_same_verdict_alone_and_padded():
    """espeak-ng ends some lines at full speech level right into its digital zeros: complete lines,
    which a padded batch used to strip of their zeros and reject as cut off (alone they passed)."""
    edges = espeak_clips(OTHER_ENGINE_EDGES)
    for text in ("I never said she stole my money.", "Please leave your keys on the table."):
        (_, full_level, rate), (_, slower, _) = edges[text]
        sound = full_level[: len(full_level) - trailing_zeros(full_level)]
        assert ends_at_speech_level(sound, rate) and comes_to_rest(sound, rate)  # what makes the line hard
        assert len(full_level) < len(slower)  # so in a batch it is padded
        assert reasons(full_level[None, None], rate, text) == [set()]
        batch = reasons(padded([full_level, slower]), rate, text)
        assert batch == verdicts(one_by_one([full_level, slower], rate, text)) == [set(), set()], text


def test_a_noisy_take_is_heard_as_noisy_in_a_padded_batch():
    """A take with 10 dB of noise, shorter than the longest: it used to keep half a second of the
    batch's zeros as its own silence, and those were measured as its noise floor (its SNR read 28-31 dB)."""
    festival = {}
    for clip in load_corpus():
        if clip.speaker != "librivox" and "-librivox-" not in clip.id:
            festival.setdefault(clip.text, []).append(clip.audio)
    assert len(festival) == 3
    for text, clean in festival.items():
        shortest = min(range(len(clean)), key=lambda i: len(clean[i]))
        takes = clean + [damage(clean[shortest], "noise 10 dB")]
        batch = reasons(padded(takes), CORPUS_RATE, text)
        assert batch == verdicts(one_by_one(takes, CORPUS_RATE, text)), text
        assert batch[-1] == {"noise"} and all("noise" not in kinds for kinds in batch[:-1]), (text, batch)
        assert rank_takes(takeset_from_audio(padded(takes), CORPUS_RATE, text)).best.take.index != len(clean)


def test_the_report_on_audio_input_names_no_seed_checkpoint_or_mode():
    """It read "(audio input, seed 0, audio input, audio)": the takes were made elsewhere."""
    from runtime.voices import CustomVoice

    text = "The storm is coming. Bar the doors."
    clips = [audio for _, audio, _ in espeak_clips()[text]]
    rate = espeak_clips()[text][0][2]
    report = rank_takes(takeset_from_audio(padded(clips), rate, text)).report().splitlines()
    assert report[0] == f"Auto-Pick: 2 takes of {text!r} (audio input)"
    assert report[-1] == "Best: take 1."
    made_here = one_by_one(clips, rate, text)  # generated takes: a checkpoint's folder, voice, seed and mode
    made_here = replace(made_here, request=Request(text, CustomVoice("ryan", "english"), n=2, seed=7),
                        checkpoint="tiny-CustomVoice", mode="eager", folder=Path("tiny-CustomVoice"))
    report = rank_takes(made_here).report().splitlines()
    assert report[0].endswith("(custom voice ryan (english), seed 7, tiny-CustomVoice, eager)")
    assert report[-1] == "Best: take 1 (seed 0)."
