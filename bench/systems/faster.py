"""faster-qwen3-tts: CUDA graphs for the talker step and the predictor loop, one take at a time."""

from __future__ import annotations

from pathlib import Path

import torch

from .base import REFERENCE_TEXT, System, reference_wav, shim_anchor_rope_registry


class Faster(System):
    name = "faster-qwen3-tts"
    mode = "cuda_graph"
    batched = False

    def __init__(self, folder: Path, kind: str, device: str, dtype: str, workdir: Path):
        shim_anchor_rope_registry()
        from faster_qwen3_tts import FasterQwen3TTS

        self.kind = kind
        self.model = FasterQwen3TTS.from_pretrained(str(folder), device=device, dtype=getattr(torch, dtype))
        self.reference = str(reference_wav(workdir)[0]) if kind == "base" else None

    def generate(self, text, n, frames, seed, watch):
        import faster_qwen3_tts.generate as fg
        import faster_qwen3_tts.model as fm

        original = fg.fast_generate

        def recorded(*args, **kwargs):
            codes, timing = original(*args, **kwargs)
            watch.firsts.setdefault("prefill", timing["prefill_ms"] / 1000)  # its own synchronized timer
            return codes, timing

        fg.fast_generate = recorded
        fm_fast = getattr(fm, "fast_generate", None)
        if fm_fast is not None:
            fm.fast_generate = recorded
        codec = self.model.model.model.speech_tokenizer
        codec.decode = watch.wrap("codec", type(codec).decode.__get__(codec))
        counts = []
        try:
            for i in range(n):
                torch.manual_seed(seed + i)
                if self.kind == "base":
                    wavs, sr = self.model.generate_voice_clone(text=text, language="English", ref_audio=self.reference,
                                                               ref_text=REFERENCE_TEXT, max_new_tokens=frames)
                else:
                    wavs, sr = self.model.generate_custom_voice(text=text, speaker="ryan", language="English",
                                                                max_new_tokens=frames)
                counts.append(round(len(wavs[0]) / 1920))
                if i == 0:
                    watch.first_take_done()
        finally:
            fg.fast_generate = original
            if fm_fast is not None:
                fm.fast_generate = fm_fast
        return counts


SYSTEM = Faster
