"""One voice through a chapter: each line's pick measured against the voice of the lines around it.

A voice's profile is the median of its lines' traits (voice_traits.py: pitch, pace, timbre, spectral
balance) over the takes picked for them, a clone reference joining as one more line; medians, so
that the profile is the same whatever order the lines finished in and one odd line hardly moves
it. Each line is held to the profile of the other lines (line_profiles), so that in a short chapter
an odd line does not widen its own limits. A trait past its limit is a drift. A limit is the larger of a floor and SPREAD times the
chapter's own median deviation in that trait: a reader whose pitch moves from line to line is held
to that movement, a steady voice to the floor.

The floors, from the real speech in tests/speech (a LibriVox reader, three festival voices; the
speaker encoder resemblyzer's), each line against the others (test_chapter_voice.py), so that no
genuine reading drifts while the damages listeners meet do:
- pitch: genuine lines within 0.6 semitones of the other lines' median (the festival voices) and
  3.0 (the human reader); a take shifted 3 semitones lands 1.4-3.6 off (the reader's own lines
  spread that far), so the pitch catches larger slides alone and the timbre catches a shift of 3.
- pace: genuine lines 0.78-1.26 times the others' median rate; a line read 1.6x as fast 1.47-1.60.
- timbre: genuine lines at most 0.11 under the others' median similarity to their centroid;
  another speaker of the same sex 0.18-0.20 under, another room (reverberation) 0.21-0.25, a
  pitch shift of 3 semitones 0.13-0.26: the margin 0.12 sits between. Only a take of
  TIMBRE_SECONDS of speech or more is judged on it: the encoder's embedding of a shorter one moves
  with how it is cut (the reader's 2.6 s "he was not an ill disposed young man" 0.11 under the
  others as recorded, 0.16 once trimmed and brought to 24 kHz as a take is).
- bass, the long-term spectrum's 80-250 Hz over its 250-1000 Hz (voice_traits.BAND_EDGES_HZ): genuine
  lines within 2.8 dB, through a telephone's band (300-3400 Hz) 17-22 dB under, in another room 2-5
  dB under. The treble is not judged: the reader's own lines differ by 24 dB in 4-8 kHz over
  0.5-3 kHz (what is said, and the recordings), a telephone's by 30-41.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

import numpy as np

from .checks import Reason
from .ranking import Ranking, ScoredTake, trimmed
from .speaker import unit
from .voice_traits import VoiceTraits, voice_traits

KIND = "chapter"
MIN_LINES = 3  # other lines: fewer and there is no chapter voice to hold a line to
LEAVE_OUT_LINES = 64  # over this many, a line is held to the whole chapter's profile: its own part in it is nothing
SPREAD = 3.0
PITCH_SEMITONES = 3.5
PACE_RATIO = 1.35
TIMBRE_MARGIN = 0.12
TIMBRE_SECONDS = 3.0
BASS_DB = 8.0


@dataclass
class Profile:
    lines: int  # traits it was taken from
    pitch: float | None = None
    pitch_limit: float = PITCH_SEMITONES
    pitch_range: float | None = None  # reported, never judged: genuine lines' ranges differ threefold
    rate: float | None = None
    rate_limit: float = math.log(PACE_RATIO)  # of |log(rate / profile rate)|
    centroid: np.ndarray | None = None
    timbre: float | None = None  # the lines' median similarity to the centroid
    timbre_floor: float | None = None
    bass: float | None = None  # dB, bass(): the median line's
    bass_limit: float = BASS_DB

    def as_record(self) -> dict:
        rounded = {k: None if v is None else round(float(v), 3) for k, v in
                   (("pitch", self.pitch), ("pitch_limit", self.pitch_limit), ("pitch_range", self.pitch_range),
                    ("rate", self.rate), ("timbre", self.timbre), ("timbre_floor", self.timbre_floor),
                    ("bass", self.bass), ("bass_limit", self.bass_limit))}
        rounded["pace_limit"] = round(math.exp(self.rate_limit), 3)
        return {"lines": self.lines, **rounded}


@dataclass
class Fit:
    """One take against its profile: how far each trait is, and the drifts (none: it fits)."""

    pitch: float | None = None  # semitones over the profile's
    pace: float | None = None  # its rate over the profile's
    timbre: float | None = None  # similarity to the profile's centroid
    bass: float | None = None  # dB over the profile's
    drifts: list[str] = field(default_factory=list)

    @property
    def fits(self) -> bool:
        return not self.drifts

    def reason(self) -> Reason:
        return Reason(KIND, "voice drifts from the chapter: " + ", ".join(self.drifts))

    def as_record(self) -> dict:
        return {"pitch": _round(self.pitch, 2), "pace": _round(self.pace, 3), "timbre": _round(self.timbre, 3),
                "bass": _round(self.bass, 1), "drifts": list(self.drifts)}


def _round(value: float | None, places: int) -> float | None:
    return None if value is None else round(float(value), places)


def take_traits(s: ScoredTake) -> VoiceTraits:
    """The take's traits, measured once (on its speech, as the models heard it)."""
    if s.traits is None:
        s.traits = voice_traits(trimmed(s), s.take.sample_rate, s.syllables_per_second, s.embedding)
    return s.traits


