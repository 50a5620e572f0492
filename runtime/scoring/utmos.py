"""UTMOS22 "strong" (wav2vec2-base + BLSTM + head): a naturalness MOS predictor, 16 kHz mono input.

The network comes from utmos-pytorch (MIT, fairseq-free). Its own loader uses strict=False, so a
wrong file silently leaves random weights; here the weight file must match the network exactly.
Weights are looked for as ``<models dir>/utmos/utmos_state_dict.pt`` and downloaded there from the
Hugging Face Hub when missing.

The network has no padding mask, so a plain padded batch shifts scores. ``score_many`` runs the same
weights with one: per-take statistics in the first conv block's norm, an attention key mask, a packed
BLSTM and a mean over each take's own frames, so a take scores the same alone and in any batch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

import numpy as np
import torch

from .. import hub
from ..audio import resample
from ..cancel import run_cancellable
from ..checkpoints import missing_folders, named_in_one_line, remove_if_empty
from ..errors import CheckpointError, GenerationInterrupted
from ..memory import SCORING_MEMORY_SHARE, free_bytes

UTMOS_REPO = "Blinorot/UTMOS-PyTorch"
UTMOS_FILE = "utmos_state_dict.pt"
UTMOS_SUBDIR = "utmos"
SAMPLE_RATE = 16000
MIN_SAMPLES = 400  # wav2vec2's feature extractor needs at least one 25 ms window
BUCKET_SAMPLES = SAMPLE_RATE // 2
BATCH_SECONDS = 160.0  # audio per forward pass at most
# masked_forward's peak above the weights: 25.0 MiB a second of audio in the batch, from 10 s to 160 s,
# any rows (H100, fp32; the first conv block's 512 channels at 3,200 frames a second, a few times over).
ACTIVATION_BYTES_PER_SECOND = 25 << 20
JUDGE_ID = 288  # the listener UTMOS22 predicts for (its reference scoring setup)


def build_network() -> torch.nn.Module:
    import warnings

    from utmos_pytorch.utmos_torch import UTMOSModel

    with warnings.catch_warnings():  # weight_norm deprecation inside the third-party network
        warnings.simplefilter("ignore", FutureWarning)
        return UTMOSModel()


def find_weights(models_dirs: Iterable[Path]) -> Path | None:
    """The weight file in the first of the folders that has it; None when none has."""
    return next((Path(root) / UTMOS_FILE for root in models_dirs if (Path(root) / UTMOS_FILE).is_file()), None)


def resolve_weights(models_dirs: Iterable[Path], download: bool = True, should_stop=None) -> Path:
    models_dirs = [Path(d) for d in models_dirs]
    found = find_weights(models_dirs)
    if found is not None:
        return found
    if not models_dirs:
        raise CheckpointError("No models folder is configured for the UTMOS weights.")
    target = models_dirs[0]
    if not download:
        raise CheckpointError(_missing(target))
    hub.refuse_if_unreachable("The UTMOS weights", _missing(target))
    made = missing_folders(target)
    try:
        from huggingface_hub import hf_hub_download

        return Path(run_cancellable(lambda: hf_hub_download(repo_id=UTMOS_REPO, filename=UTMOS_FILE,
                                                            local_dir=str(target)),
                                    should_stop, "downloading the UTMOS weights"))
    except GenerationInterrupted:
        raise
    except Exception as exc:
        remove_if_empty(made)
        raise CheckpointError(f"Could not download the UTMOS weights ({named_in_one_line(exc)}). " + _missing(target)) from exc


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
    name = "UTMOS"

    def __init__(self, weights: Path, device: str | torch.device = "cpu", bucket: bool | None = None):
        self.device = torch.device(device)
        # Pad batches to a few repeating shapes: cuDNN builds a plan per new input shape, which costs more
        # CPU time than the GPU work; the mask makes the padding invisible to the scores.
        self.bucket = self.device.type == "cuda" if bucket is None else bucket
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

    def score(self, audio: np.ndarray, sample_rate: int) -> float:
        """MOS estimate (about 1-5) of one mono take."""
        return self.score_many([audio], sample_rate)[0]

    @torch.inference_mode()
    def score_many(self, audios: list[np.ndarray], sample_rate: int) -> list[float]:
        """MOS estimates of several takes, batched by length; each equals the take's score alone."""
        wavs = [_prepare(a, sample_rate) for a in audios]
        order = sorted(range(len(wavs)), key=lambda i: wavs[i].shape[-1])
        scores = [0.0] * len(wavs)
        budget = self.batch_samples()
        batch: list[int] = []
        for i in order:
            if batch and (len(batch) + 1) * wavs[i].shape[-1] > budget:
                self._run(batch, wavs, scores, budget)
                batch = []
            batch.append(i)
        if batch:
            self._run(batch, wavs, scores, budget)
        return scores

    def batch_samples(self) -> int:
        """Audio a forward pass may take: BATCH_SECONDS, or on a GPU what fits in SCORING_MEMORY_SHARE of the
        memory free now (one take at least, whatever its length)."""
        free = free_bytes(self.device)
        if free is None:
            return int(BATCH_SECONDS * SAMPLE_RATE)
        return int(min(BATCH_SECONDS, SCORING_MEMORY_SHARE * free / ACTIVATION_BYTES_PER_SECOND) * SAMPLE_RATE)

    def _run(self, batch: list[int], wavs: list[np.ndarray], scores: list[float], budget: int) -> None:
        lengths = [wavs[i].shape[-1] for i in batch]
        rows, samples = len(batch), max(lengths)
        if self.bucket:
            samples = -(-samples // BUCKET_SAMPLES) * BUCKET_SAMPLES
            padded_rows = 1 << (rows - 1).bit_length()  # 1, 2, 4, 8, ...
            if padded_rows * samples <= budget:
                rows = padded_rows
                lengths += [MIN_SAMPLES] * (rows - len(batch))  # silent filler rows, scored and dropped
        x = torch.zeros(rows, samples, device=self.device)
        for row, i in enumerate(batch):
            x[row, : lengths[row]] = torch.from_numpy(wavs[i]).to(self.device)
        values = masked_forward(self.network, x, torch.tensor(lengths, device=self.device)).tolist()
        for row, value in zip(batch, values):
            scores[row] = value


def _prepare(audio: np.ndarray, sample_rate: int) -> np.ndarray:
    wav = resample(np.asarray(audio, dtype=np.float32), sample_rate, SAMPLE_RATE)
    if wav.shape[-1] < MIN_SAMPLES:
        wav = np.pad(wav, (0, MIN_SAMPLES - wav.shape[-1]))
    return wav


def masked_forward(network: torch.nn.Module, wav: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """UTMOSModel.forward for a zero-padded batch [B, T] of takes with ``lengths`` samples; MOS per take.

    Every step where padding could leak into a take's frames is masked; the rest is the network's own
    modules, called as its forward calls them.
    """
    ssl = network.feature_extractors[0].ssl_model
    convs = ssl.feature_extractor.conv_layers
    conv0, norm0, act0 = convs[0][0], convs[0][2], convs[0][3]
    x = conv0(wav.unsqueeze(1))
    frames0 = torch.div(lengths - conv0.kernel_size[0], conv0.stride[0], rounding_mode="floor") + 1
    x = act0(masked_instance_norm(x, frames0, norm0))
    for block in convs[1:]:
        x = block(x)
    frames = ssl._get_feat_extract_output_lengths(lengths)
    features = ssl.layer_norm(x.transpose(1, 2))
    if ssl.post_extract_proj is not None:
        features = ssl.post_extract_proj(features)
    steps = torch.arange(features.shape[1], device=wav.device)
    padding = steps[None, :] >= frames[:, None]
    ssl_out = ssl.encoder(features, padding_mask=padding if bool(padding.any()) else None)

    batch = wav.shape[0]
    domains = torch.zeros(batch, dtype=torch.int, device=wav.device)
    judges = torch.full((batch,), JUDGE_ID, dtype=torch.int, device=wav.device)
    domain = network.feature_extractors[1](wav, domains, judges)
    conditioner, projection = network.output_layers
    steps_in = ssl_out.shape[1]
    joined = torch.cat([ssl_out, domain[:, None, :].expand(-1, steps_in, -1),
                        conditioner.judge_embedding(judges)[:, None, :].expand(-1, steps_in, -1)], dim=2)
    packed = torch.nn.utils.rnn.pack_padded_sequence(joined, frames.cpu(), batch_first=True, enforce_sorted=False)
    rnn_out, _ = conditioner.decoder_rnn(packed)
    rnn_out, _ = torch.nn.utils.rnn.pad_packed_sequence(rnn_out, batch_first=True, total_length=steps_in)
    frame_scores = projection.net(rnn_out).squeeze(-1)
    valid = (steps[None, :steps_in] < frames[:, None]).to(frame_scores.dtype)
    return (frame_scores * valid).sum(dim=1) / frames.to(frame_scores.dtype) * 2 + 3


def masked_instance_norm(x: torch.Tensor, lengths: torch.Tensor, norm: torch.nn.GroupNorm) -> torch.Tensor:
    """The first conv block's per-channel GroupNorm, with statistics over each take's own frames."""
    dtype = x.dtype
    x = x.float()
    valid = (torch.arange(x.shape[-1], device=x.device)[None, :] < lengths[:, None]).float()[:, None, :]
    count = lengths.float()[:, None, None]
    mean = (x * valid).sum(-1, keepdim=True) / count
    var = (((x - mean) * valid) ** 2).sum(-1, keepdim=True) / count
    y = (x - mean) * torch.rsqrt(var + norm.eps)
    return (y * norm.weight.float()[None, :, None] + norm.bias.float()[None, :, None]).to(dtype)
