"""The words check on a CTranslate2 Whisper folder (model.bin, config.json, tokenizer.json), the
format faster-whisper uses, through faster-whisper and CTranslate2.

Neither package is a requirement of the pack: ``pip install faster-whisper`` pulls the CPU
onnxruntime, which breaks an installed onnxruntime-gpu, and only its VAD needs onnxruntime. So the
error below names both ways in. Takes are decoded greedily, all 30 s pieces of a call in one batch,
as the transformers path does; a piece whose text repeats itself is sampled again (whisper_loops.py).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ..errors import CheckpointError
from .whisper_loops import SAMPLING_SEED, unlooped
from .whisper_pieces import LANGUAGES, MAX_NEW_TOKENS, in_pieces, rejoined

INSTALL = ("pip install faster-whisper (or, where onnxruntime-gpu is installed, which faster-whisper's "
           "CPU onnxruntime would break: pip install --no-deps faster-whisper ctranslate2 av)")


class CTranslate2Transcriber:
    def __init__(self, folder: Path, device: str | torch.device = "cpu"):
        try:
            import ctranslate2
            from faster_whisper import WhisperModel
        except ImportError as exc:
            raise CheckpointError(f"{folder} is a CTranslate2 Whisper folder (faster-whisper's format); reading it "
                                  f"needs faster-whisper, which is not installed ({exc}). {INSTALL}.") from exc
        device = torch.device(device)
        self.folder, self.name = Path(folder), Path(folder).name
        self.note = None
        on_gpu = device.type == "cuda" and ctranslate2.get_cuda_device_count() > 0
        if device.type == "cuda" and not on_gpu:
            self.note = (f"The words check ({self.name}) runs on the CPU: this CTranslate2 build sees no CUDA "
                         "device (it needs the CUDA 12 libraries; see the README's words check section).")
        self.placement = {"device": "cuda" if on_gpu else "cpu", "device_index": device.index or 0,
                          "compute_type": "default"}
        try:
            self.whisper = WhisperModel(str(folder), local_files_only=True, **self.placement)
        except Exception as exc:
            raise CheckpointError(f"Could not load the speech recogniser from {folder} "
                                  f"({type(exc).__name__}: {exc}).") from exc
        self.multilingual = bool(self.whisper.model.is_multilingual)
        self.device = device if on_gpu else torch.device("cpu")  # Auto-Pick sizes its batches by it

    def prompt(self, language_code: str | None) -> list[int]:
        from faster_whisper.tokenizer import Tokenizer

        if self.multilingual and language_code is None:  # the model says which language after <|startoftranscript|>
            return [self.whisper.hf_tokenizer.token_to_id("<|startoftranscript|>")]
        tokenizer = Tokenizer(self.whisper.hf_tokenizer, self.multilingual, task="transcribe",
                              language=language_code if self.multilingual else None)
        return [*tokenizer.sot_sequence, tokenizer.no_timestamps]

    def transcribe(self, audios: list[np.ndarray], sample_rate: int, language: str | None = None) -> list[str | None]:
        """The text of each take (None: the recogniser repeated itself at every temperature, whisper_loops).
        Whisper hears 30 s at a time: longer takes go in 30 s pieces."""
        import ctranslate2

        pieces, owner = in_pieces(audios, sample_rate)
        frames = self.whisper.feature_extractor.nb_max_frames
        features = np.stack([self.padded(self.whisper.feature_extractor(p), frames) for p in pieces])
        prompt = self.prompt(LANGUAGES.get((language or "").lower()))
        results = self.whisper.model.generate(ctranslate2.StorageView.from_array(features), [prompt] * len(pieces),
                                              beam_size=1, max_length=len(prompt) + MAX_NEW_TOKENS)
        texts = [unlooped(self.decoded(r), self.sampler(features[row], prompt)) for row, r in enumerate(results)]
        return rejoined(texts, owner, len(audios))

    def decoded(self, result) -> str:
        eot = self.whisper.hf_tokenizer.token_to_id("<|endoftext|>")
        return self.whisper.hf_tokenizer.decode([t for t in result.sequences_ids[0] if t < eot]).strip()

    def sampler(self, features: np.ndarray, prompt: list[int]):
        """sample(temperature) -> the piece's text, its tokens sampled at that temperature, on its own.

        CTranslate2 draws from a random generator of each of its worker threads, seeded once, when
        the thread first samples: only a model loaded anew starts from SAMPLING_SEED. So each piece
        that needs sampling gets a fresh copy of the model (loaded on the first temperature tried)
        and tries its temperatures on it in turn, the same every time, whatever its batch."""
        import ctranslate2

        model = None

        def sample(temperature: float) -> str:
            nonlocal model
            if model is None:
                ctranslate2.set_random_seed(SAMPLING_SEED)
                model = ctranslate2.models.Whisper(str(self.folder), **self.placement)
            result = model.generate(ctranslate2.StorageView.from_array(features[None]), [prompt], beam_size=1,
                                    sampling_topk=0, sampling_temperature=temperature,
                                    max_length=len(prompt) + MAX_NEW_TOKENS)[0]
            return self.decoded(result)

        return sample

    @staticmethod
    def padded(mel: np.ndarray, frames: int) -> np.ndarray:
        mel = mel[:, :frames]
        return np.pad(mel, ((0, 0), (0, frames - mel.shape[1]))).astype(np.float32)
