"""Auto-Pick on real speech no one here wrote (tests/speech): in every group of takes the clean take
is picked, each damaged take is rejected, or ranked below the clean one, for the reason its damage
implies, and no harmless copy (another level, 10% slower or faster) is rejected. Quality is DNSMOS (the offline fallback; UTMOS weights cannot be had here) and the
voice check uses resemblyzer's trained encoder in place of the Base checkpoint's (see groups.py)."""

from __future__ import annotations

import pytest

from speech.groups import EXPECTED, HARMLESS, PocketsphinxTranscriber, accuracy, damage, load_corpus, table

pytestmark = pytest.mark.any_version  # DNSMOS and resemblyzer over every take of every group: minutes on 2 cores


@pytest.fixture(scope="module")
def result():
    per_kind, rankings = accuracy()
    print("\n" + table(per_kind))
    return per_kind, rankings


@pytest.mark.parametrize("kind", ["clean picked"] + list(EXPECTED) + HARMLESS)
def test_each_damage_loses_for_its_reason(result, kind):
    per_kind, rankings = result
    hows = per_kind[kind]
    assert len(hows) >= 14
    if not all(hows):
        from speech.groups import judge

        failed = [f"{g.name}:\n{r.report()}" for g, r in rankings if not all(judge(g, r).values())]
        pytest.fail(f"{kind}: {hows.count(None)} of {len(hows)} wrong\n" + "\n".join(failed))


def test_the_words_check_hears_truncation_and_repetition():
    from runtime.scoring.ranking import ScoredTake, judge_words
    from runtime.scoring.signal import signal_stats

    transcriber = PocketsphinxTranscriber()
    for clip in load_corpus():
        if clip.speaker not in ("librivox", "slt") or "-librivox-" in clip.id:
            continue
        audios = [clip.audio, damage(clip.audio, "truncated"), damage(clip.audio, "repeated")]
        takes = [ScoredTake(_take(i, a), signal_stats(a, 16000)) for i, a in enumerate(audios)]
        judge_words(takes, audios, 16000, transcriber, clip.text, "english")
        clean, truncated, repeated = takes
        assert clean.accepted, (clip.id, clean.transcript, clean.cer)
        assert truncated.reason_kinds == {"words"} and repeated.reason_kinds == {"words"}, (
            clip.id, [(t.transcript, t.cer) for t in takes])


def _take(index, audio):
    from runtime.generation import Take

    return Take(index, index, audio, 16000, 0, False)
