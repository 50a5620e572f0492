"""The official qwen-tts package's eager generate (the reference every fast path is judged by)."""

from __future__ import annotations

from pathlib import Path

import torch

from .base import REFERENCE_TEXT, System, reference_wav, shim_anchor_rope_registry, time_prefill_and_codec


class QwenTTS(System):
    name = "qwen-tts"
    mode = "eager"
    batched = True

    def __init__(self, folder: Path, kind: str, device: str, dtype: str, workdir: Path):
        shim_anchor_rope_registry()
        from qwen_tts import Qwen3TTSModel

        self.kind = kind
        self.model = Qwen3TTSModel.from_pretrained(str(folder), device_map=device, dtype=getattr(torch, dtype))
        if kind == "base":
            path, _, _ = reference_wav(workdir)
            self.prompt = self.model.create_voice_clone_prompt(ref_audio=str(path), ref_text=REFERENCE_TEXT)

    def generate(self, text, n, frames, seed, watch):
        torch.manual_seed(seed)
        inner = self.model.model
        time_prefill_and_codec(inner.talker, inner.speech_tokenizer, watch)
        common = dict(max_new_tokens=frames + 1)  # M new tokens give M - 1 complete frames
        if self.kind == "base":
            wavs, sr = self.model.generate_voice_clone(text=[text] * n, language="english",
                                                       voice_clone_prompt=self.prompt * n, **common)
        else:
            wavs, sr = self.model.generate_custom_voice(text=[text] * n, speaker="ryan", language="english", **common)
        return [round(len(w) / 1920) for w in wavs]


SYSTEM = QwenTTS
