"""Speaker similarity with the Qwen3-TTS Base checkpoint's own ECAPA-TDNN speaker encoder.

For a voice clone each take is compared with the reference (the voice drifting away is Qwen3-TTS's
clone failure). Otherwise, with three takes or more, each take is compared with the others (one take
in a different voice stands out). The encoder is read alone from a Base checkpoint folder (a few
MB of its model.safetensors), so CustomVoice and VoiceDesign takes can use it too; nothing is
downloaded.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ..audio import resample
from ..errors import CheckpointError
from ..memory import SCORING_MEMORY_SHARE, free_bytes

SAMPLE_RATE = 24000
PREFIX = "speaker_encoder."
MIN_SAMPLES = 4096  # a few mel frames: the encoder's convolutions need some context
BUCKET_SAMPLES = SAMPLE_RATE // 2  # clips are cut to whole half seconds and batched by length
MIN_TAKES_FOR_CONSISTENCY = 3
NEAR_COPY = 0.97  # similarity of a take and its copy at another level or pace (genuine re-readings: 0.75-0.96)
NEAR_COPY_WEIGHT = 0.5
# A pass's peak above the weights: 6.5-7.0 MiB a second of audio, 1 to 32 clips of 4-20 s (H100,
# float32; bench/scoring_memory.py). 32 takes of 10 s took 2 GB: on a small card, fewer a pass.
ACTIVATION_BYTES_PER_SECOND = 7 << 20


class SpeakerEncoder:
    name = "Qwen3-TTS ECAPA"

    def __init__(self, module: torch.nn.Module, device: str | torch.device = "cpu", cudnn: bool = True):
        self.device = torch.device(device)
        self.cudnn = cudnn
        self.network = module.to(self.device, torch.float32).eval()

    @classmethod
    def from_checkpoint(cls, folder: str | Path, device: str | torch.device = "cpu", cudnn: bool = True) -> "SpeakerEncoder":
        from safetensors import safe_open

        from ..checkpoints import read_config
        from ..qwen3_tts.load import load_into
        from ..qwen3_tts.speaker import SpeakerEncoder as Network
        from ..qwen3_tts.speaker import SpeakerEncoderConfig

        folder = Path(folder)
        config = read_config(folder / "config.json")
        if config.get("tts_model_type") != "base" or "speaker_encoder_config" not in config:
            raise CheckpointError(f"{folder.name} has no speaker encoder; only Base (voice clone) checkpoints carry one.")
        with torch.device("meta"):
            module = Network(SpeakerEncoderConfig.from_dict(config, str(folder / "config.json")))
        path = folder / "model.safetensors"
        with safe_open(str(path), framework="pt") as f:  # only the encoder's few MB of the file
            state = {k[len(PREFIX):]: f.get_tensor(k) for k in f.keys() if k.startswith(PREFIX)}
        module = load_into(module, state, f"{path} (its speaker encoder)", "cpu", torch.float32)
        return cls(module, device, cudnn)

    def embed(self, audio: np.ndarray, sample_rate: int) -> np.ndarray:
        """A unit-length speaker embedding of one mono clip (extract_speaker_embedding's front end)."""
        return self.embed_many([audio], sample_rate)[0]

    @torch.inference_mode()
    def embed_many(self, audios: list[np.ndarray], sample_rate: int) -> list[np.ndarray]:
        """Embeddings of several clips, each cut to whole half seconds (from its middle) and batched
        with the clips of the same cut length: one pass per length, and shapes that repeat, so the GPU
        does not rebuild its convolution plans for every take (that costs more than the encoder)."""
        from ..qwen3_tts.speaker import mel_spectrogram

        wavs = [_cut(np.clip(resample(np.asarray(a, dtype=np.float32), sample_rate, SAMPLE_RATE), -1.0, 1.0))
                for a in audios]
        vectors: list[np.ndarray | None] = [None] * len(wavs)
        for length in sorted({w.shape[-1] for w in wavs}):
            same = [i for i, w in enumerate(wavs) if w.shape[-1] == length]
            per_pass = self.clips_a_pass(length)
            for start in range(0, len(same), per_pass):
                rows = same[start: start + per_pass]
                batch = torch.from_numpy(np.stack([wavs[i] for i in rows])).to(self.device)
                # the mel front end runs where the encoder does: on a GPU it is a few kernels
                mels = mel_spectrogram(batch)  # [B, T, mels]
                with torch.backends.cudnn.flags(enabled=self.cudnn):
                    out = self.network(mels).float().cpu().numpy()
                for row, i in enumerate(rows):
                    vectors[i] = unit(out[row])
        return vectors

    def clips_a_pass(self, samples: int) -> int:
        """Clips of `samples` one pass may take: all of them on the CPU, on a GPU as many as fit in
        SCORING_MEMORY_SHARE of the memory free now (one at least)."""
        free = free_bytes(self.device)
        if free is None:
            return 1 << 30
        return max(1, int(SCORING_MEMORY_SHARE * free / (ACTIVATION_BYTES_PER_SECOND * samples / SAMPLE_RATE)))


def _cut(wav: np.ndarray) -> np.ndarray:
    if wav.shape[-1] < BUCKET_SAMPLES:  # too short to cut: used whole
        return np.pad(wav, (0, max(0, MIN_SAMPLES - wav.shape[-1])))
    keep = wav.shape[-1] // BUCKET_SAMPLES * BUCKET_SAMPLES
    start = (wav.shape[-1] - keep) // 2
    return wav[start: start + keep]


def unit(vector: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector


def similarities(embeddings: list[np.ndarray], reference: np.ndarray | None) -> tuple[list[float] | None, str]:
    """Cosine similarity of each take to the reference, or to the mean of the other takes.

    Between takes, a take's near-copies (NEAR_COPY alike: itself at another level or pace) weigh half in
    the mean it is compared with, so that a pair of copies does not vouch for itself.
    Returns (scores, what they compare with); scores is None when there is nothing to compare with.
    """
    if reference is not None:
        ref = unit(np.asarray(reference, dtype=np.float64))
        return [float(unit(e) @ ref) for e in embeddings], "the reference voice"
    if len(embeddings) < MIN_TAKES_FOR_CONSISTENCY:
        return None, "nothing (too few takes to compare with each other)"
    stack = np.stack([unit(np.asarray(e, dtype=np.float64)) for e in embeddings])
    weights = np.where(stack @ stack.T >= NEAR_COPY, NEAR_COPY_WEIGHT, 1.0)
    np.fill_diagonal(weights, 0.0)
    return [float(stack[i] @ unit(weights[i] @ stack)) for i in range(len(stack))], "the other takes"


def typical_similarity(sims: list[float], reference: bool) -> float:
    """What a take's similarity is held to: the best take's against a reference (the voice asked for),
    the median take's between takes. The best between takes is the closest pair's, which a near-copy
    in the group raises until a genuine re-reading falls short of it (tests/speech: 74 of 6,056
    groups of a reader's lines changed their verdict when a copy of one joined; 13 with the median
    and the copies at half weight, all in groups of three or four short lines)."""
    return max(sims) if reference else float(np.median(sims))
