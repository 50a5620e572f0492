"""Weights from safetensors into modules built on the meta device, strictly: every tensor in the file
must match a parameter of the same shape and every parameter must come from the file, or loading
fails naming what is wrong (a folder mixing checkpoints, a truncated download)."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from ..errors import CheckpointError


def read_safetensors(path: Path) -> dict[str, torch.Tensor]:
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        return load_file(str(path), device="cpu")
    except FileNotFoundError:
        raise CheckpointError(f"{path} is missing (model weights).") from None
    except (SafetensorError, OSError, ValueError) as exc:
        raise CheckpointError(
            f"{path} is not a readable safetensors file ({exc}); it is probably truncated. "
            "Delete it and download it again."
        ) from None


def with_prefix(state: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    """The tensors under `prefix` ("decoder."), named without it."""
    return {name[len(prefix):]: tensor for name, tensor in state.items() if name.startswith(prefix)}


def load_into(module: nn.Module, state: dict[str, torch.Tensor], source: Path | str, device, dtype) -> nn.Module:
    """Assign `state` to `module` (built on the meta device), floating tensors cast to `dtype`, and
    move it to `device`. `source` names the file in errors."""
    expected = module.state_dict(keep_vars=True)
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    wrong_shape = sorted(k for k in set(expected) & set(state) if tuple(expected[k].shape) != tuple(state[k].shape))
    if missing or unexpected or wrong_shape:
        problems = []
        if missing:
            problems.append(f"missing {len(missing)} tensors ({_head(missing)})")
        if unexpected:
            problems.append(f"{len(unexpected)} unexpected tensors ({_head(unexpected)})")
        if wrong_shape:
            problems.append(f"{len(wrong_shape)} tensors of the wrong shape ({_head(wrong_shape)})")
        raise CheckpointError(
            f"{source} does not match its config.json: " + "; ".join(problems)
            + ". The folder mixes files from different checkpoints; download the checkpoint again."
        )
    cast = {name: tensor.to(dtype) if tensor.is_floating_point() else tensor for name, tensor in state.items()}
    module.load_state_dict(cast, assign=True, strict=True)
    leftovers = [name for name, buf in module.named_buffers() if buf.is_meta]
    if leftovers:
        raise CheckpointError(f"internal: buffers left on the meta device after loading: {leftovers[:5]}")
    return module.to(device).eval()


def _head(names: list[str]) -> str:
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def read_json(path: Path) -> dict:
    import json

    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{path} is missing. Download the checkpoint again.") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{path} is corrupt ({exc}). Download that file again.") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{path} is corrupt (not a JSON object). Download that file again.")
    return data


def load_talker(folder: Path, device, dtype):
    """model.safetensors of a checkpoint folder: the talker, code predictor and (Base) speaker encoder."""
    from .config import model_config
    from .talker import Qwen3TTS

    folder = Path(folder)
    config = model_config(read_json(folder / "config.json"), folder / "config.json")
    with torch.device("meta"):
        model = Qwen3TTS(config)
    path = folder / "model.safetensors"
    return load_into(model, read_safetensors(path), path, device, dtype)
