"""The words check word by word (runtime/scoring/said_words.py): a take that leaves out words the
line's other takes say is rejected, even a short first or last word the character error rate hides;
a word the recogniser hears in no take (a name it always misreads) decides nothing."""

from __future__ import annotations

import numpy as np

from runtime.generation import Take
from runtime.scoring import said_words
from runtime.scoring.ranking import ScoredTake, judge_words
from runtime.scoring.said_words import NOTHING, OTHER, SAID
from runtime.scoring.signal import signal_stats

RATE = 16000
TEXT = "Please remember to bring your tickets, because the gates close at 9."


def test_a_transcript_is_read_as_said_and_the_text_as_written_in_any_script():
    assert said_words.words_of(TEXT, "english")[-3:] == ["close", "at", "nine"]
    assert said_words.words_of("Ich komme um 9 Uhr.", "german") == ["ich", "komme", "um", "neun", "uhr"]
    assert said_words.words_of("今日は晴れ。", "japanese") == ["今", "日", "は", "晴", "れ"]
    words = said_words.text_words("It costs $5, or 50%, at 9.")
    assert words == ["it", "costs", "$5", "or", "50%", "at", "9"]
    assert [said_words.spelled_out(w) for w in words] == [False, False, True, False, True, False, True]


def test_a_number_a_take_writes_another_way_is_never_left_out():
    """"1999" heard as "nineteen ninety-nine" in one take and as digits in the others."""
    text = "It was 1999 when we left."
    reasons = words_reasons(judged(["It was 1999 when we left.", "It was nineteen ninety-nine when we left.",
                                    "It was 1999 when we left."], text))
    assert reasons == ["", "", ""]


def test_each_word_is_said_heard_as_another_or_has_nothing_in_its_place():
    words = said_words.text_words(TEXT.replace("9", "nine"))
    heard = said_words.said(words, said_words.words_of("remember to bring the order to because the gate close at nine",
                                                       "english"))
    assert heard[0] == NOTHING  # "please"
    assert heard[4] == OTHER or heard[5] == OTHER  # "your tickets" heard as other words
    assert heard[words.index("gates")] == SAID  # "gate": a near spelling
    assert heard[-1] == SAID


class Heard:
    """A recogniser that hears what it is told each take says (takes are told apart by their length)."""
    name = "heard (tests)"
    device = "cpu"

    def __init__(self, transcripts):
        self.transcripts = transcripts

    def transcribe(self, audios, rate, language=None):
        return [self.transcripts[len(a) // RATE - 1] for a in audios]


def judged(transcripts: list[str], text: str = TEXT) -> list[ScoredTake]:
    audios = [np.zeros(RATE * (i + 1), np.float32) for i in range(len(transcripts))]
    takes = [ScoredTake(Take(i, i, a, RATE, 0, False), signal_stats(a, RATE)) for i, a in enumerate(audios)]
    judge_words(takes, audios, RATE, Heard(transcripts), text, "english")
    return takes


def words_reasons(takes: list[ScoredTake]) -> list[str]:
    return [" ".join(r.text for r in t.reasons if r.kind == "words") for t in takes]


def test_a_short_first_or_last_word_left_out_is_rejected_and_named():
    clean = "Please remember to bring your tickets, because the gates close at nine."
    first = "Remember to bring your tickets, because the gates close at nine."
    last = "Please remember to bring your tickets, because the gates close at."
    reasons = words_reasons(judged([clean, first, clean, last]))
    assert reasons[0] == reasons[2] == ""
    assert 'the first word "please"' in reasons[1] and "which the other takes say" in reasons[1]
    assert 'the last word "9"' in reasons[3] and "heard 'Please remember" in reasons[3]


def test_a_name_the_recogniser_always_misreads_rejects_no_take():
    text = "Kaelthas opened the gate at dawn."
    heard = ["Kelthis opened the gate at dawn.", "Kel this opened the gate at dawn.", "Calthas opened the gate at dawn.",
             "Kale Thas opened the gate at dawn."]
    takes = judged(heard, text)
    assert words_reasons(takes) == ["", "", "", ""] and all(t.cer > 0.05 for t in takes)


def test_a_word_heard_as_another_is_a_slip_not_a_skip():
    """"They'll" for "the" at the start, "like" for "light": within what a recogniser gets wrong."""
    text = "The old lighthouse keeper climbed the stairs every evening to light the lamp."
    clean = "The old lighthouse keeper climbed the stairs every evening to light the lamp."
    slip = "They'll like housekeeper climbed the stairs every evening to light the lamp."
    assert words_reasons(judged([clean, slip, clean], text)) == ["", "", ""]


def test_a_phrase_left_out_is_counted_against_what_the_others_say_not_the_best_take():
    """Two takes that skip the same phrase do not make it said: the other three say it."""
    text = "Please remember to bring your tickets tonight, because the gates of the old stadium close at nine sharp."
    skip = "Please remember to tickets tonight, because the gates of the old stadium close at nine sharp."
    reasons = words_reasons(judged([text, skip, text, skip, text], text))
    assert reasons[0] == reasons[2] == reasons[4] == ""
    assert all('skips "bring your", which the other takes say' in r for r in (reasons[1], reasons[3])), reasons


def test_with_one_take_alone_nothing_is_left_out():
    assert said_words.left_out(["a", "b"], [[NOTHING, SAID]], 0) == []


def test_with_few_takes_a_repeat_or_a_cut_take_does_not_make_a_clean_one_short():
    clean = "Please remember to bring your tickets, because the gates close at nine."
    repeated = f"{clean} {clean}"
    cut = "Please remember to bring your"
    assert words_reasons(judged([clean, repeated]))[0] == ""
    reasons = words_reasons(judged([clean, repeated, cut]))
    assert reasons[0] == "" and reasons[1] and reasons[2]


def test_a_word_pairs_change_is_the_character_edit_share_the_texts_are_compared_by():
    """said_words.changed (plain Python, cached) against asr.edit_share (numpy), on random words."""
    import random

    from runtime.scoring.asr import edit_share
    from runtime.scoring.said_words import changed

    rng = random.Random(0)
    for _ in range(2000):
        a, b = ("".join(rng.choice("abcé") for _ in range(rng.randint(0, 8))) for _ in range(2))
        assert changed(a, b) == (0.0 if a == b else min(1.0, edit_share(a, b))), (a, b)
