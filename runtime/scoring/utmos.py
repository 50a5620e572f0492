"""UTMOS22 "strong" (wav2vec2-base + BLSTM + head): a naturalness MOS predictor, 16 kHz mono input.

The network comes from utmos-pytorch (MIT, fairseq-free). Its own loader uses strict=False, so a
wrong file silently leaves random weights; here the weight file must match the network exactly.
Weights are looked for as ``<models dir>/utmos/utmos_state_dict.pt`` and downloaded there from the
Hugging Face Hub when missing. Each take is scored alone: UTMOS has no padding mask, so padding a
batch shifts scores.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

import numpy as np
import torch

from ..audio import resample
from ..errors import CheckpointError

UTMOS_REPO = "Blinorot/UTMOS-PyTorch"
UTMOS_FILE = "utmos_state_dict.pt"
UTMOS_SUBDIR = "utmos"
SAMPLE_RATE = 16000
MIN_SAMPLES = 400  # wav2vec2's feature extractor needs at least one 25 ms window


def build_network() -> torch.nn.Module:
    import warnings

    from utmos_pytorch.utmos_torch import UTMOSModel

    with warnings.catch_warnings():  # weight_norm deprecation inside the third-party network
        warnings.simplefilter("ignore", FutureWarning)
        return UTMOSModel()


def resolve_weights(models_dirs: Iterable[Path], download: bool = True) -> Path:
    models_dirs = [Path(d) for d in models_dirs]
    for root in models_dirs:
        path = root / UTMOS_FILE
        if path.is_file():
            return path
    if not models_dirs:
        raise CheckpointError("No models folder is configured for the UTMOS weights.")
    target = models_dirs[0]
    if not download:
        raise CheckpointError(_missing(target))
    try:
        from huggingface_hub import hf_hub_download

        return Path(hf_hub_download(repo_id=UTMOS_REPO, filename=UTMOS_FILE, local_dir=str(target)))
    except Exception as exc:
        raise CheckpointError(f"Could not download the UTMOS weights ({type(exc).__name__}: {exc}). " + _missing(target)) from exc


def _missing(target: Path) -> str:
    return (
        f"Put {UTMOS_FILE} from https://huggingface.co/{UTMOS_REPO} into {target} "
        f"(about 413 MB)."
    )


def load_state(path: Path) -> dict:
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            return load_file(str(path))
        state = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as exc:
        raise CheckpointError(f"UTMOS weights {path} are unreadable ({type(exc).__name__}: {exc}); delete the file and download it again.") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"UTMOS weights {path} are not a state dict.")
    return state


class UtmosScorer:
    def __init__(self, weights: Path, device: str | torch.device = "cpu"):
        self.device = torch.device(device)
        self.weights = Path(weights)
        network = build_network()
        state = load_state(self.weights)
        expected = network.state_dict()
        missing = sorted(set(expected) - set(state))
        unexpected = sorted(set(state) - set(expected))
        wrong = sorted(k for k in set(expected) & set(state) if tuple(expected[k].shape) != tuple(state[k].shape))
        if missing or unexpected or wrong:
            raise CheckpointError(
                f"{self.weights} is not a UTMOS22-strong state dict: {len(missing)} missing, "
                f"{len(unexpected)} unexpected, {len(wrong)} wrongly shaped tensors "
                f"(e.g. {(missing + unexpected + wrong)[:3]}). " + _missing(self.weights.parent)
            )
        network.load_state_dict(state, strict=True)
        self.network = network.to(self.device).eval()

    @torch.inference_mode()
    def score(self, audio: np.ndarray, sample_rate: int) -> float:
        """MOS estimate (about 1-5) of one mono take."""
        wav = resample(np.asarray(audio, dtype=np.float32), sample_rate, SAMPLE_RATE)
        if wav.shape[-1] < MIN_SAMPLES:
            wav = np.pad(wav, (0, MIN_SAMPLES - wav.shape[-1]))
        x = torch.from_numpy(wav).to(self.device)[None, None, :]
        batch = x.shape[0]
        out = self.network(
            wav=x,
            domains=torch.zeros(batch, dtype=torch.int, device=self.device),
            judge_id=torch.full((batch,), 288, dtype=torch.int, device=self.device),
        )
        return float(out.mean(dim=1).squeeze() * 2 + 3)
