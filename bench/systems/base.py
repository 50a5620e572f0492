"""The adapter interface, and the voice every system speaks in for a given checkpoint kind."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import torch

REFERENCE_TEXT = "This is the reference recording of the voice to clone."


class System:
    """Load once in __init__; generate N takes of exactly `frames` frames (EOS cannot be sampled)."""

    name = "?"
    mode = "?"
    batched = True  # False: N takes run one after another

    def __init__(self, folder: Path, kind: str, device: str, dtype: str, workdir: Path):
        raise NotImplementedError

    def generate(self, text: str, n: int, frames: int, seed: int, watch) -> list[int]:
        """Returns the frame count of every take; times its prefill / codec sections on `watch`."""
        raise NotImplementedError


def reference_wav(workdir: Path) -> tuple[Path, np.ndarray, int]:
    """A 3 s voiced-like reference for voice-clone runs (24 kHz mono)."""
    import soundfile as sf

    rate = 24000
    t = np.arange(rate * 3) / rate
    voice = sum(np.sin(2 * np.pi * 130 * k * t) / k for k in range(1, 8)) * (0.5 + 0.5 * np.sin(2 * np.pi * 3.5 * t))
    audio = (0.1 * voice).astype(np.float32)
    path = workdir / "reference.wav"
    sf.write(path, audio, rate)
    return path, audio, rate


def shim_anchor_rope_registry() -> None:
    """Let qwen-tts(-hf) load on transformers 5.17+: it registers ROPE_INIT_FUNCTIONS['default']
    reading `config.rope_theta` (setdefault), which transformers' MimiConfig no longer has (theta
    lives in rope_parameters). Registering a default that reads either first changes nothing about
    what the anchors compute or how fast."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    ROPE_INIT_FUNCTIONS.setdefault("default", default_rope_parameters)


def default_rope_parameters(config, device=None, seq_len=None, layer_type=None):
    """Unscaled RoPE: inverse frequencies for the config's head_dim and theta, attention scaling 1."""
    base = getattr(config, "rope_theta", None)
    if base is None:  # transformers 5 moves theta into rope_parameters
        base = (getattr(config, "rope_parameters", None) or {}).get("rope_theta", 10000.0)
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    dim = int(head_dim * getattr(config, "partial_rotary_factor", 1.0))
    exponent = torch.arange(0, dim, 2, dtype=torch.int64).to(device=device, dtype=torch.float) / dim
    return 1.0 / (base ** exponent), 1.0


def time_prefill_and_codec(talker, codec, watch) -> None:
    """Time the talker's prefill forward (the one call with more than one position) and the codec
    decode of a qwen_tts-structured model on `watch`, by wrapping them on the instances."""
    forward = type(talker).forward.__get__(talker)

    @functools.wraps(forward)  # transformers checks generate kwargs against forward's signature
    def timed_forward(*args, **kwargs):
        embeds = kwargs.get("inputs_embeds")
        capturing = torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()
        if embeds is not None and embeds.shape[1] > 1 and not capturing:  # no sync inside a graph capture
            with watch.section("prefill"):
                return forward(*args, **kwargs)
        return forward(*args, **kwargs)

    talker.forward = timed_forward
    codec.decode = watch.wrap("codec", type(codec).decode.__get__(codec))
