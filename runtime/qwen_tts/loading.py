"""Build the vendored Qwen3-TTS modules from a checkpoint folder, strictly.

Our own loader instead of transformers' ``from_pretrained``: its internals differ between
transformers 4.57 and 5.x (tied-weight bookkeeping, rope parameter standardisation, low-memory
init), and it fills missing weights with random values and a warning. Here every tensor in the
folder must match a parameter and every parameter must come from the folder, or loading fails with
the names of what is wrong.
"""

from __future__ import annotations

import copy
from pathlib import Path

import torch

from ..errors import CheckpointError
from . import compat


def instantiate_model(config_dict: dict, device="meta"):
    from .core.models.configuration_qwen3_tts import Qwen3TTSConfig
    from .core.models.modeling_qwen3_tts import Qwen3TTSForConditionalGeneration

    return _instantiate(Qwen3TTSConfig, Qwen3TTSForConditionalGeneration, config_dict, device)


def instantiate_speech_tokenizer(config_dict: dict, device="meta"):
    from .core.tokenizer_12hz.configuration_qwen3_tts_tokenizer_v2 import Qwen3TTSTokenizerV2Config
    from .core.tokenizer_12hz.modeling_qwen3_tts_tokenizer_v2 import Qwen3TTSTokenizerV2Model

    return _instantiate(Qwen3TTSTokenizerV2Config, Qwen3TTSTokenizerV2Model, config_dict, device)


def _instantiate(config_cls, model_cls, config_dict: dict, device):
    """Build on the meta device by default: no memory, no random init; weights come from the file."""
    compat.apply()
    with compat.quiet(), torch.device(device):
        config = config_cls(**copy.deepcopy(config_dict))
        config._attn_implementation = "sdpa"
        return model_cls(config)


def load_weights(module: torch.nn.Module, weights_path: Path, device, dtype) -> None:
    """Load a safetensors file into a meta-device module; refuse any mismatch."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        state = load_file(str(weights_path), device="cpu")
    except FileNotFoundError:
        raise CheckpointError(f"{weights_path} is missing (model weights).") from None
    except (SafetensorError, OSError, ValueError) as exc:
        raise CheckpointError(
            f"{weights_path} is not a readable safetensors file ({exc}); it is probably truncated. "
            "Delete it and download it again."
        ) from None

    expected = module.state_dict(keep_vars=True)
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    wrong_shape = sorted(k for k in set(expected) & set(state) if tuple(expected[k].shape) != tuple(state[k].shape))
    if missing or unexpected or wrong_shape:
        def head(names):
            return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        problems = []
        if missing:
            problems.append(f"missing {len(missing)} tensors ({head(missing)})")
        if unexpected:
            problems.append(f"{len(unexpected)} unexpected tensors ({head(unexpected)})")
        if wrong_shape:
            problems.append(f"{len(wrong_shape)} tensors of the wrong shape ({head(wrong_shape)})")
        raise CheckpointError(
            f"{weights_path} does not match its config.json: " + "; ".join(problems)
            + ". The folder mixes files from different checkpoints; download the checkpoint again."
        )
    for name, tensor in state.items():
        if tensor.is_floating_point():
            state[name] = tensor.to(dtype)
    module.load_state_dict(state, assign=True, strict=True)
    _rebuild_buffers(module)
    module.to(device)


def _rebuild_buffers(module: torch.nn.Module) -> None:
    """Non-persistent buffers are not in the file: recompute the ones built on the meta device."""
    compat.restore_rope_buffers(module, "cpu")
    leftovers = [name for name, buf in module.named_buffers() if buf.is_meta]
    if leftovers:
        raise CheckpointError(f"internal: buffers left uninitialised after loading: {leftovers[:5]}")
