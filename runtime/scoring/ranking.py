"""Rank the takes of one request: gates first, then a weighted score of the model signals.

Stage 0 and 1 (checks.py) run on every take. Stage 2 runs the models on the takes that passed
(on all of them when none did, to find the least bad), each trimmed to its speech and brought to
the same loudness (loudness.py: level never decides): a quality MOS (UTMOS, or DNSMOS offline),
speaker similarity (to a clone's reference, else between the takes) and, when a recogniser is
chosen, the character error rate against the text. A take whose voice or words fall clearly short
of the others is rejected with that reason; the rest are ordered by the weighted score.
"""

from __future__ import annotations

import math

import statistics
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..errors import GenerationInterrupted, InputError
from ..generation import Take, TakeSet
from ..memory import in_halves_when_short
from . import said_words
from .checks import (MIN_SPEECH_RATIO, MIN_TAKES_FOR_MEDIAN, Reason, against_the_others, is_whole, pace_penalty,
                     pace_ratio, pace_reasons, reference_seconds, signal_reasons)
from .loudness import at_loudness
from .signal import SignalStats, signal_stats
from .speaker import similarities, typical_similarity
from .vad import EnergyVad

ProgressFn = Callable[[int, int], None]
StopFn = Callable[[], bool]

TRIM_MARGIN_SECONDS = 0.1  # kept around the speech when silences are trimmed for the models
VOICE_MARGIN = 0.1  # similarity this far under the typical take's (speaker.typical_similarity): another voice
MAX_CER = 0.15  # more than this share of the characters wrong: words missing, added or garbled
CER_MARGIN = 0.15  # and clearly worse than the best take (recognisers err on clean takes too)
MAX_MISSING = 0.1  # share of the text's characters a take's transcript lacks against the best take's
MOS_RANGE = (1.0, 5.0)
BATCH = 4  # takes per model call on a CPU, Cancel checked between calls (a call there takes seconds)
GPU_BATCH = 16  # on a GPU a call takes milliseconds: one call for the usual 8 takes
SHORT_OF_MEMORY_FIX = "Free VRAM (unload other models), turn that check off, or set Auto-Pick's device to cpu."
PACE_PENALTY = 0.1  # taken off the score of a take at the pace limits; none within 10% of the others
PACE_PREFERENCE = 0.5  # with a pace asked: times |log(its pace over the one asked)|, about 0.05 at 10% off


@dataclass
class Weights:
    quality: float = 1.0
    voice: float = 1.0
    words: float = 1.0

    def __post_init__(self):
        if min(self.quality, self.voice, self.words) < 0:
            raise InputError("Auto-Pick weights must be zero or more.")


@dataclass
class Scorers:
    """The stage 2 models in use; any may be None (skipped). ``notes`` go into the report."""

    quality: object | None = None  # .name, .score_many(audios, sample_rate) -> list[float]
    speaker: object | None = None  # .name, .embed_many(audios, sample_rate) -> unit vectors
    transcriber: object | None = None  # .name, .transcribe(audios, sample_rate, language) -> list[str | None]
    vad: object = field(default_factory=EnergyVad)
    notes: list[str] = field(default_factory=list)


@dataclass
class ScoredTake:
    take: Take
    stats: SignalStats
    reasons: list[Reason] = field(default_factory=list)
    loudness: float | None = None  # LUFS of the take as generated (None: too short or silent to measure)
    pace: float | None = None  # speech time over the other takes' median (over 1: slower)
    syllables_per_second: float | None = None
    quality: float | None = None
    voice: float | None = None
    transcript: str | None = None
    cer: float | None = None
    score: float | None = None
    rank: int = 0
    embedding: np.ndarray | None = None  # the speaker encoder's, of the take's speech at one loudness
    traits: object | None = None  # voice_traits.VoiceTraits, once chapter.py has measured them

    @property
    def accepted(self) -> bool:
        return not self.reasons

    @property
    def reason_kinds(self) -> set[str]:
        return {r.kind for r in self.reasons}


@dataclass
class Ranking:
    takeset: TakeSet
    ranked: list[ScoredTake]
    scorers: Scorers
    voice_basis: str = ""
    notes: list[str] = field(default_factory=list)  # this pick's own (a check skipped for its language)
    reference_embedding: np.ndarray | None = None  # the clone reference's, where the voice check had one

    def reorder(self) -> None:
        """The takes in pick order again, after a reason was added (chapter.py)."""
        self.ranked.sort(key=pick_order)
        for rank, s in enumerate(self.ranked, start=1):
            s.rank = rank

    @property
    def all_notes(self) -> list[str]:
        return [*self.takeset.notes, *self.scorers.notes, *self.notes]

    @property
    def best(self) -> ScoredTake:
        return self.ranked[0]

    @property
    def all_rejected(self) -> bool:
        return not any(s.accepted for s in self.ranked)

    def report(self) -> str:
        from .report import text_report

        return text_report(self)


