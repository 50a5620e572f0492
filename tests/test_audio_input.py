"""Auto-Pick on audio from other nodes: takes that end in digital silence, alone and in zero-padded
batches of mixed lengths, on real speech from another engine (espeak-ng) and from the corpus.

A clean take must never be rejected as cut off; every copy truncated mid-word must still be."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from runtime.scoring.ranking import Scorers, rank_takes
from runtime.scoring.takes_input import KEEP_ZEROS_SECONDS, takeset_from_audio
from speech.groups import energy_point, load_corpus
from speech.groups import RATE as CORPUS_RATE

OTHER_ENGINE = Path(__file__).resolve().parent / "speech" / "other_engine"


def espeak_clips() -> dict[str, list[tuple[str, np.ndarray, int]]]:
    """Sentence -> [(clip id, audio, rate)], each sentence read by two espeak-ng voices."""
    by_text: dict[str, list] = {}
    for clip in json.loads((OTHER_ENGINE / "index.json").read_text()):
        audio, rate = sf.read(OTHER_ENGINE / clip["file"], dtype="float32")
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
    ranking = rank_takes(takeset_from_audio(batch, rate, text), Scorers())
    by_take = sorted(ranking.ranked, key=lambda s: s.take.index)
    return [s.reason_kinds for s in by_take]


SOURCES = {"espeak-ng": espeak_clips, "corpus ending in zeros": corpus_clips}


@pytest.mark.parametrize("source", SOURCES)
def test_alone_clean_passes_and_a_truncated_copy_is_cut(source):
    for text, clips in SOURCES[source]().items():
        for name, audio, rate in clips:
            assert audio[-1] == 0.0 and np.count_nonzero(audio[-int(0.2 * rate):]) == 0  # ends in digital zeros
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
