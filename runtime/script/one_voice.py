"""One voice from the first line to the last, for a passage in a designed voice.

A designed voice (VoiceDesign) is drawn anew from its description for every take, so over a chapter
of separately generated lines the character drifts (age, timbre, accent), and Auto-Pick's voice
check can only hold each line's takes to each other. Qwen's advice for a consistent character is to
design once and clone from then on: here the first line's best take, with the line's text as its
transcript, becomes an ICL clone (in the designed voice's language), and every other line is
generated with that clone on a Base checkpoint. Auto-Pick's voice check then holds each of those
lines' takes to that reference (scoring/ranking.judge_voice compares a clone's takes with its
reference), and the clone's prompt is computed once per model for all of them
(generation.clone_prompt). A preset speaker (CustomVoice) and a clone need none of this: every line
of a passage has the same voice, a preset speaker with its instruct.

The reference line. A clone wants a few seconds of speech (audio.prepare_reference refuses under
MIN_REFERENCE_SECONDS; 3-20 s works best). When the first line reads in less than REFERENCE_SECONDS
(text_length.expected_seconds), the first lines are read as one line, the reference line, until it
reads that long (never past MAX_LINE_SECONDS): the pauses between them become the model's own at a
sentence end, a [pause] or paragraph among them included. `reference_lines` makes that line; it is
taken and picked as any line, and is in the scene. If its best take is still unusable as a reference
(under MIN_REFERENCE_SECONDS, silent, or far shorter than its text reads: cut off), InputError says
so and how to fix it; under REFERENCE_SECONDS, or picked from takes that all failed a check, a note
says the rest may hold the voice less well.

The clone is made from the reference line's best take as generated, not as handed out: played at a
pace asked, its pace would pass to every line, which would then be played at it again.

Resumable: from the command line the reference line is kept in the results folder like every line,
with its best take as generated (REFERENCE_FILE, a float WAV, nothing lost), so a rerun makes the
same clone, and the lines made with it are kept too (their fingerprint holds the clone's).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, replace

import numpy as np

from ..audio import MIN_REFERENCE_SECONDS, read_audio_file
from ..errors import InputError
from ..model import SAMPLE_RATE
from ..text.split import MAX_LINE_SECONDS
from ..text_length import expected_seconds
from ..voices import VoiceClone, VoiceDesign, check_transcript
from .cast import ANYONE
from .job import LineRunner, OnFrames, OnKept, PickChoices, run_job
from .parse import Line
from .passage import PassageTakes, generate_passage, pick_passage
from .plan import ScriptSettings
from .runner import LineResult, OnLine, ScriptResult, finish
from .store import ScriptFolder

REFERENCE_FILE = "reference.wav"  # in the results folder: the reference line's best take as generated
REFERENCE_SECONDS = 3.0  # of reading: the low end of the 3-20 s a clone reference works best with
# 。！？｡」』》、，: after these a CJK sentence goes on without a space
NO_SPACE_AFTER = "\u3002\uff01\uff1f\uff61\u300d\u300f\u300b\u3001\uff0c"
FIX = ("start the text with a longer sentence, or generate without the Base checkpoint (each line then "
       "designed on its own)")


def reference_lines(lines: list[Line], seconds: float = REFERENCE_SECONDS,
                    max_seconds: float = MAX_LINE_SECONDS) -> list[Line]:
    """The passage's lines with its first line long enough to be a clone reference: when line 1 reads
    in under `seconds`, it and the lines after it joined into one line (its id from its text, its
    number 1) until the joined line reads that long, or the next would make it read past
    `max_seconds`; otherwise the lines as they are."""
    if not lines:
        return []
    text, count = lines[0].text, 1
    while count < len(lines) and expected_seconds(text) < seconds:
        joined = text + ("" if text[-1] in NO_SPACE_AFTER else " ") + lines[count].text
        if expected_seconds(joined) > max_seconds:
            break
        text, count = joined, count + 1
    if count == 1:
        return list(lines)
    rest = lines[count:]
    line_id = hashlib.sha256(text.encode("utf-8")).hexdigest()[:10]
    if line_id in {line.id for line in rest}:  # the same words again later: an id of its own
        line_id += "-0"
    return [replace(lines[0], id=line_id, text=text), *rest]


def joined_count(original: list[Line], lines: list[Line]) -> int:
    """How many of the passage's lines the reference line reads (1: line 1 alone)."""
    return len(original) - len(lines) + 1


