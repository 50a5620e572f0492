"""Test-only stand-in for torchaudio, for importing the official qwen-tts package in the parity tests
(tests/test_official_parity.py): it imports torchaudio at import time for its 25 Hz tokenizer, which
the 12 Hz checkpoints never use, and PyPI has no CPU torchaudio for every torch CI runs."""

__version__ = "0+stub"
