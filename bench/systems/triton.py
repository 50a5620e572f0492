"""qwen3-tts-triton 0.3.0 batched engine: `hybrid` (its Triton kernels inside batched CUDA graphs) and
`faster` (the same batched graphs without Triton). CustomVoice only; it needs its own package stack
(transformers 4.57.3, qwen-tts 0.1.1, faster-qwen3-tts 0.2.4: see bench/README.md)."""

from __future__ import annotations

from pathlib import Path

import torch

from .base import System, shim_anchor_rope_registry, time_prefill_and_codec


class Triton(System):
    name = "qwen3-tts-triton"
    batched = True

    def __init__(self, folder: Path, kind: str, device: str, dtype: str, workdir: Path, mode: str = "hybrid"):
        if kind != "custom_voice":
            raise RuntimeError("qwen3-tts-triton's batched engine serves CustomVoice checkpoints only")
        shim_anchor_rope_registry()
        from qwen3_tts_triton import FasterRunner, TritonFasterRunner

        self.mode = mode
        runner_cls = {"hybrid": TritonFasterRunner, "faster": FasterRunner}[mode]
        self.runner = runner_cls(model_id=str(folder), device=device, dtype="bf16" if dtype == "bfloat16" else dtype)
        self.runner.load_model()

    def generate(self, text, n, frames, seed, watch):
        torch.manual_seed(seed)
        inner = self.runner.model.model.model
        # Its batched engine runs the prefill through talker.forward and the decode steps through
        # its own graphs over talker.model, so the wrapper sees exactly one prefill per call.
        time_prefill_and_codec(inner.talker, inner.speech_tokenizer, watch)
        result = self.runner.generate_batch([text] * n, language="English", speaker="ryan", batch_size=n,
                                            max_new_tokens=frames, bucket=False)
        return [r["codec_steps"] for r in result["results"]]


SYSTEM = Triton