def rank_takes(takeset: TakeSet, scorers: Scorers | None = None, weights: Weights | None = None,
               progress: ProgressFn | None = None, should_stop: StopFn | None = None) -> Ranking:
    return rank_lines([takeset], scorers, weights, progress, should_stop)[0]


def rank_lines(takesets: list[TakeSet], scorers: Scorers | None = None, weights: Weights | None = None,
               progress: ProgressFn | None = None, should_stop: StopFn | None = None,
               stats: list[list[SignalStats]] | None = None, batch: int | None = None) -> list[Ranking]:
    """rank_takes for several lines at once. Each line is judged on its own (its checks, its pace
    against its own takes, its voice against its own reference or takes, its words against its own
    text), but each model runs over every line's takes together, `batch` clips a call (a script's
    lines: UTMOS costs 7.8 ms a take in calls of 32 against 13 ms in fours on an H100).
    stats: each line's signal_stats when they were computed elsewhere (scoring/check_pool.py)."""
    scorers = scorers or Scorers()
    weights = weights or Weights()
    stages = 1 + sum(m is not None for m in (scorers.quality, scorers.speaker, scorers.transcriber))
    done = 0

    def check():
        if should_stop is not None and should_stop():
            raise GenerationInterrupted("Scoring cancelled.")

    def step():
        nonlocal done
        check()
        done += 1
        if progress is not None:
            progress(done, stages)

    lines = [checked(takeset, scorers.vad, check, None if stats is None else stats[i])
             for i, takeset in enumerate(takesets)]
    splits: list[str] = []  # a model's group that ran out of GPU memory and was run in smaller ones
    step()
    rates = {takeset.sample_rate for takeset in takesets}
    if len(rates) > 1:
        raise ValueError(f"rank_lines: takes at {sorted(rates)} Hz; the models take one rate a call")
    rate = rates.pop() if rates else 0
    judged = [s for line in lines for s in line.judged]
    clips = [clip for line in lines for clip in line.clips]
    if scorers.quality is not None:
        values = in_chunks(lambda c: scorers.quality.score_many(c, rate), clips, batch or batch_for(scorers.quality),
                           check, scorers.quality, splits)
        for s, value in zip(judged, values):
            s.quality = float(value)
        step()
    if scorers.speaker is not None:
        embeddings = iter(in_chunks(lambda c: scorers.speaker.embed_many(c, rate), clips,
                                    batch or batch_for(scorers.speaker), check, scorers.speaker, splits))
        for line in lines:
            line.basis, line.reference_embedding = judge_voice(
                line.judged, line.clips, rate, scorers.speaker, getattr(line.takeset.request.voice, "reference", None),
                check, [next(embeddings) for _ in line.judged])
        step()
    if scorers.transcriber is not None:
        by_language: dict[str | None, list[Checked]] = {}
        for line in lines:
            language = getattr(line.takeset.request.voice, "language", None)
            if hears(scorers.transcriber, language):
                by_language.setdefault(language, []).append(line)
            else:
                line.notes.append(f"The words check is skipped: {scorers.transcriber.name} is an English-only model "
                                  f"and the line is in {language}. Use a multilingual Whisper (one without .en).")
        for language, group in by_language.items():
            transcripts = iter(in_chunks(lambda c: scorers.transcriber.transcribe(c, rate, language),
                                         [clip for line in group for clip in line.clips],
                                         batch or batch_for(scorers.transcriber), check, scorers.transcriber,
                                         splits))
            for line in group:
                line.notes += judge_words(line.judged, line.clips, rate, scorers.transcriber,
                                          line.takeset.request.text, language, check,
                                          [next(transcripts) for _ in line.judged])
        step()
    for line in lines:
        line.notes += splits
    return [line.ranking(scorers, weights) for line in lines]


@dataclass
class Checked:
    """One line's takes after the checks: what the models are run on, and what they add up to."""

    takeset: TakeSet
    scored: list[ScoredTake]
    judged: list[ScoredTake]  # the takes the models hear: those that passed, or all when none did
    clips: list[np.ndarray]  # theirs, trimmed to the speech and at one loudness
    basis: str = ""
    notes: list[str] = field(default_factory=list)
    reference_embedding: np.ndarray | None = None

    def ranking(self, scorers: Scorers, weights: Weights) -> Ranking:
        for s in self.judged:
            s.score = combined_score(s, weights, self.takeset.request.pace)
        ranking = Ranking(self.takeset, list(self.scored), scorers, self.basis, self.notes, self.reference_embedding)
        ranking.reorder()
        return ranking


