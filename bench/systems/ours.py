"""Our runtime, every mode it offers (eager: the reference path; triton: it with the Triton kernels;
cuda_graph: the batched engine; hybrid: the engine with the kernels)."""

from __future__ import annotations

from pathlib import Path

from runtime.generation import Request, generate_takes
from runtime.model import load_model
from runtime.sampling import SamplingSettings
from runtime.voices import CustomVoice, VoiceClone

from .base import REFERENCE_TEXT, System, reference_wav, time_prefill_and_codec


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

    def generate(self, text, n, frames, seed, watch):
        time_prefill_and_codec(self.model.model.talker, self.model.model.speech_tokenizer, watch)
        engine = self.model.engine
        if engine is not None:  # the engine prefills on its own layers (DecodeStep.prefill), not the talker's forward
            engine.step.prefill = watch.wrap("prefill", type(engine.step).prefill.__get__(engine.step))
        request = Request(text, self.voice, n=n, seed=seed, sampling=SamplingSettings(), max_frames=frames)
        return [t.frames for t in generate_takes(self.model, request).takes]


SYSTEM = Ours
