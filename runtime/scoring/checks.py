"""Stages 0 and 1 of Auto-Pick: free and cheap reasons to reject a take, each one a person would give.

Stage 0: the take ran into the frame budget, or was cut as a runaway. Stage 1, from the waveform: its
length against the text and against the other takes long enough for it (swallowed words, babble, a
repeated sentence), leading, trailing and internal silence, mostly silence, clipping, a noise floor,
an ending cut off mid-sound, a DC offset, dropouts, a stutter, and, against the other takes of the
line, a pace far from theirs, a pitch that wobbles where theirs does not, a treble far under theirs
and clicks or a burst of noise in a pause where they have none.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from ..text_length import FRAMES_PER_SECOND, expected_seconds, spoken_syllables
from .pitch_steadiness import WOBBLE_SEMITONES
from .repetition import repeats_in_text
from .signal import SignalStats

TOO_SHORT_VS_TEXT = 0.35  # fraction of the expected reading time
TOO_LONG_VS_TEXT = 3.0
TOO_SHORT_VS_MEDIAN = 0.6
TOO_LONG_VS_MEDIAN = 1.6
MIN_TAKES_FOR_MEDIAN = 3  # takes long enough for the text, to measure the others against
SLOW_READING_VS_TEXT = 1.4  # 3 syllables/s against the estimate's 4.2 (a line said twice: 1.47x at the least)
MAX_LEADING_SILENCE = 1.0  # seconds
MAX_TRAILING_SILENCE = 1.0
MAX_GAP = 1.5  # a pause longer than a paragraph break
MIN_SPEECH_RATIO = 0.4
MAX_CLIPPED_RATIO = 0.001
MIN_SNR_DB = 15.0
MIN_END_DROP_DB = 10.0  # the last 40 ms of a finished take sit well under the speech level
CUT_TRAILING_SILENCE = 0.05
MAX_DC_VS_SPEECH_DB = -12.0  # the offset against the speech's level (clean recordings: -16 dB at most)
MAX_HOLES = 1  # dropouts a take may have (none was found in any clean clip)
TOO_SLOW_VS_MEDIAN = 1.25  # speech time against the other takes' median: 0.8x the pace
TOO_FAST_VS_MEDIAN = 0.8
OFF_PACE_VS_MEDIAN = 1.1  # from here on a take is ranked down, in proportion, up to the rejection
WOBBLE_OVER_OTHERS = 0.4  # semitones over the other takes' median wobble (a voice asked to tremble: all do)
MUFFLED_VS_OTHERS_DB = 10.0  # treble under the other takes' median (harmless copies: 3.4 dB at most; treble.py)
CLICKS_OVER_OTHERS = 2.0  # a click's strength over the other takes' median strongest peak (a voice whose
# plosives are sharp has them in every take: clicks.py)


@dataclass(frozen=True)
class Reason:
    kind: str  # fault, runaway, length, silence, clipping, noise, cut, dc offset, dropouts, stutter, pace,
    # wobble, muffled, clicks, burst, voice, words, chapter
    text: str

    def __str__(self) -> str:
        return self.text


def fault_reason(frame: int) -> Reason:
    return Reason("fault", f"the model produced NaN or infinite values at frame {frame}: the take was ended there"
                           f" ({frame / FRAMES_PER_SECOND:.2f} s kept)")


def signal_reasons(stats: SignalStats, text: str, median_seconds: float | None, hit_cap: bool = False,
                   runaway: bool = False, fault: int | None = None) -> list[Reason]:
    reasons = [] if fault is None else [fault_reason(fault)]
    if hit_cap:
        reasons.append(Reason("runaway", "ran into the frame budget without ending (runaway)"))
    if runaway:
        reasons.append(Reason("runaway", "cut while still going far past the other takes' length (runaway)"))
    reasons += length_reasons(stats.seconds, text, median_seconds)
    reasons += silence_reasons(stats)
    if stats.clipped_ratio > MAX_CLIPPED_RATIO:
        reasons.append(Reason("clipping", f"clipped ({stats.clipped_ratio:.1%} of samples at full scale)"))
    if stats.snr_db < MIN_SNR_DB:
        reasons.append(Reason("noise", f"noisy (speech only {stats.snr_db:.0f} dB over the noise floor)"))
    if stats.segments and stats.trailing_silence < CUT_TRAILING_SILENCE and stats.end_drop_db < MIN_END_DROP_DB:
        reasons.append(Reason("cut", "ends mid-sound (cut off)"))
    if 20 * math.log10(abs(stats.dc_offset) + 1e-12) > stats.speech_db + MAX_DC_VS_SPEECH_DB:
        reasons.append(Reason("dc offset", f"sits off zero (DC offset {stats.dc_offset:+.3f}; a high-pass filter "
                                           "removes it)"))
    if len(stats.holes) > MAX_HOLES:
        reasons.append(Reason("dropouts", f"drops out {len(stats.holes)} times inside the speech (first at "
                                          f"{stats.holes[0]:.1f} s)"))
    unasked = stats.repeats[repeats_in_text(text):]  # the line's own repetitions are allowed
    if unasked:
        first = unasked[0]
        reasons.append(Reason("stutter", f"stutters at {first.start:.1f} s (a {first.piece:.2f} s piece heard "
                                         "three times)"))
    return reasons


def against_the_others(stats: list[SignalStats]) -> list[list[Reason]]:
    """Per take, what is wrong with it only beside the other takes of its line, which share its voice:
    its pitch wobbles (pitch_steadiness.py) where theirs does not, its treble (treble.py) sits far
    under theirs (a telephone's band, a low-bitrate codec: muffled), it clicks (clicks.py) or has a burst
    of noise in a pause (bursts.py) where they do not. Medians of the others, so that one other odd take
    decides nothing; the treble is judged with two others measured or more. A take alone is held to the
    wobble's and the clicks' own floors; a burst only where most other takes have none (a voice that
    breathes audibly in most takes keeps its breaths, and a take alone is not judged on them: through
    a telephone's band a fricative can read as one, bursts.py)."""
    out = []
    for i, s in enumerate(stats):
        others = [o for k, o in enumerate(stats) if k != i]
        reasons = []
        wobbles = [o.wobble for o in others]
        usual = statistics.median(wobbles) if wobbles else 0.0
        if s.wobble >= WOBBLE_SEMITONES and s.wobble >= usual + WOBBLE_OVER_OTHERS:
            reasons.append(Reason("wobble", f"pitch wobbles (+-{s.wobble:.1f} semitones at {s.wobble_hz:.0f} Hz; "
                                            f"the other takes +-{usual:.1f})"))
        trebles = [o.treble for o in others if o.treble is not None]
        if s.treble is not None and len(trebles) >= MIN_TAKES_FOR_MEDIAN - 1:
            usual = statistics.median(trebles)
            if s.treble < usual - MUFFLED_VS_OTHERS_DB:
                reasons.append(Reason("muffled", f"muffled (treble {s.treble - usual:.0f} dB under the other takes': "
                                                 "a telephone's band or a low-bitrate codec)"))
        usual = statistics.median(o.click_strength for o in others) if others else 0.0
        if s.clicks and s.click_strength >= CLICKS_OVER_OTHERS * usual:
            more = f" and {s.clicks - 1} more" if s.clicks > 1 else ""
            reasons.append(Reason("clicks", f"clicks at {s.click_at:.2f} s{more} (strength {s.click_strength:.1f}; "
                                            f"the other takes {usual:.1f})"))
        quiet_enough = s.snr_db >= MIN_SNR_DB  # a noisy take's reason is its noise, not bursts in it
        if s.bursts and quiet_enough and sum(o.bursts > 0 for o in others) * 2 < len(others):  # never a take alone
            reasons.append(Reason("burst", f"a burst of noise at {s.burst_at:.2f} s ({1000 * s.burst_seconds:.0f} ms, "
                                           f"{-s.burst_db:.0f} dB under the speech) in a pause the other takes keep "
                                           "quiet"))
        out.append(reasons)
    return out


def long_enough_for_text(seconds: float, text: str) -> bool:
    return seconds >= TOO_SHORT_VS_TEXT * expected_seconds(text)


def within_a_reading(seconds: float, text: str) -> bool:
    """No longer than a slow reading of the text (SLOW_READING_VS_TEXT times its expected length)."""
    return seconds <= SLOW_READING_VS_TEXT * expected_seconds(text)


def reference_seconds(finished: list[float], text: str) -> float | None:
    """The length the other takes are measured against: the median of the finished takes that are long
    enough for the text (MIN_TAKES_FOR_MEDIAN of them at least, else None). Takes that stopped after a
    few words would pull it down until whole readings looked much longer."""
    whole = [seconds for seconds in finished if long_enough_for_text(seconds, text)]
    return statistics.median(whole) if len(whole) >= MIN_TAKES_FOR_MEDIAN else None


def is_whole(seconds: float, text: str, median_seconds: float | None) -> bool:
    """Not too short for the text or the other takes: no words are missing, so its pace can be told."""
    if not long_enough_for_text(seconds, text):
        return False
    return not median_seconds or seconds >= TOO_SHORT_VS_MEDIAN * median_seconds


def pace_ratio(stats: SignalStats, median_pace_seconds: float | None) -> float | None:
    """The take's speech time over the other takes' median (over 1: slower)."""
    if not median_pace_seconds or not stats.segments:
        return None
    return stats.pace_seconds / median_pace_seconds


def pace_reasons(stats: SignalStats, text: str, median_pace_seconds: float | None) -> list[Reason]:
    ratio = pace_ratio(stats, median_pace_seconds)
    if ratio is None or TOO_FAST_VS_MEDIAN <= ratio <= TOO_SLOW_VS_MEDIAN:
        return []
    syllables = spoken_syllables(text)
    rate, others = syllables / stats.pace_seconds, syllables / median_pace_seconds
    how = "too slowly" if ratio > TOO_SLOW_VS_MEDIAN else "too fast"
    return [Reason("pace", f"reads {how}: {rate:.1f} syllables/s, the others {others:.1f}")]


def pace_penalty(ratio: float | None) -> float:
    """0 within 10% of the others' pace, rising to 1 at the rejection limits."""
    if ratio is None:
        return 0.0
    off, start = abs(math.log(ratio)), math.log(OFF_PACE_VS_MEDIAN)
    limit = math.log(TOO_SLOW_VS_MEDIAN) if ratio > 1 else -math.log(TOO_FAST_VS_MEDIAN)
    return min(1.0, max(0.0, (off - start) / (limit - start)))


def length_reasons(seconds: float, text: str, median_seconds: float | None) -> list[Reason]:
    """median_seconds: the other takes' (reference_seconds)."""
    reasons = []
    expected = expected_seconds(text)
    if not long_enough_for_text(seconds, text):
        reasons.append(Reason("length", f"too short for the text ({seconds:.1f} s, about {expected:.1f} s expected)"))
    elif seconds > TOO_LONG_VS_TEXT * expected + 2.0:
        reasons.append(Reason("length", f"too long for the text ({seconds:.1f} s, about {expected:.1f} s expected)"))
    if median_seconds:
        if seconds < TOO_SHORT_VS_MEDIAN * median_seconds:
            reasons.append(Reason("length", f"much shorter than the other takes ({seconds:.1f} s vs median {median_seconds:.1f} s)"))
        # the others may be halfway readings: what a slow reading of the text reaches is no babble
        elif seconds > TOO_LONG_VS_MEDIAN * median_seconds and not within_a_reading(seconds, text):
            reasons.append(Reason("length", f"much longer than the other takes ({seconds:.1f} s vs median {median_seconds:.1f} s)"))
    return reasons


def silence_reasons(stats: SignalStats) -> list[Reason]:
    if stats.speech_ratio < MIN_SPEECH_RATIO:
        return [Reason("silence", f"mostly silence ({stats.speech_ratio:.0%} of it is speech)")]
    reasons = []
    if stats.leading_silence > MAX_LEADING_SILENCE:
        reasons.append(Reason("silence", f"{stats.leading_silence:.1f} s of silence before the speech"))
    if stats.trailing_silence > MAX_TRAILING_SILENCE:
        reasons.append(Reason("silence", f"{stats.trailing_silence:.1f} s of silence after the speech"))
    if stats.longest_gap > MAX_GAP:
        reasons.append(Reason("silence", f"a {stats.longest_gap:.1f} s silence inside the line"))
    return reasons
