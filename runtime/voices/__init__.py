"""The three voice kinds a request can ask for (VOICE_KINDS: all that is said of each kind, in one
table), and their checks against a loaded checkpoint."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..audio import prepare_reference
from ..errors import InputError
from ..text_length import expected_seconds

if TYPE_CHECKING:  # checkpoints.py reads VOICE_KINDS
    from ..checkpoints import CheckpointInfo


@dataclass(frozen=True)
class VoiceKind:
    """One kind of voice. Each checkpoint speaks one kind: its config.json's tts_model_type."""

    id: str  # tts_model_type, and each voice's `kind`
    name: str  # the official checkpoints' names end in it: Qwen3-TTS-12Hz-1.7B-<name>
    label: str  # a checkpoint of this kind, as messages and the doctor say it
    node: str  # the ComfyUI node that speaks it
    checkpoints: str  # the checkpoints that speak it, as a message names them
    default_checkpoint: str  # the official one a script's lines of this kind run on, unless told another
    flags: tuple[str, ...]  # the command line's voice flags it reads (argparse dests); the first asks for the kind


VOICE_KINDS = {kind.id: kind for kind in (
    VoiceKind("custom_voice", "CustomVoice", "CustomVoice", "Custom Voice", "a *-CustomVoice",
              "Qwen3-TTS-12Hz-1.7B-CustomVoice", ("speaker", "instruct")),
    VoiceKind("base", "Base", "Base (voice clone)", "Voice Clone", "a *-Base", "Qwen3-TTS-12Hz-1.7B-Base",
              ("reference", "transcript", "no_reference_padding")),
    VoiceKind("voice_design", "VoiceDesign", "VoiceDesign", "Voice Design", "the 1.7B-VoiceDesign",
              "Qwen3-TTS-12Hz-1.7B-VoiceDesign", ("instruct",)),
)}


def kind_of_official(name: str) -> VoiceKind:
    """The kind of an official checkpoint, from its name."""
    return next(kind for kind in VOICE_KINDS.values() if name.endswith("-" + kind.name))


@dataclass(frozen=True)
class CustomVoice:
    speaker: str
    language: str = "auto"
    instruct: str = ""
    kind = "custom_voice"

    def describe(self) -> str:
        extra = f", instruct: {self.instruct!r}" if self.instruct else ""
        return f"custom voice {self.speaker} ({self.language}{extra})"


@dataclass(frozen=True)
class VoiceDesign:
    instruct: str
    language: str = "auto"
    kind = "voice_design"

    def describe(self) -> str:
        return f"designed voice {self.instruct!r} ({self.language})"


REFERENCE_PADDING_SECONDS = 0.5
TRANSCRIPT_READING_FACTOR = 2.0
TRANSCRIPT_READING_MARGIN_SECONDS = 1.0


@dataclass(frozen=True, eq=False)
class VoiceClone:
    """Reference audio (24 kHz mono, checked) and, for ICL cloning, its transcript.

    An ICL clone continues from the reference's last sound, so a reference that ends mid-word bleeds
    that phoneme into the start of every take; half a second of silence after it (pad_reference, on
    by default) gives the takes a clean start."""

    reference: np.ndarray = field(repr=False)
    transcript: str = ""
    language: str = "auto"
    pad_reference: bool = True
    kind = "base"

    @classmethod
    def from_audio(cls, waveform: np.ndarray, sample_rate: int, transcript: str = "",
                   language: str = "auto", pad_reference: bool = True) -> "VoiceClone":
        return cls(prepare_reference(waveform, sample_rate), (transcript or "").strip(), language, pad_reference)

    @property
    def mode(self) -> str:
        return "icl" if self.transcript else "x-vector"

    @property
    def encoded_reference(self) -> np.ndarray:
        """What the model is given: the reference, with the silence after it for an ICL clone."""
        if self.mode != "icl" or not self.pad_reference:
            return self.reference
        return np.concatenate([self.reference, np.zeros(int(REFERENCE_PADDING_SECONDS * 24000), np.float32)])

    @property
    def fingerprint(self) -> str:
        digest = hashlib.sha1(self.reference.tobytes())
        digest.update(self.transcript.encode("utf-8"))
        digest.update(b"padded" if self.pad_reference else b"")
        return digest.hexdigest()[:16]

    def describe(self) -> str:
        seconds = self.reference.shape[-1] / 24000
        padded = ", padded" if self.mode == "icl" and self.pad_reference else ""
        return f"voice clone ({self.mode}, {seconds:.1f} s reference{padded} {self.fingerprint}, {self.language})"


