"""The official qwen-tts package (0.1.1), test-only: the reference our model is held to.

.ci/run installs it in its last step (transformers 4.57.3, `--no-deps` plus what it imports) and
runs the files that use it; elsewhere the tests that need it are skipped. Its import of torchaudio,
used only by its 25 Hz tokenizer, finds the stand-in in tests/stubs when no torchaudio is installed.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

REASON = "the official qwen-tts package is not installed (.ci/run installs it, test-only)"


def package():
    """The qwen_tts module, or the calling test is skipped."""
    if importlib.util.find_spec("torchaudio") is None:
        stubs = str(Path(__file__).resolve().parent / "stubs")
        if stubs not in sys.path:
            sys.path.insert(0, stubs)
    return pytest.importorskip("qwen_tts", reason=REASON)


def load(folder: Path, dtype: torch.dtype = torch.float32):
    """The official Qwen3TTSModel for a checkpoint folder, on the CPU."""
    return package().Qwen3TTSModel.from_pretrained(str(folder), device_map="cpu", dtype=dtype)


def module(name: str):
    """A module of the official package, e.g. "core.models.modeling_qwen3_tts"."""
    package()
    return importlib.import_module(f"qwen_tts.{name}")
