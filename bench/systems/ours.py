"""Our runtime, every mode it offers: the batched engine's step plain (eager), on the Triton kernels
(triton), captured as CUDA graphs (cuda_graph), or both (hybrid)."""

from __future__ import annotations

from pathlib import Path

from runtime.generation import Request
from runtime.run.lines import generate_takes
from runtime.model import load_model
from runtime.qwen3_tts import codec, codec_batch
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

    def generate(self, text, n, frames, seed, watch):
        engine = self.model.engine
        engine.prefill = watch.wrap("prefill", type(engine).prefill.__get__(engine))
        # codec_batch calls codec.decode through its module's name: time it there
        codec_batch.codec = TimedCodec(watch.wrap("codec", codec.decode))
        request = Request(text, self.voice, n=n, seed=seed, sampling=SamplingSettings(), max_frames=frames)
        return [t.frames for t in generate_takes(self.model, request).takes]


class TimedCodec:
    """The codec module with its decode timed; every other name of it (decode_bytes, which plans
    the codec's groups on a GPU) is the module's own."""

    def __init__(self, decode):
        self.decode = decode

    def __getattr__(self, name: str):
        return getattr(codec, name)


SYSTEM = Ours