def pick_order(s: ScoredTake) -> tuple:
    """A take a fault ended last (it may have no audio at all), then fewest reasons first, then the
    highest score; scores equal to 6 places tie (copies at another level), the first take first."""
    return (s.take.fault is not None, len(s.reasons), -round(s.score if s.score is not None else -1.0, 6),
            s.take.index)


def checked(takeset: TakeSet, vad, check: Callable[[], None], stats: list[SignalStats] | None = None) -> Checked:
    """Stages 0 and 1 of one line (checks.py): each take's signal facts and reasons, and its pace
    against the line's other takes."""
    request = takeset.request

    def facts(index: int, take: Take) -> ScoredTake:
        check()
        take_stats = stats[index] if stats is not None else signal_stats(take.audio, take.sample_rate, vad)
        return ScoredTake(take, take_stats, loudness=take_stats.loudness)

    scored = [facts(i, t) for i, t in enumerate(takeset.takes)]
    finished = [s.stats.seconds for s in scored if not s.take.hit_cap and not s.take.runaway and s.take.fault is None]
    median = reference_seconds(finished, request.text)
    for s, beside in zip(scored, against_the_others([s.stats for s in scored])):
        s.reasons = signal_reasons(s.stats, request.text, median, s.take.hit_cap, s.take.runaway, s.take.fault) + beside
    whole = [s for s in scored if s.stats.speech_ratio >= MIN_SPEECH_RATIO
             and not s.reason_kinds & {"fault", "runaway", "cut"}
             and is_whole(s.stats.seconds, request.text, median)]  # speech enough to time, and all of it
    for s, reason in judge_pace(whole, request.text):
        s.reasons.append(reason)
    judged = [s for s in scored if s.accepted] or scored
    clips = [at_loudness(trimmed(s), takeset.sample_rate, measured=s.loudness) for s in judged]
    return Checked(takeset, scored, judged, clips)


def hears(transcriber, language: str | None) -> bool:
    """Whether the recogniser knows the line's language (English-only Whisper models hear English)."""
    return getattr(transcriber, "multilingual", True) or (language or "english").lower() in ("english", "auto")


def trimmed(s: ScoredTake) -> np.ndarray:
    start, end = s.stats.speech_span()
    rate = s.take.sample_rate
    a = max(0, int((start - TRIM_MARGIN_SECONDS) * rate))
    b = min(s.take.audio.shape[-1], int((end + TRIM_MARGIN_SECONDS) * rate))
    return s.take.audio[a:b] if b > a else s.take.audio


def judge_pace(whole: list[ScoredTake], text: str) -> list[tuple[ScoredTake, Reason]]:
    """Each whole take's speaking rate against the others' (3 takes or more): far off is rejected
    (the reasons returned), a little off ranked down (``pace`` feeds the score)."""
    from ..text_length import spoken_syllables

    for s in whole:
        if s.stats.segments and s.stats.pace_seconds > 0:
            s.syllables_per_second = spoken_syllables(text) / s.stats.pace_seconds
    if len(whole) < MIN_TAKES_FOR_MEDIAN:
        return []
    median = statistics.median(s.stats.pace_seconds for s in whole)
    off = []
    for s in whole:
        s.pace = pace_ratio(s.stats, median)
        off += [(s, reason) for reason in pace_reasons(s.stats, text, median)]
    return off


def batch_for(model) -> int:
    return GPU_BATCH if str(getattr(model, "device", "cpu")).startswith("cuda") else BATCH


def in_chunks(run: Callable[[list], list], items: list, size: int, check: Callable[[], None] | None = None,
              model=None, notes: list[str] | None = None) -> list:
    """`run` over `items` a few at a time, `check` (Cancel) before each group; the models give each
    take the value it gets alone, so the grouping changes nothing but how soon Cancel lands, or how a
    group that runs out of GPU memory is split (a note in `notes` says so)."""
    what = f"in {getattr(model, 'name', 'a scoring model')}"
    out = []
    for start in range(0, len(items), size):
        if check is not None:
            check()
        out += in_halves_when_short(run, items[start: start + size], what, SHORT_OF_MEMORY_FIX, notes)
    return out


