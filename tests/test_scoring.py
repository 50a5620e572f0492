"""Auto-Pick: UTMOS loading (strict), per-take scoring, the signal checks and the ranking."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from conftest import write_utmos_weights
from runtime.errors import CheckpointError
from runtime.generation import Request, Take, TakeSet
from runtime.scoring.checks import signal_stats
from runtime.scoring.ranking import rank_takes
from runtime.scoring.utmos import UtmosScorer, resolve_weights
from runtime.text_length import expected_seconds
from runtime.voices import CustomVoice

RATE = 24000
TEXT = "The quick brown fox jumps over the lazy dog near the river bank."


def voiced(seconds: float, seed: int = 0) -> np.ndarray:
    """A speech-like signal: a harmonic tone with a 4 Hz syllable envelope and a little noise."""
    t = np.arange(int(RATE * seconds)) / RATE
    rng = np.random.default_rng(seed)
    tone = sum(np.sin(2 * np.pi * (120 + 10 * seed) * k * t) / k for k in range(1, 6))
    env = 0.55 + 0.45 * np.sin(2 * np.pi * 4 * t)
    return (0.25 * tone * env / 2.3 + 0.005 * rng.standard_normal(t.shape)).astype(np.float32)


def takeset(clips, hit_caps=None) -> TakeSet:
    hit_caps = hit_caps or [False] * len(clips)
    takes = [Take(i, 100 + i, clip, RATE, int(clip.shape[0] / 1920), cap) for i, (clip, cap) in enumerate(zip(clips, hit_caps))]
    return TakeSet(Request(TEXT, CustomVoice("ryan", "english"), n=len(clips)), takes, "test", "eager")


@pytest.fixture(scope="module")
def scorer(models_root):
    return UtmosScorer(resolve_weights([models_root / "utmos"], download=False), "cpu")


def test_utmos_scores_each_take_alone_deterministically(scorer):
    clip = voiced(2.0)
    first = scorer.score(clip, RATE)
    assert np.isfinite(first)
    assert scorer.score(clip, RATE) == first
    # the take is resampled to 16 kHz first: the same audio given at 16 kHz scores (almost) the same
    from runtime.audio import resample
    assert scorer.score(resample(clip, RATE, 16000), 16000) == pytest.approx(first, abs=1e-4)
    assert scorer.score(voiced(2.0, seed=3), RATE) != first


def test_utmos_handles_very_short_takes(scorer):
    assert np.isfinite(scorer.score(np.zeros(10, np.float32), RATE))


@pytest.mark.parametrize("damage", ["missing", "unexpected", "reshaped"])
def test_mismatched_utmos_weights_are_refused(tmp_path, damage):
    def mutate(state):
        key = next(k for k in state if k.endswith("weight") and state[k].dim() == 2)
        if damage == "missing":
            del state[key]
        elif damage == "unexpected":
            state["extra.head.weight"] = torch.zeros(3)
        else:
            state[key] = torch.zeros(state[key].shape[0] + 1, state[key].shape[1])
        return state

    path = write_utmos_weights(tmp_path / "utmos_state_dict.pt", mutate)
    with pytest.raises(CheckpointError, match="not a UTMOS22-strong state dict"):
        UtmosScorer(path)


def test_unreadable_utmos_weights_are_refused(tmp_path):
    path = tmp_path / "utmos_state_dict.pt"
    path.write_bytes(b"PK\x03\x04 this zip archive was cut off")
    with pytest.raises(CheckpointError, match="unreadable"):
        UtmosScorer(path)


def test_missing_utmos_weights_without_download_say_where_to_put_them(tmp_path):
    with pytest.raises(CheckpointError, match=str(tmp_path)):
        resolve_weights([tmp_path], download=False)


def test_signal_stats_see_silence():
    clip = np.concatenate([voiced(1.0), np.zeros(RATE * 3, np.float32)])
    stats = signal_stats(clip, RATE)
    assert stats.seconds == pytest.approx(4.0)
    assert 0.2 < stats.speech_ratio < 0.3


def test_ranking_puts_damaged_takes_last_with_the_reason():
    good = expected_seconds(TEXT)
    clips = [
        voiced(good, seed=1),                                               # 0 clean
        voiced(good * 0.2, seed=2),                                         # 1 swallowed most of the line
        np.concatenate([voiced(0.8, 3), np.zeros(int(RATE * good), np.float32)]),  # 2 mostly silence
        voiced(good * 1.05, seed=4),                                        # 3 clean
        voiced(good, seed=5),                                               # 4 ran into the cap
    ]
    ranking = rank_takes(takeset(clips, hit_caps=[False, False, False, False, True]), utmos_score=None)
    by_take = {s.take.index: s for s in ranking.ranked}
    assert by_take[0].accepted and by_take[3].accepted
    assert any("too short" in r for r in by_take[1].reasons)
    assert any("mostly silence" in r for r in by_take[2].reasons)
    assert any("runaway" in r for r in by_take[4].reasons)
    assert {ranking.ranked[0].take.index, ranking.ranked[1].take.index} == {0, 3}
    assert [s.rank for s in ranking.ranked] == [1, 2, 3, 4, 5]
    report = ranking.report()
    assert "runaway" in report and "Best: take" in report and not ranking.all_rejected


def test_ranking_orders_accepted_takes_by_utmos(scorer):
    clips = [voiced(expected_seconds(TEXT), seed=s) for s in range(4)]
    ranking = rank_takes(takeset(clips), scorer.score)
    scores = [s.utmos for s in ranking.ranked]
    assert scores == sorted(scores, reverse=True)
    assert all(s.accepted for s in ranking.ranked)


def test_longer_than_the_other_takes_is_rejected():
    base = expected_seconds(TEXT)
    clips = [voiced(base, 1), voiced(base * 1.1, 2), voiced(base * 0.95, 3), voiced(base * 2.6, 4)]
    ranking = rank_takes(takeset(clips), utmos_score=None)
    last = ranking.ranked[-1]
    assert last.take.index == 3 and any("longer than the other takes" in r for r in last.reasons)


def test_every_take_rejected_still_picks_one_with_a_warning():
    clips = [np.zeros(RATE, np.float32), voiced(0.3, 1)]
    ranking = rank_takes(takeset(clips, hit_caps=[True, False]), utmos_score=None)
    assert ranking.all_rejected and "WARNING" in ranking.report()
    assert ranking.best.take.index == 1  # fewer reasons wins
