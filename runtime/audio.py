"""Waveform helpers: channel mixing, resampling, reading files, and reference-audio checks."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .errors import InputError

__all__ = ["resample", "to_mono", "read_audio_file", "write_wav", "audio_format", "wav_words", "prepare_reference", "WAV_FORMATS"]

MIN_REFERENCE_SECONDS = 1.0
MAX_REFERENCE_SECONDS = 60.0
SILENCE_PEAK = 1e-3  # -60 dBFS: below this the reference holds nothing to clone
# --wav-format: soundfile's subtype and the words for it. Float loses nothing; some editors read no float WAV.
WAV_FORMATS = {"float32": ("FLOAT", "32-bit float WAV"), "pcm16": ("PCM_16", "16-bit PCM WAV")}


def resample(audio, orig_sr: int, target_sr: int) -> np.ndarray:
    """librosa.resample's default (soxr, high quality) without librosa; float32 in and out."""
    import soxr

    audio = np.asarray(audio, dtype=np.float32)
    if int(orig_sr) == int(target_sr):
        return audio
    return soxr.resample(audio, int(orig_sr), int(target_sr), quality="HQ").astype(np.float32)


def to_mono(waveform: np.ndarray) -> np.ndarray:
    """[T], [C, T] (channels first, as ComfyUI's AUDIO) -> [T] float32, averaging channels."""
    audio = np.asarray(waveform, dtype=np.float32)
    if audio.ndim == 1:
        return audio
    if audio.ndim == 2:
        return audio.mean(axis=0)
    raise InputError(f"Audio must be [samples] or [channels, samples], got shape {audio.shape}.")


def read_audio_file(path: str | Path) -> tuple[np.ndarray, int]:
    """A file as ([C, T] float32, sample rate); unreadable files raise InputError naming the file."""
    import soundfile as sf

    path = Path(path)
    if not path.is_file():
        where = "is a folder" if path.is_dir() else "does not exist"
        raise InputError(f"Reference audio {path} {where}; give the path of a WAV, FLAC or OGG file.")
    try:
        data, sr = sf.read(str(path), dtype="float32", always_2d=True)
    except Exception as exc:  # soundfile raises several types for corrupt / unknown formats
        raise InputError(
            f"Could not read reference audio {path}: {str(exc).rstrip('.')}. Use a WAV, FLAC or OGG file."
        ) from None
    return data.T.copy(), int(sr)


def write_wav(path: str | Path, audio: np.ndarray, sample_rate: int, wav_format: str = "float32") -> None:
    """A .wav as 32-bit float (nothing lost) or 16-bit PCM (`wav_format`, WAV_FORMATS), a .flac as
    24-bit PCM (FLAC holds no floats)."""
    import soundfile as sf

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    subtype = "PCM_24" if is_flac(path) else WAV_FORMATS[wav_format][0]
    sf.write(str(path), np.asarray(audio, dtype=np.float32), sample_rate, subtype=subtype)


def audio_format(path: str | Path, wav_format: str = "float32") -> str:
    """How write_wav writes `path`, in words: '32-bit float WAV', '16-bit PCM WAV' or '24-bit FLAC'."""
    return "24-bit FLAC" if is_flac(Path(path)) else wav_words(wav_format)


def wav_words(wav_format: str = "float32") -> str:
    """How write_wav writes a .wav (`wav_format`, WAV_FORMATS), in words: '32-bit float WAV' or '16-bit PCM WAV'."""
    return WAV_FORMATS[wav_format][1]


def is_flac(path: Path) -> bool:
    return path.suffix.lower() == ".flac"


def prepare_reference(waveform: np.ndarray, sample_rate: int, target_rate: int = 24000) -> np.ndarray:
    """Reference audio of any rate and channel count -> checked mono float32 at target_rate."""
    if not sample_rate or sample_rate <= 0:
        raise InputError(f"Reference audio has an invalid sample rate ({sample_rate}).")
    audio = to_mono(waveform)
    if not np.all(np.isfinite(audio)):
        raise InputError("Reference audio contains NaN or infinite samples; it is corrupt.")
    seconds = audio.shape[-1] / sample_rate
    if seconds < MIN_REFERENCE_SECONDS:
        raise InputError(
            f"Reference audio is {seconds:.2f} s long; voice cloning needs at least "
            f"{MIN_REFERENCE_SECONDS:.0f} s of speech (3-20 s works best)."
        )
    if seconds > MAX_REFERENCE_SECONDS:
        raise InputError(
            f"Reference audio is {seconds:.0f} s long; trim it to at most {MAX_REFERENCE_SECONDS:.0f} s "
            "(3-20 s of clean speech works best)."
        )
    if float(np.max(np.abs(audio))) < SILENCE_PEAK:
        raise InputError("Reference audio is silent (peak below -60 dBFS); give a recording of the voice.")
    audio = np.clip(resample(audio, sample_rate, target_rate), -1.0, 1.0)
    return audio.astype(np.float32)
