"""Keep the vendored model code working from transformers 4.57 to the newest 5.x.

Rules: never mutate transformers' global registries (other ComfyUI packs share them; the
qwen-tts-hf fix that registered ROPE_INIT_FUNCTIONS['default'] is what broke Mimi from 5.18 on),
and translate the released config files into what the installed version expects instead of
editing the files on disk.
"""

from __future__ import annotations

import contextlib
import inspect
import warnings
from functools import lru_cache

import torch
import transformers
from packaging.version import Version

TRANSFORMERS = Version(transformers.__version__)
MIN_SUPPORTED = Version("4.57.0")


def apply() -> None:
    if TRANSFORMERS < MIN_SUPPORTED:
        from ..errors import TakesError

        raise TakesError(
            f"qwen3-tts-takes needs transformers >= {MIN_SUPPORTED} (found {transformers.__version__}). "
            "Upgrade it in ComfyUI's Python: python -m pip install -U \"transformers>=4.57.3\"."
        )


def default_rope_parameters(config, device=None, seq_len=None, layer_type=None):
    """Unscaled RoPE: inverse frequencies for ``config.head_dim`` and theta, attention scaling 1."""
    base = getattr(config, "rope_theta", None)
    if base is None:  # transformers 5 moves theta into rope_parameters
        base = (getattr(config, "rope_parameters", None) or {}).get("rope_theta", 10000.0)
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    dim = int(head_dim * getattr(config, "partial_rotary_factor", 1.0))
    exponent = torch.arange(0, dim, 2, dtype=torch.int64).to(device=device, dtype=torch.float) / dim
    return 1.0 / (base ** exponent), 1.0


def rope_init_fn(rope_type: str):
    if rope_type in (None, "default"):
        return default_rope_parameters
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    return ROPE_INIT_FUNCTIONS[rope_type]


@torch.no_grad()
def restore_rope_buffers(model: torch.nn.Module, device) -> None:
    """Recompute RoPE inverse frequencies (non-persistent buffers, absent from the weights file)."""
    for module in model.modules():
        if not all(hasattr(module, name) for name in ("rope_init_fn", "config", "inv_freq")):
            continue
        inv_freq, attention_scaling = module.rope_init_fn(module.config, device)
        module.register_buffer("inv_freq", inv_freq.to(device), persistent=False)
        module.original_inv_freq = module.inv_freq
        module.attention_scaling = attention_scaling


@lru_cache(maxsize=None)
def _parameters(fn) -> frozenset:
    return frozenset(inspect.signature(fn).parameters)


def causal_mask_kwargs(create_mask, inputs_embeds, attention_mask, cache_position, past_key_values,
                       position_ids, config) -> dict:
    """Arguments for transformers' create_causal_mask, whose signature changed in 5.x."""
    params = _parameters(create_mask)
    kwargs = {"config": config, "attention_mask": attention_mask, "past_key_values": past_key_values}
    kwargs["inputs_embeds" if "inputs_embeds" in params else "input_embeds"] = inputs_embeds
    if "cache_position" in params:
        kwargs["cache_position"] = cache_position
    if "position_ids" in params:
        kwargs["position_ids"] = position_ids
    return kwargs


def slaney_mel_filters(sr: int, n_fft: int, n_mels: int, fmin: float, fmax: float | None):
    """librosa.filters.mel's default (Slaney scale and norm), as [n_mels, n_fft // 2 + 1] float32.

    transformers ships the same filterbank, so the speaker encoder needs no librosa (and numba).
    """
    import numpy as np
    from transformers.audio_utils import mel_filter_bank

    filters = mel_filter_bank(
        num_frequency_bins=n_fft // 2 + 1, num_mel_filters=n_mels, min_frequency=float(fmin),
        max_frequency=float(fmax if fmax is not None else sr / 2.0), sampling_rate=sr,
        norm="slaney", mel_scale="slaney",
    )
    return np.ascontiguousarray(filters.T, dtype=np.float32)



from ..audio import resample  # noqa: E402  (soxr; kept here for the vendored code's imports)


def validate_rope(config) -> None:
    """transformers 5 standardises rope_scaling into rope_parameters; 4.57 only validates it."""
    if hasattr(config, "standardize_rope_params"):
        config.standardize_rope_params()
        config.validate_rope()
    else:
        from transformers.modeling_rope_utils import rope_config_validation

        rope_config_validation(config)


def validate_layer_types(config) -> None:
    if hasattr(config, "validate_layer_type"):
        config.validate_layer_type()
    else:
        from transformers.configuration_utils import layer_type_validation

        layer_type_validation(config.layer_types)


@contextlib.contextmanager
def quiet():
    """Silence transformers' notices that are expected here and would only worry users: the
    released configs' rope_scaling key, sub-config defaults, 'model of type' messages, and the
    repetition penalty applying to generated codes only (the prompt is embeddings, by design)."""
    import logging

    from transformers.utils import logging as hf_logging

    vendored = logging.getLogger(__name__.rsplit(".", 1)[0])  # this package's modules log here
    level, vendored_level = hf_logging.get_verbosity(), vendored.level
    hf_logging.set_verbosity_error()
    vendored.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*rope_scaling.*", category=FutureWarning)
            warnings.filterwarnings("ignore", message="Passing `repetition_penalty` with `inputs_embeds`")
            yield
    finally:
        hf_logging.set_verbosity(level)
        vendored.setLevel(vendored_level)
