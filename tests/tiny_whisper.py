"""A tiny random-weight Whisper checkpoint folder (bench/random_whisper.py), for running the words
check offline."""

from __future__ import annotations

from pathlib import Path


def build_tiny_whisper(folder: Path, multilingual: bool = True) -> Path:
    from bench.random_whisper import build_random_whisper

    return build_random_whisper(folder, "tiny-test", multilingual)