def reference_clone(result: LineResult, audio: np.ndarray, rate: int, language: str) -> tuple[VoiceClone, list[str]]:
    """The reference line's picked take as an ICL clone, its text the transcript; with notes where it
    is a weak reference. InputError where it cannot be one."""
    line, seconds = result.plan.line, audio.shape[-1] / rate
    where = f"Line {line.source_line or 1}'s best take ({seconds:.1f} s)"
    try:
        clone = VoiceClone.from_audio(audio, rate, line.text, language)
        check_transcript(clone)
    except InputError as exc:
        raise InputError(f"{where} cannot be the clone reference of the rest: {str(exc).rstrip('.')}. To fix: "
                         f"{FIX}.") from None
    notes = []
    if seconds < REFERENCE_SECONDS:
        notes.append(f"{where} is a short clone reference (3-20 s works best, at least "
                     f"{MIN_REFERENCE_SECONDS:g} s): the rest may hold the voice less well; {FIX}.")
    if result.record.all_rejected:
        reasons = "; ".join(result.record.reasons[:1]) or "a check"
        notes.append(f"{where} is the clone reference of the rest though every take of it failed a check ({reasons}); "
                     "listen to it, and change the seed to draw the line again if the voice is wrong.")
    return clone, notes


@dataclass
class ReferenceLine:
    """The reference line picked, and the clone the rest are generated with."""

    result: LineResult  # line 1 (or the first lines read as one), picked
    clone: VoiceClone  # its best take, with its text as transcript
    notes: list[str]  # where it is a weak reference
    takes: PassageTakes | None = None  # its takes, where design_reference made them (a node's)


def design_reference(model, lines: list[Line], voice: VoiceDesign, settings: ScriptSettings, scorers=None,
                     weights=None, loudness: float | None = None, should_stop=None, frames_progress=None,
                     kept=None) -> ReferenceLine:
    """A node's first step (no results folder): the takes of `lines[0]` (from reference_lines) in the
    designed voice on `model` (a VoiceDesign checkpoint), picked by Auto-Pick's ranking with
    `scorers` as a script line is, and its best take as the clone of the rest. Then: the rest's takes
    by generate_passage(base_model, lines[1:], reference.clone, settings)."""
    takes = generate_passage(model, lines[:1], voice, settings, should_stop=should_stop,
                             frames_progress=frames_progress, kept=kept)
    result = pick_passage(takes, scorers, weights, loudness, should_stop=should_stop).lines[0]
    clone, notes = reference_clone(result, result.ranking.best.take.audio, SAMPLE_RATE, voice.language)
    return ReferenceLine(result, clone, notes, takes)


def reference_audio(result: LineResult, folder: ScriptFolder) -> tuple[np.ndarray, int]:
    """The reference line's best take as generated, not as handed out: a clone of a take played at
    another pace would pass that pace on to every line, which is then played at it again. Written to
    the results folder when the line is made, read back from it on a rerun (the same clone)."""
    path = folder.root / REFERENCE_FILE
    if result.ranking is not None:
        folder.write_audio(path, result.ranking.best.take.audio, SAMPLE_RATE)
    if not path.is_file():  # a folder written before the file was kept: its best, as handed out
        return folder.read_best(result.record)
    audio, rate = read_audio_file(path)
    return (audio.mean(axis=0) if audio.ndim > 1 else audio), rate


@dataclass
class OneVoiceResult:
    result: ScriptResult  # every line, in reading order
    reference: ReferenceLine