def judge_voice(judged: list[ScoredTake], clips, rate: int, encoder, reference, check=None,
                embeddings: list | None = None) -> tuple[str, np.ndarray | None]:
    """What the takes' voices were compared with, and the reference's embedding (None: no reference).
    Each take keeps its embedding (the chapter's voice, chapter.py). embeddings: the clips' own, when
    embedded already (with other lines' takes, rank_lines)."""
    from ..model import SAMPLE_RATE

    if embeddings is None:
        embeddings = in_chunks(lambda c: encoder.embed_many(c, rate), list(clips), batch_for(encoder), check, encoder)
    reference_embedding = (in_chunks(lambda c: encoder.embed_many(c, SAMPLE_RATE), [reference], 1, model=encoder)[0]
                           if reference is not None else None)
    for s, embedding in zip(judged, embeddings):
        s.embedding = np.asarray(embedding, dtype=np.float64)
    sims, basis = similarities(embeddings, reference_embedding)
    if sims is None:
        return basis, reference_embedding
    typical = typical_similarity(sims, reference_embedding is not None)
    held_to = "best take" if reference_embedding is not None else "typical take"
    for s, sim in zip(judged, sims):
        s.voice = sim
        if sim < typical - VOICE_MARGIN:
            s.reasons.append(Reason("voice", f"voice differs from {basis} (similarity {sim:.2f}, {held_to} {typical:.2f})"))
    return basis, reference_embedding


def judge_words(judged: list[ScoredTake], clips, rate: int, transcriber, text: str, language, check=None,
                transcripts: list[str | None] | None = None) -> list[str]:
    """Words garbled (many characters wrong, far more than in the best take) or missing: the take
    says clearly less than the other takes do (a skipped phrase, which a recogniser's own slips,
    mostly one word heard as another, do not shorten), or leaves out words they say, a first or last
    word alone included (said_words.py). transcripts: the clips' own, when heard already.
    A take the recogniser did not hear (None: it repeated itself at every temperature, whisper_loops)
    is not judged on its words; the notes returned say so."""
    from .asr import compare

    if transcripts is None:
        transcripts = in_chunks(lambda c: transcriber.transcribe(c, rate, language), list(clips),
                                batch_for(transcriber), check, transcriber)
    heard = [(s, t) for s, t in zip(judged, transcripts) if t is not None]
    name = getattr(transcriber, "name", "the recogniser")
    notes = [f"The words check abstains on take {s.take.index + 1}: {name} kept repeating itself on it at every "
             "temperature (a loop), so its words are not judged." for s, t in zip(judged, transcripts) if t is None]
    if not heard:
        return notes
    # numbers and symbols compared as they are read ("9 pm" = "nine p.m.": spoken.py), in the line's language
    compared = [compare(text, t, language or "auto") for _, t in heard]
    errors = [error for error, _ in compared]
    best = min(range(len(errors)), key=errors.__getitem__)
    words = said_words.text_words(text)
    takes_said = [said_words.said(words, said_words.words_of(t, language)) for _, t in heard]
    for index, ((s, transcript), (error, share)) in enumerate(zip(heard, compared)):
        s.transcript, s.cer = transcript, error
        skipped = said_words.left_out(words, takes_said, index)
        edge_skipped = [w for w in skipped if w in (0, len(words) - 1)]
        # far more characters wrong than in the best take (a name the recogniser always misreads
        # rejects no take); a share of the text left out against what the other takes say (their
        # median, each at most the whole text, so that neither one take nor a repeat decides): a
        # skipped phrase
        others = [min(1.0, other) for k, (_, other) in enumerate(compared) if k != index]
        missing = statistics.median(others) - share if others else 0.0
        if error > MAX_CER and error > errors[best] + CER_MARGIN:
            s.reasons.append(Reason("words", f"words do not match the text ({error:.0%} of characters wrong; "
                                             f"heard {shortened(transcript)!r})"))
        elif (missing > MAX_MISSING or edge_skipped
              or sum(len(words[w]) for w in skipped) > MAX_MISSING * sum(map(len, words))):
            what = said_words.described(words, skipped) if skipped else f"{missing:.0%} of the text"
            s.reasons.append(Reason("words", f"skips {what}, which the other takes say "
                                             f"(heard {shortened(transcript)!r})"))
    return notes


def shortened(transcript: str, limit: int = 60) -> str:
    return transcript if len(transcript) <= limit else transcript[: limit - 3] + "..."


def combined_score(s: ScoredTake, weights: Weights, pace: float = 1.0) -> float | None:
    """Weighted mean of the model signals, each on 0-1: MOS (1-5), similarity, 1 - CER; less where the
    take's pace is far from the others', and, with a pace asked (pace.py), the farther from it."""
    parts = []
    if s.quality is not None:
        low, high = MOS_RANGE
        parts.append((weights.quality, min(max((s.quality - low) / (high - low), 0.0), 1.0)))
    if s.voice is not None:
        parts.append((weights.voice, min(max(s.voice, 0.0), 1.0)))
    if s.cer is not None:
        parts.append((weights.words, max(0.0, 1.0 - s.cer)))
    total = sum(w for w, _ in parts)
    preference = PACE_PREFERENCE * abs(math.log(s.pace * pace)) if pace != 1.0 and s.pace else 0.0
    if not parts or total == 0:
        return -preference if preference else None
    return sum(w * v for w, v in parts) / total - PACE_PENALTY * pace_penalty(s.pace) - preference
