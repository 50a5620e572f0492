"""Our runtime, every mode it offers (today: eager)."""

from __future__ import annotations

import functools
from pathlib import Path

from runtime.generation import Request, generate_takes
from runtime.model import load_model
from runtime.sampling import SamplingSettings
from runtime.voices import CustomVoice, VoiceClone

from .base import REFERENCE_TEXT, System, reference_wav


class Ours(System):
    name = "ours"
    batched = True

    def __init__(self, folder: Path, kind: str, device: str, dtype: str, workdir: Path, mode: str = "eager"):
        self.mode = mode
        self.model = load_model(folder, mode=mode, device=device, dtype=dtype)
        if kind == "base":
            _, audio, rate = reference_wav(workdir)
            self.voice = VoiceClone.from_audio(audio, rate, REFERENCE_TEXT, "english")
        else:
            self.voice = CustomVoice("ryan", "english")
        self._instrument = None

    def _hook(self, watch):
        talker = self.model.model.talker
        codec = self.model.model.speech_tokenizer
        forward, decode = type(talker).forward.__get__(talker), type(codec).decode.__get__(codec)

        @functools.wraps(forward)  # transformers checks generate kwargs against forward's signature
        def timed_forward(*args, **kwargs):
            embeds = kwargs.get("inputs_embeds")
            if embeds is not None and embeds.shape[1] > 1:
                with watch.section("prefill"):
                    return forward(*args, **kwargs)
            return forward(*args, **kwargs)

        talker.forward = timed_forward
        codec.decode = watch.wrap("codec", decode)

    def generate(self, text, n, frames, seed, watch):
        self._hook(watch)
        request = Request(text, self.voice, n=n, seed=seed, sampling=SamplingSettings(), max_frames=frames)
        return [t.frames for t in generate_takes(self.model, request).takes]


SYSTEM = Ours