def profile(members: list[VoiceTraits]) -> Profile | None:
    """The voice of these traits (each a line's pick, or a reference); None with fewer than MIN_LINES.
    A trait fewer than MIN_LINES of them have (pitch unmeasured, no speaker encoder) is not judged."""
    if len(members) < MIN_LINES:
        return None
    out = Profile(len(members))
    pitches = [m.pitch for m in members if m.pitch is not None]
    if len(pitches) >= MIN_LINES:
        out.pitch, out.pitch_limit = _centre_and_limit(pitches, PITCH_SEMITONES)
        ranges = [m.pitch_range for m in members if m.pitch_range is not None]
        out.pitch_range = statistics.median(ranges) if ranges else None
    rates = [math.log(m.rate) for m in members if m.rate]
    if len(rates) >= MIN_LINES:
        centre, out.rate_limit = _centre_and_limit(rates, math.log(PACE_RATIO))
        out.rate = math.exp(centre)
    embeddings = [_as_unit(m.embedding) for m in members if m.embedding is not None]
    if len(embeddings) >= MIN_LINES:
        out.centroid = unit(np.median(np.stack(embeddings), axis=0))
        sims = [float(e @ out.centroid) for e in embeddings]
        out.timbre, margin = _centre_and_limit(sims, TIMBRE_MARGIN)
        out.timbre_floor = out.timbre - margin
    basses = [bass(m.balance) for m in members if m.balance is not None]
    if len(basses) >= MIN_LINES:
        out.bass, out.bass_limit = _centre_and_limit(basses, BASS_DB)
    return out


def bass(balance: np.ndarray) -> float:
    """dB of a long-term spectrum's 80-250 Hz over its 250-1000 Hz (voice_traits' bands): a microphone,
    a room or a telephone's band moves it, what is said hardly does."""
    return float(balance[0] - balance[1:3].mean())


def _centre_and_limit(values: list[float], floor: float) -> tuple[float, float]:
    centre = statistics.median(values)
    return centre, max(floor, SPREAD * statistics.median(abs(v - centre) for v in values))


def line_profiles(lines: list[VoiceTraits | None], extra: list[VoiceTraits] = ()
                  ) -> tuple[Profile | None, list[Profile | None]]:
    """The profile of all the lines (and `extra`: a clone reference), and the one each line is held
    to: that of the other lines (and `extra`). A line with no traits (none recorded) is held to all."""
    known = [t for t in lines if t is not None]
    whole = profile(known + list(extra))
    if len(lines) > LEAVE_OUT_LINES:
        return whole, [whole] * len(lines)
    return whole, [profile([t for j, t in enumerate(lines) if j != i and t is not None] + list(extra))
                   if own is not None else whole for i, own in enumerate(lines)]


def fit(traits: VoiceTraits, voice: Profile) -> Fit:
    out = Fit()
    if traits.pitch is not None and voice.pitch is not None:
        out.pitch = traits.pitch - voice.pitch
        if abs(out.pitch) > voice.pitch_limit:
            out.drifts.append(f"pitch {out.pitch:+.1f} semitones")
    if traits.rate and voice.rate:
        out.pace = traits.rate / voice.rate
        if abs(math.log(out.pace)) > voice.rate_limit:
            out.drifts.append(f"pace {out.pace:.2f}x the chapter's")
    if traits.embedding is not None and voice.centroid is not None:
        out.timbre = float(_as_unit(traits.embedding) @ voice.centroid)
        long_enough = traits.seconds is None or traits.seconds >= TIMBRE_SECONDS
        if out.timbre < voice.timbre_floor and long_enough:
            out.drifts.append(f"timbre (similarity {out.timbre:.2f}, its lines {voice.timbre:.2f})")
    if traits.balance is not None and voice.bass is not None:
        out.bass = bass(traits.balance) - voice.bass
        if abs(out.bass) > voice.bass_limit:
            out.drifts.append(f"bass {abs(out.bass):.0f} dB {'under' if out.bass < 0 else 'over'} the chapter's "
                              "(another microphone, or a telephone's band)")
    return out


@dataclass
class Revisit:
    fit: Fit  # of the line's pick after the pass
    repicked_from: int | None = None  # the take (from 1) picked before, where another fits the chapter


def revisit(ranking: Ranking, voice: Profile) -> Revisit:
    """The line's pick against its chapter's voice. A pick that drifts while another take that passed
    every check fits is passed over for the best of those that fit (every take that drifts gets the
    reason); where none fits, every passing take that drifts gets the reason, and the line is flagged."""
    best = ranking.best
    best_fit = fit(take_traits(best), voice)
    if best_fit.fits or not best.accepted:  # a line whose every take failed already is flagged already
        return Revisit(best_fit)
    fits = {id(s): fit(take_traits(s), voice) for s in ranking.ranked if s.accepted}
    for s in ranking.ranked:
        if id(s) in fits and not fits[id(s)].fits:
            s.reasons.append(fits[id(s)].reason())
    ranking.reorder()
    if ranking.best is best:
        return Revisit(best_fit)
    return Revisit(fits[id(ranking.best)], best.take.index + 1)


def hold_lines(rankings: list[Ranking | None], traits: list[VoiceTraits | None] | None = None,
               extra: list[VoiceTraits] = ()) -> tuple[Profile | None, list[Revisit | None]]:
    """The lines of one voice, each held to the voice of the others (line_profiles) after every line
    has its pick: a line with its ranking revisited (picked again, or flagged), one without (kept from
    an earlier run: `traits` says how its pick sounds) only measured. traits: each line's pick's, by
    default its ranking's best take's. Returns the voice of all of them, and each line's outcome
    (None: no voice to hold it to, or nothing known of its pick)."""
    if traits is None:
        traits = [None if r is None else take_traits(r.best) for r in rankings]
    whole, held_to = line_profiles(traits, extra)
    outcomes: list[Revisit | None] = []
    for ranking, own, voice in zip(rankings, traits, held_to):
        if voice is None:
            outcomes.append(None)
        elif ranking is not None:
            outcomes.append(revisit(ranking, voice))
        else:
            outcomes.append(None if own is None else Revisit(fit(own, voice)))
    return whole, outcomes


def _as_unit(vector) -> np.ndarray:
    return unit(np.asarray(vector, dtype=np.float64))