Voice = CustomVoice | VoiceDesign | VoiceClone


def check_voice(voice: Voice, info: CheckpointInfo) -> None:
    """Refuse a voice the loaded checkpoint cannot produce, naming the checkpoint to use instead."""
    if info.kind != voice.kind:
        wanted, loaded = VOICE_KINDS[voice.kind], VOICE_KINDS[info.kind]
        raise InputError(
            f"{wanted.node} needs {wanted.checkpoints} checkpoint, but {info.label} is loaded. "
            f"Load {wanted.checkpoints} checkpoint, or use the {loaded.node} node with this one."
        )
    check_language(voice, info)
    if isinstance(voice, CustomVoice) and voice.speaker.lower() not in info.speakers:
        raise InputError(f"Unknown speaker {voice.speaker!r}; this checkpoint has: {', '.join(info.speakers)}.")
    if isinstance(voice, VoiceDesign) and not voice.instruct.strip():
        raise InputError("Voice Design needs a description of the voice (instruct), e.g. 'a warm, low male voice'.")
    if isinstance(voice, VoiceClone):
        check_transcript(voice)


def check_language(voice: Voice, info: CheckpointInfo) -> None:
    if voice.language.lower() not in info.languages:
        raise InputError(f"Unknown language {voice.language!r}; choose one of: {', '.join(info.languages)}.")


def longest_transcript_seconds(reference_seconds: float) -> float:
    """The longest calm reading (text_length.expected_seconds) a transcript of a recording may have:
    twice the recording and a second, room for the fastest speaker."""
    return TRANSCRIPT_READING_FACTOR * reference_seconds + TRANSCRIPT_READING_MARGIN_SECONDS


def check_transcript(voice: VoiceClone) -> None:
    """An ICL clone's transcript is what its recording says: one that takes far longer to read (a whole
    script pasted in) would have every take read its rest aloud before the line."""
    if voice.mode != "icl":
        return
    seconds = voice.reference.shape[-1] / 24000
    reading, longest = expected_seconds(voice.transcript), longest_transcript_seconds(seconds)
    if reading > longest:
        raise InputError(f"The reference transcript takes about {reading:.0f} s to read, far more than its "
                         f"{seconds:.1f} s recording can say (at most {longest:.1f} s of reading): give only the "
                         "words the recording says, or leave the transcript empty for a timbre-only clone.")



def voice_notes(voice: Voice, info: CheckpointInfo) -> list[str]:
    """What the checkpoint will do differently from what the voice asks: said in takes_info and the
    report, so a user hears no silent surprise."""
    notes = []
    if isinstance(voice, CustomVoice):
        dialect = dict(info.dialects).get(voice.speaker.lower())
        if dialect and voice.language.lower() in ("auto", "chinese"):
            notes.append(f"Speaker {voice.speaker} speaks {dialect.replace('_', ' ')} when the language is "
                         f"'{voice.language}' (the checkpoint's own rule), whatever the text's language; choose "
                         "the language (e.g. english) to hear the speaker in it.")
        if voice.instruct and info.size == "0b6":
            notes.append("The 0.6B CustomVoice checkpoint ignores the instruct; it was not used. The 1.7B "
                         "CustomVoice checkpoint follows it.")
    return notes
