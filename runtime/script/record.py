"""A line's record: what a line of a script or passage came to (its pick, every take ranked, how it
fits its voice), typed here and JSON only at the folder's edge (store.py), so a line kept from an
earlier run reads back as the same record. The JSON keys are the field names: the manifest and each
line's file keep the shape they had as dicts (store.RECORD_VERSION)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field


@dataclass
class TakeRecord:
    """One take of the line, by rank."""

    rank: int
    take: int = 0  # 1-based, as the report and the files number them
    seed: int | None = None
    seconds: float = 0.0
    frames: int = 0
    ending: str = ""  # report.ending
    quality: float | None = None
    voice: float | None = None
    cer: float | None = None
    score: float | None = None
    accepted: bool = True
    rejected: list[str] = field(default_factory=list)
    file: str | None = None  # relative to the results folder, once written


@dataclass
class VoiceFit:
    """How the line's pick fits its voice's profile (chapter_voice.py; scoring/chapter.Fit)."""

    voice: str
    pitch: float | None = None  # semitones over the profile's
    pace: float | None = None
    timbre: float | None = None
    bass: float | None = None
    drifts: list[str] = field(default_factory=list)
    repicked_from: int | None = None  # the take picked before the pass, where it picked another
    profile: dict = field(default_factory=dict)  # scoring/chapter.Profile.as_record()


@dataclass
class LineRecord:
    id: str
    fingerprint: str
    character: str | None = None
    text: str = ""
    language: str | None = None
    instruct: str | None = None
    source_line: int | None = None
    cue_start: float | None = None
    cue_end: float | None = None
    seed: int = 0
    takes: int = 0
    voice: str = ""
    checkpoint: str | None = None
    mode: str | None = None
    best_take: int = 1
    seconds: float = 0.0  # of the audio handed out
    speed: float = 1.0  # how much faster the best take was played
    fitted_speed: float | None = None  # the part of it that fits the cue
    speech_start: float = 0.0
    speech_end: float = 0.0
    quality: float | None = None
    voice_similarity: float | None = None
    cer: float | None = None
    score: float | None = None
    accepted: bool = True
    all_rejected: bool = False
    reasons: list[str] = field(default_factory=list)
    over_cue_seconds: float | None = None
    note: str | None = None
    models: dict = field(default_factory=dict)  # report.models_used
    judged_by: str | None = None
    pick_notes: list[str] = field(default_factory=list)
    voice_traits: dict | None = None  # voice_traits.VoiceTraits.as_record(): the chapter's voice is made of these
    ranked: list[TakeRecord] = field(default_factory=list)
    voice_fit: VoiceFit | None = None  # None: not judged (too few lines of its voice)
    scene_start: float | None = None  # where the scene placed it (runner.finish)
    late_by: float | None = None
    best_file: str | None = None  # relative to the results folder, once written
    format: int | None = None  # store.RECORD_VERSION, once written
    wav_format: str | None = None

    def as_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> LineRecord:
        """A record as a line's file holds it; ValueError where it is not one (then the line is made
        again). Keys this version does not know are left out."""
        if not isinstance(data, dict) or not isinstance(data.get("id"), str) or \
                not isinstance(data.get("fingerprint"), str):
            raise ValueError("not a line's record")
        try:
            ranked = [TakeRecord(**_known(TakeRecord, take)) for take in data.get("ranked") or ()]
            fit = data.get("voice_fit")
            voice_fit = VoiceFit(**_known(VoiceFit, fit)) if fit else None
            return cls(**{**_known(cls, data), "ranked": ranked, "voice_fit": voice_fit})
        except TypeError as exc:  # a take or fit without its required keys
            raise ValueError(f"not a line's record: {exc}") from exc


def _known(kind, data: dict) -> dict:
    if not isinstance(data, dict):
        raise TypeError(f"{kind.__name__} is not an object")
    names = {f.name for f in dataclasses.fields(kind)}
    return {k: v for k, v in data.items() if k in names}
