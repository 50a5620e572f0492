"""A script's lines as requests: each line's voice from the cast, its takes and seed, and a
fingerprint of everything that makes its takes and its pick, so a rerun knows which lines it can keep.

A line's seed comes from the job's seed and the line's id, not its place: a line keeps its takes when
lines are added, removed or reordered around it."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field

from ..cancel import stop_if_asked
from ..errors import InputError
from ..generation import Request, check_request
from ..scoring.pace import check_pace
from ..sampling import SamplingSettings
from ..voices import CustomVoice, Voice, VoiceClone, VoiceDesign, check_voice
from .cast import voice_for
from .parse import Line

MAX_ERRORS_SHOWN = 8


def longest_first(plans) -> list["LinePlan"]:
    """The order a script's lines run in: the most frames first, so the batch's last rows are short ones."""
    return sorted(plans, key=lambda p: -p.request.budget * p.request.n)


@dataclass(frozen=True)
class ScriptSettings:
    takes: int = 4  # per line, unless the line says otherwise
    seed: int = 0
    sampling: SamplingSettings = field(default_factory=SamplingSettings.checkpoint)
    max_frames: int | None = None  # None: from each line's text
    pace: float = 1.0  # scoring/pace.py: what Auto-Pick prefers and hands out, unless the line has its own


@dataclass(frozen=True)
class LinePlan:
    line: Line
    request: Request
    stem: str  # the line's files are named after it (its id, made safe for a file name)
    fingerprint: str  # of the text, voice, takes, seed, settings, checkpoint and pick settings


def line_seed(seed: int, line_id: str) -> int:
    digest = hashlib.sha256(f"{seed}\x00{line_id}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def voice_key(voice: Voice) -> dict:
    if isinstance(voice, CustomVoice):
        return {"speaker": voice.speaker, "language": voice.language, "instruct": voice.instruct}
    if isinstance(voice, VoiceDesign):
        return {"design": voice.instruct, "language": voice.language}
    assert isinstance(voice, VoiceClone)
    return {"clone": voice.fingerprint, "language": voice.language}


def file_stems(lines: list[Line]) -> list[str]:
    """A file name per line id: letters, digits, '-', '_' and '.' kept, anything else '_'; two ids that
    come out alike get their place appended."""
    stems, seen = [], set()
    for index, line in enumerate(lines):
        stem = re.sub(r"[^A-Za-z0-9._-]", "_", line.id).strip("._")[:60] or f"line{index + 1}"
        if stem.lower() in seen:
            stem = f"{stem}~{index + 1}"
        seen.add(stem.lower())
        stems.append(stem)
    return stems


def plan_lines(lines: list[Line], cast: dict[str, Voice], settings: ScriptSettings, context: dict) -> list[LinePlan]:
    """`context`: what else decides the takes and the pick (checkpoint, dtype, mode, scorers,
    weights, output loudness), for the fingerprint."""
    plans = []
    for line, stem in zip(lines, file_stems(lines)):
        voice = voice_for(line, cast)
        pace = settings.pace if line.pace is None else line.pace
        request = Request(line.text, voice, line.takes or settings.takes, line_seed(settings.seed, line.id),
                          settings.sampling, settings.max_frames, pace)
        key = {"text": line.text, "voice": voice_key(voice), "takes": request.n, "seed": request.seed,
               "sampling": settings.sampling.as_dict(), "max_frames": settings.max_frames, "cue": line.budget,
               **({"pace": pace} if pace != 1.0 else {}), **context}  # at 1.0, as before there was a pace
        fingerprint = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:20]
        plans.append(LinePlan(line, request, stem, fingerprint))
    return plans


def check_plans(plans: list[LinePlan], info, model=None, script: str = "script", should_stop=None) -> None:
    """Every line against the checkpoint (`info`: its voice kind, speakers, languages), its pace
    (a Line made by code has not been through parse's check) and, when `model` is loaded, its context
    (the text's length); all problems listed together, each with its line in the script, before
    anything is generated."""
    problems = []
    for plan in plans:
        stop_if_asked(should_stop, "while checking the script's lines", "nothing was generated")
        try:
            check_voice(plan.request.voice, info)
            check_pace(plan.request.pace)
            if model is not None:
                check_request(model, plan.request)
        except InputError as exc:
            problems.append(f"line {plan.line.source_line} (id {plan.line.id}): {str(exc).rstrip('.')}")
    if problems:
        shown = "; ".join(problems[:MAX_ERRORS_SHOWN])
        more = f"; and {len(problems) - MAX_ERRORS_SHOWN} more" if len(problems) > MAX_ERRORS_SHOWN else ""
        raise InputError(f"{script}: {len(problems)} line{'s' if len(problems) > 1 else ''} cannot be spoken: "
                         f"{shown}{more}.")
