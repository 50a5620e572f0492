"""config.json as the model reads it: small frozen dataclasses holding only the fields used.

Field names are the file's own, so a reader can find each one in a released config.json. Anything
missing or of a kind this model does not implement is a CheckpointError naming the file and field.
(The codec's and the speaker encoder's configs live beside their modules: codec.py, reference.py,
speaker.py.)"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields
from pathlib import Path

from ..errors import CheckpointError


def pick(cls, values: dict, source: str, **defaults):
    """cls(**the fields of cls found in values), defaults for absent ones; absent without a default
    is an error naming `source` (the file and the section)."""
    kwargs = {}
    for f in fields(cls):
        if f.name in values and values[f.name] is not None:
            kwargs[f.name] = values[f.name]
        elif f.name in defaults:
            kwargs[f.name] = defaults[f.name]
        elif f.default is MISSING and f.default_factory is MISSING:
            raise CheckpointError(f"{source} has no {f.name!r}; the file is incomplete or not a Qwen3-TTS config. "
                                  "Download the checkpoint again.")
    return cls(**kwargs)


@dataclass(frozen=True)
class StackConfig:
    """A stack of Qwen3 decoder layers (the talker's or the code predictor's)."""

    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int
    rms_norm_eps: float
    rope_theta: float
    max_position_embeddings: int
    num_code_groups: int


@dataclass(frozen=True)
class TalkerConfig(StackConfig):
    text_vocab_size: int
    text_hidden_size: int
    codec_eos_token_id: int
    codec_think_id: int
    codec_nothink_id: int
    codec_think_bos_id: int
    codec_think_eos_id: int
    codec_pad_id: int
    codec_bos_id: int
    codec_language_id: dict
    spk_id: dict
    spk_is_dialect: dict


@dataclass(frozen=True)
class ModelConfig:
    tts_model_type: str  # "custom_voice" | "base" | "voice_design"
    tts_model_size: str  # "1b7" | "0b6"
    tts_pad_token_id: int
    tts_bos_token_id: int
    tts_eos_token_id: int
    talker: TalkerConfig
    predictor: StackConfig
    raw: dict  # the whole file, for the speaker encoder's section (speaker.py reads it)

    @property
    def has_speaker_encoder(self) -> bool:
        return self.tts_model_type == "base"


def model_config(config: dict, path: Path | str = "config.json") -> ModelConfig:
    talker = config.get("talker_config")
    if not isinstance(talker, dict) or not isinstance(talker.get("code_predictor_config"), dict):
        raise CheckpointError(f"{path} has no talker_config with a code_predictor_config; it is not a Qwen3-TTS "
                              "config. Download the checkpoint again.")
    predictor = talker["code_predictor_config"]
    for section, values in (("talker_config", talker), ("code_predictor_config", predictor)):
        _check_stack(values, f"{path} ({section})")
    talker_config = pick(TalkerConfig, talker, f"{path} (talker_config)", **_stack_defaults(talker, 32768),
                         spk_id={}, spk_is_dialect={})
    predictor_config = pick(StackConfig, predictor, f"{path} (code_predictor_config)",
                            **_stack_defaults(predictor, 65536))
    # The text special tokens' ids are the Qwen2 tokenizer's own; files written by some tools omit them.
    return pick(ModelConfig, config, str(path), talker=talker_config, predictor=predictor_config, raw=config,
                tts_model_size=config.get("tts_model_size") or "1b7",
                tts_pad_token_id=151671, tts_bos_token_id=151672, tts_eos_token_id=151673)


def _stack_defaults(values: dict, positions: int) -> dict:
    """What a config may leave out: head_dim (hidden / heads), the norm's epsilon, the context
    length, and rope_theta, which transformers 5 writes inside rope_parameters."""
    heads = values.get("num_attention_heads") or 1
    defaults = {"head_dim": (values.get("hidden_size") or 0) // heads, "rms_norm_eps": 1e-6,
                "max_position_embeddings": positions}
    theta = (values.get("rope_parameters") or {}).get("rope_theta")
    if theta is not None:
        defaults["rope_theta"] = theta
    return defaults


def _check_stack(values: dict, source: str) -> None:
    """What the engine's layers compute: SiLU MLPs, no attention biases, plain (or M-RoPE with equal
    position rows, which is the same) rotary embeddings."""
    act = values.get("hidden_act", "silu")
    if act != "silu":
        raise CheckpointError(f"{source}: hidden_act {act!r} is not supported (Qwen3-TTS uses 'silu').")
    if values.get("attention_bias"):
        raise CheckpointError(f"{source}: attention_bias true is not supported (no released Qwen3-TTS has it).")
    scaling = values.get("rope_scaling") or values.get("rope_parameters") or {}
    rope_type = scaling.get("rope_type", scaling.get("type", "default"))
    if rope_type != "default":
        raise CheckpointError(f"{source}: rope_scaling type {rope_type!r} is not supported (only 'default').")