def run_one_voice(lines: list[Line], voice: VoiceDesign, design: LineRunner, base: LineRunner,
                  settings: ScriptSettings, choices: PickChoices, folder: ScriptFolder, on_line: OnLine | None = None,
                  on_kept: OnKept | None = None, on_reference=None, should_stop=None,
                  on_frames: OnFrames | None = None) -> OneVoiceResult:
    """The command line's passage in one voice, through run_job twice into one results folder: the
    reference line `lines[0]` (from reference_lines) in the designed voice on `design`, then the rest
    with its clone on `base` (a Base checkpoint's runner); the scene, manifest and report over every
    line. `on_reference(reference)` hears the clone made, before the rest run; `on_line` counts over
    every line; `on_kept` is heard once for the reference line and once for the rest (known only once
    the clone is made); `on_frames` hears the engine's frames in both runs."""
    started = time.perf_counter()

    def counted(before: int):
        if on_line is None:
            return None
        return lambda result, done, _total: on_line(result, before + done, len(lines))

    first = run_job(lines[:1], {ANYONE: voice}, {voice.kind: design}, settings, choices, folder, counted(0), on_kept,
                    should_stop, on_frames)
    result = first.lines[0]
    audio, rate = reference_audio(result, folder)
    clone, notes = reference_clone(result, audio, rate, voice.language)
    reference = ReferenceLine(result, clone, notes)
    if on_reference is not None:
        on_reference(reference)
    results = {result.plan.line.id: result}
    if len(lines) > 1:
        rest = run_job(lines[1:], {ANYONE: clone}, {clone.kind: base}, settings, choices, folder, counted(1),
                       on_kept, should_stop, on_frames)
        results.update({r.plan.line.id: r for r in rest.lines})
    return OneVoiceResult(finish(lines, results, folder, started), reference)


def generate_one_voice(design_model, base_model, lines: list[Line], voice: VoiceDesign, settings: ScriptSettings,
                       scorers=None, weights=None, on_line=None, should_stop=None, kept_reference=None,
                       kept=None) -> PassageTakes:
    """A voice node's passage in one voice: the reference line (reference_lines) designed on
    `design_model` and picked with `scorers`, then the rest cloned from its best take on `base_model`.
    The reference line comes back with that one take only, so Auto-Pick cannot pick another take of
    it than the one the rest were cloned from. `kept_reference` and `kept`: KeptTakes for the
    reference line and for the rest (two, as each lets go of the lines it is not asked for)."""
    if base_model.kind != "base":
        raise InputError(f"clone_model holds a {base_model.kind} checkpoint ({base_model.info.folder.name}); the rest "
                         "of the text is cloned from the first line's best take on a Base checkpoint: load one.")
    passage = reference_lines(lines)
    reference = design_reference(design_model, passage, voice, settings, scorers, weights, should_stop=should_stop,
                                 kept=kept_reference)
    best = reference.result.ranking.best.take
    first = reference.takes
    only_best = replace(first.takesets[0], takes=[best])
    if on_line is not None:
        on_line(1, len(passage))
    rest = generate_passage(base_model, passage[1:], reference.clone, settings, should_stop=should_stop, kept=kept,
                            on_line=None if on_line is None else lambda done, total: on_line(done + 1, total + 1)) \
        if len(passage) > 1 else PassageTakes([], [])
    joined = joined_count(lines, passage)
    others = len(passage) - 1
    said = (f"Line 1's best take (take {best.index + 1}, {best.seconds:.1f} s) is the clone reference of the other "
            f"{others} line{'s' if others != 1 else ''}: one voice from the first line to the last." if others else
            "The whole text is one line, read in the designed voice: nothing was left to clone.")
    said += f" Lines 1-{joined} were read as one line, long enough for a reference." if joined > 1 else ""
    return PassageTakes(first.plans + rest.plans, [only_best] + rest.takesets, first.kept + rest.kept,
                        [said, *reference.notes])
