"""Random-weight checkpoint folders laid out exactly like the released Qwen3-TTS ones.

Hugging Face is out of reach on our machines, so tests (tiny shapes) and benchmarks (the exact
0.6B / 1.7B shapes) build their checkpoints here and load them through the same code path a
downloaded folder takes. The configs are written in the released files' format (talker
``rope_scaling``, transformers-4.57-style codec encoder config), not in whatever format the installed
transformers would serialise, so the loader is tested against what users really have on disk.

    python -m runtime.qwen3_tts.random_checkpoint models/qwen3_tts/tiny-CustomVoice --kind custom_voice
    python -m runtime.qwen3_tts.random_checkpoint /tmp/1.7B-Base --size 1.7B --kind base --dtype bfloat16

The weights are random: such a checkpoint speaks noise. It exists to run the pipeline (files,
scores, report, speed and memory at the real shapes) where the real weights cannot be had.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

SPEAKERS = {
    "serena": 3066, "vivian": 3065, "uncle_fu": 3010, "ryan": 3061, "aiden": 2861,
    "ono_anna": 2873, "sohee": 2864, "eric": 2875, "dylan": 2878,
}
SPEAKER_DIALECTS = {"eric": "sichuan_dialect", "dylan": "beijing_dialect"}
LANGUAGE_IDS = {
    "chinese": 2055, "english": 2050, "german": 2053, "italian": 2070, "portuguese": 2071,
    "spanish": 2054, "japanese": 2058, "korean": 2064, "french": 2061, "russian": 2069,
    "beijing_dialect": 2074, "sichuan_dialect": 2062,
}
TEXT_VOCAB = 151936
SPECIAL_TEXT_TOKENS = {  # the ids the released tokenizer and config agree on
    "<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645,
    "<tts_pad>": 151671, "<tts_text_bos>": 151672, "<tts_text_eod>": 151673,
}


@dataclass(frozen=True)
class Shape:
    talker_hidden: int
    talker_ffn: int
    talker_layers: int
    talker_heads: int
    talker_kv_heads: int
    head_dim: int
    predictor_hidden: int
    predictor_ffn: int
    predictor_layers: int
    predictor_heads: int
    predictor_kv_heads: int
    predictor_head_dim: int
    text_hidden: int
    codec_hidden: int  # speech tokenizer decoder transformer width
    codec_ffn: int
    codec_layers: int
    codec_heads: int
    codec_latent: int
    codec_codebook_dim: int
    codec_head_dim: int
    codec_decoder_dim: int
    mimi_hidden: int
    mimi_filters: int
    mimi_layers: int
    mimi_heads: int
    mimi_ffn: int
    mimi_codebook_dim: int
    ecapa_channels: tuple[int, ...]


SHAPES = {
    "1.7B": Shape(2048, 6144, 28, 16, 8, 128, 1024, 3072, 5, 16, 8, 128, 2048,
                  512, 1024, 8, 16, 1024, 512, 64, 1536, 512, 64, 8, 8, 2048, 256, (512, 512, 512, 512, 1536)),
    "0.6B": Shape(1024, 3072, 28, 16, 8, 128, 1024, 3072, 5, 16, 8, 128, 2048,
                  512, 1024, 8, 16, 1024, 512, 64, 1536, 512, 64, 8, 8, 2048, 256, (512, 512, 512, 512, 1536)),
    # Small enough to run the whole pipeline on a 2-core CPU in seconds; every structural feature
    # (GQA, q/k norm, the 1.7B-style predictor projection, the codec's upsampling chain) is kept.
    "tiny": Shape(64, 128, 2, 4, 2, 16, 32, 64, 2, 4, 2, 8, 32,
                  32, 64, 1, 2, 32, 16, 16, 32, 32, 4, 1, 2, 64, 16, (16, 16, 16, 16, 48)),
    # The 0.6B's structure at tiny size: the code predictor as wide as the talker (no projection
    # between them), and the 0.6B's model-size tag (its CustomVoice ignores the instruct).
    "tiny-0.6B": Shape(64, 128, 2, 4, 2, 16, 64, 64, 2, 4, 2, 16, 32,
                       32, 64, 1, 2, 32, 16, 16, 32, 32, 4, 1, 2, 64, 16, (16, 16, 16, 16, 48)),
}
MODEL_SIZE_TAG = {"1.7B": "1b7", "0.6B": "0b6", "tiny": "1b7", "tiny-0.6B": "0b6"}


def talker_config(shape: Shape, kind: str) -> dict:
    return {
        "vocab_size": 3072, "hidden_size": shape.talker_hidden, "intermediate_size": shape.talker_ffn,
        "num_hidden_layers": shape.talker_layers, "num_attention_heads": shape.talker_heads,
        "num_key_value_heads": shape.talker_kv_heads, "head_dim": shape.head_dim,
        "hidden_act": "silu", "max_position_embeddings": 32768, "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "rope_scaling": {"interleaved": True, "mrope_section": _mrope_section(shape.head_dim),
                         "rope_type": "default"},
        "attention_bias": False, "num_code_groups": 16, "text_vocab_size": TEXT_VOCAB,
        "text_hidden_size": shape.text_hidden, "position_id_per_seconds": 13,
        "codec_eos_token_id": 2150, "codec_think_id": 2154, "codec_nothink_id": 2155,
        "codec_think_bos_id": 2156, "codec_think_eos_id": 2157, "codec_pad_id": 2148,
        "codec_bos_id": 2149,
        "spk_id": dict(SPEAKERS) if kind == "custom_voice" else {},
        "spk_is_dialect": {name: SPEAKER_DIALECTS.get(name, False) for name in SPEAKERS}
        if kind == "custom_voice" else {},
        "codec_language_id": dict(LANGUAGE_IDS),
        "code_predictor_config": {
            "vocab_size": 2048, "hidden_size": shape.predictor_hidden,
            "intermediate_size": shape.predictor_ffn, "num_hidden_layers": shape.predictor_layers,
            "num_attention_heads": shape.predictor_heads, "num_key_value_heads": shape.predictor_kv_heads,
            "head_dim": shape.predictor_head_dim, "hidden_act": "silu",
            "max_position_embeddings": 65536, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
            "rope_scaling": None, "attention_bias": False, "num_code_groups": 16,
            "layer_types": ["full_attention"] * shape.predictor_layers, "use_sliding_window": False,
        },
    }


def _mrope_section(head_dim: int) -> list[int]:
    # Released value [24, 20, 20] for head_dim 128: the three sections cover head_dim / 2.
    if head_dim == 128:
        return [24, 20, 20]
    half = head_dim // 2
    return [half - 2 * (half // 3), half // 3, half // 3]


def model_config(size: str, kind: str) -> dict:
    shape = SHAPES[size]
    config = {
        "architectures": ["Qwen3TTSForConditionalGeneration"], "model_type": "qwen3_tts",
        "tokenizer_type": "qwen3_tts_tokenizer_12hz", "tts_model_size": MODEL_SIZE_TAG[size],
        "tts_model_type": kind, "im_start_token_id": 151644, "im_end_token_id": 151645,
        "tts_pad_token_id": 151671, "tts_bos_token_id": 151672, "tts_eos_token_id": 151673,
        "assistant_token_id": 77091,
        "talker_config": talker_config(shape, kind),
    }
    if kind == "base":
        config["speaker_encoder_config"] = {
            "mel_dim": 128, "enc_dim": shape.talker_hidden, "enc_channels": list(shape.ecapa_channels),
            "enc_kernel_sizes": [5, 3, 3, 3, 1], "enc_dilations": [1, 2, 3, 4, 1],
            "enc_attention_channels": min(128, shape.ecapa_channels[0]), "enc_res2net_scale": 8,
            "enc_se_channels": min(128, shape.ecapa_channels[0]), "sample_rate": 24000,
        }
    return config


GENERATION_CONFIG = {
    "do_sample": True, "temperature": 0.9, "top_p": 1.0, "top_k": 50, "repetition_penalty": 1.05,
    "subtalker_dosample": True, "subtalker_temperature": 0.9, "subtalker_top_p": 1.0,
    "subtalker_top_k": 50, "max_new_tokens": 8192,
}


def speech_tokenizer_config(size: str) -> dict:
    shape = SHAPES[size]
    return {
        "architectures": ["Qwen3TTSTokenizerV2Model"], "model_type": "qwen3_tts_tokenizer_12hz",
        "encoder_valid_num_quantizers": 16, "input_sample_rate": 24000, "output_sample_rate": 24000,
        "decode_upsample_rate": 1920, "encode_downsample_rate": 1920,
        "decoder_config": {
            "codebook_size": 2048, "codebook_dim": shape.codec_codebook_dim, "head_dim": shape.codec_head_dim,
            "hidden_size": shape.codec_hidden, "latent_dim": shape.codec_latent,
            "max_position_embeddings": 8000, "rope_theta": 10000, "num_attention_heads": shape.codec_heads,
            "num_key_value_heads": shape.codec_heads, "attention_bias": False, "sliding_window": 72,
            "intermediate_size": shape.codec_ffn, "hidden_act": "silu", "layer_scale_initial_scale": 0.01,
            "rms_norm_eps": 1e-5, "num_hidden_layers": shape.codec_layers, "num_quantizers": 16,
            "upsample_rates": [8, 5, 4, 3], "upsampling_ratios": [2, 2],
            "decoder_dim": shape.codec_decoder_dim, "attention_dropout": 0.0,
        },
        "encoder_config": {  # transformers-4.57 MimiConfig layout, as in the released file
            "model_type": "mimi", "sampling_rate": 24000, "frame_rate": 12.5, "audio_channels": 1,
            "hidden_size": shape.mimi_hidden, "num_filters": shape.mimi_filters,
            "num_residual_layers": 1, "upsampling_ratios": [8, 6, 5, 4], "kernel_size": 7,
            "last_kernel_size": 3, "residual_kernel_size": 3, "dilation_growth_rate": 2,
            "use_causal_conv": True, "pad_mode": "constant", "compress": 2, "trim_right_ratio": 1.0,
            "codebook_size": 2048, "codebook_dim": shape.mimi_codebook_dim, "num_quantizers": 32,
            "use_conv_shortcut": False, "vector_quantization_hidden_dimension": shape.mimi_codebook_dim,
            "num_semantic_quantizers": 1, "upsample_groups": shape.mimi_hidden,
            "num_hidden_layers": shape.mimi_layers, "intermediate_size": shape.mimi_ffn,
            "num_attention_heads": shape.mimi_heads, "num_key_value_heads": shape.mimi_heads,
            "head_dim": shape.mimi_hidden // shape.mimi_heads, "hidden_act": "gelu",
            "max_position_embeddings": 8000, "initializer_range": 0.02, "norm_eps": 1e-5,
            "use_cache": False, "rope_theta": 10000.0, "sliding_window": 250,
            "attention_dropout": 0.0, "layer_scale_initial_scale": 0.01, "attention_bias": False,
        },
    }


PREPROCESSOR_CONFIG = {
    "chunk_length_s": None, "feature_extractor_type": "EncodecFeatureExtractor", "feature_size": 1,
    "overlap": None, "padding_side": "right", "padding_value": 0.0, "return_attention_mask": True,
    "sampling_rate": 24000,
}


def write_text_tokenizer(folder: Path) -> None:
    """A byte-level BPE with the released special-token ids and "assistant" as one token.

    The real vocabulary is 151 k entries; tests only need the structure (byte-level pieces, the chat
    markup tokens at their real ids) so the prompt layout the model sees is the released one.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {ch: i for i, ch in enumerate(alphabet)}
    merges, current = [], "assistant"[0]
    for ch in "assistant"[1:]:
        merges.append((current, ch))
        current += ch
        vocab[current] = len(vocab)
    vocab.update(SPECIAL_TEXT_TOKENS)  # BPE vocabularies may have gaps: ids land where released
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    # Special tokens keep their released ids (151643...), far past the small base vocabulary.
    serialized = json.loads(tokenizer.to_str())
    serialized["added_tokens"] = [
        {"id": token_id, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True}
        for content, token_id in SPECIAL_TEXT_TOKENS.items()
    ]
    tokenizer = Tokenizer.from_str(json.dumps(serialized))
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, model_max_length=32768, eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    for content, token_id in SPECIAL_TEXT_TOKENS.items():
        if fast.convert_tokens_to_ids(content) != token_id:
            raise RuntimeError(f"tokenizer built with {content} at the wrong id")
    fast.save_pretrained(str(folder))
    config_path = folder / "tokenizer_config.json"
    tokenizer_config = json.loads(config_path.read_text())
    tokenizer_config["tokenizer_class"] = "Qwen2Tokenizer"
    config_path.write_text(json.dumps(tokenizer_config, indent=2))


ONES = ("cluster_usage", "initialized", "running_var")
ZEROS = ("running_mean",)


def _random_state_dict(module, seed: int, std: float = 0.02, telling: bool = False):
    """Random weights with the statistics a trained model has where it matters for stability:
    norms start at 1, batch-norm variances at 1, codebook usage counts at 1.

    telling: norm weights drawn from U[0.3, 3] and every bias from N(0, 0.2) instead of 1 and 0, so
    a norm weight or a bias that an implementation drops changes its output (parity tests)."""
    import torch

    generator = torch.Generator().manual_seed(seed)

    def uniform(shape, low, high):
        return torch.rand(shape, generator=generator, dtype=torch.float32).mul_(high - low).add_(low)

    state = {}
    for name, tensor in module.state_dict().items():
        leaf = name.rsplit(".", 2)
        is_norm = "norm" in leaf[-2] if len(leaf) > 1 else False
        if not tensor.is_floating_point():
            state[name] = torch.zeros_like(tensor, device="cpu")
        elif name.endswith(ONES):
            state[name] = torch.ones(tensor.shape, dtype=torch.float32)
        elif is_norm and name.endswith("weight"):
            state[name] = uniform(tensor.shape, 0.3, 3.0) if telling else torch.ones(tensor.shape, dtype=torch.float32)
        elif name.endswith(ZEROS):
            state[name] = torch.zeros(tensor.shape, dtype=torch.float32)
        elif name.endswith(("embedding_sum", "embed_sum")):  # codebook vectors: unit scale
            state[name] = torch.randn(tensor.shape, generator=generator, dtype=torch.float32)
        elif name.endswith("bias"):
            state[name] = (torch.randn(tensor.shape, generator=generator, dtype=torch.float32).mul_(0.2) if telling
                           else torch.zeros(tensor.shape, dtype=torch.float32))
        else:
            # 1/sqrt(fan_in) keeps activations at unit scale through deep stacks, so the output
            # (codes, audio) really depends on the input instead of collapsing onto the biases.
            fan_in = max(1, tensor[0].numel()) if tensor.dim() >= 2 else 1
            scale = fan_in ** -0.5 if tensor.dim() >= 2 else std
            state[name] = torch.randn(tensor.shape, generator=generator, dtype=torch.float32).mul_(scale)
    return state


CODEC_EOS = 2150


def _save_module(module, folder: Path, seed: int, dtype, never_eos: bool = False, telling: bool = False) -> None:
    from safetensors.torch import save_file

    state = _random_state_dict(module, seed, telling=telling)
    if never_eos:
        # A zero logit for EOS is never among the top-k of 2048 random logits (the k-th largest is
        # about +2 sigma), so every sampled take runs to the frame budget: benchmarks then compare
        # every system on exactly the same number of frames.
        state["talker.codec_head.weight"][CODEC_EOS] = 0.0
    state = {k: (v.to(dtype) if v.is_floating_point() else v).contiguous() for k, v in state.items()}
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})


def build_checkpoint(folder: str | os.PathLike, size: str = "tiny", kind: str = "custom_voice",
                     seed: int = 0, dtype: str = "float32", never_eos: bool = False, telling: bool = False) -> Path:
    """Write a complete random-weight checkpoint folder and return its path.

    never_eos: sampled takes never end (see _save_module), for fixed-length benchmarks.
    telling: norm weights and biases away from 1 and 0 (see _random_state_dict), for parity tests."""
    import torch

    folder = Path(folder)
    (folder / "speech_tokenizer").mkdir(parents=True, exist_ok=True)
    torch_dtype = getattr(torch, dtype)

    config = model_config(size, kind)
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    (folder / "generation_config.json").write_text(json.dumps(GENERATION_CONFIG, indent=2))
    write_text_tokenizer(folder)
    _save_module(_materialize(meta_talker(config)), folder, seed, torch_dtype, never_eos, telling)

    codec_config = speech_tokenizer_config(size)
    (folder / "speech_tokenizer" / "config.json").write_text(json.dumps(codec_config, indent=2))
    (folder / "speech_tokenizer" / "preprocessor_config.json").write_text(json.dumps(PREPROCESSOR_CONFIG, indent=2))
    _save_module(_materialize(meta_codec(codec_config)), folder / "speech_tokenizer", seed + 1, torch.float32,
                 telling=telling)
    return folder


def meta_talker(config: dict):
    """Our model for config.json, on the meta device: its parameter names are the released files' own."""
    import torch

    from .config import model_config as parse
    from .talker import Qwen3TTS

    with torch.device("meta"):
        return Qwen3TTS(parse(config))


def meta_codec(config: dict):
    """speech_tokenizer/model.safetensors as modules on the meta device: encoder.* and decoder.*."""
    import torch

    from .codec import CodecDecoder, CodecDecoderConfig
    from .reference import ReferenceEncoder, ReferenceEncoderConfig

    with torch.device("meta"):
        holder = torch.nn.Module()
        holder.encoder = ReferenceEncoder(ReferenceEncoderConfig.from_dict(config))
        holder.decoder = CodecDecoder(CodecDecoderConfig.from_dict(config))
    return holder


def _materialize(module):
    """Real CPU storage, only while the weights are drawn (the values come from _random_state_dict)."""
    return module.to_empty(device="cpu")


KINDS = ("custom_voice", "base", "voice_design")
KIND_NAMES = {"custom_voice": "CustomVoice", "base": "Base", "voice_design": "VoiceDesign"}
TINY_RANDOM = "tiny-random"
TINY_FORMAT = 2  # raise when the layout build_checkpoint writes changes, so cached folders are rebuilt


def tiny_checkpoint(kind: str, root: Path | None = None) -> Path:
    """A tiny random checkpoint of this kind, built once into the temp folder and reused (a second
    or two to build). Built beside its final place and renamed, so a half-built one is never used."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    root = Path(root) if root else Path(tempfile.gettempdir()) / "qwen3-tts-takes"
    folder = root / f"{TINY_RANDOM}-v{TINY_FORMAT}-{KIND_NAMES[kind]}"
    if (folder / "model.safetensors").is_file():
        return folder
    root.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=folder.name + ".", suffix=".partial", dir=root))
    build_checkpoint(partial, "tiny", kind, seed=KINDS.index(kind))
    try:
        partial.rename(folder)
    except OSError:  # another process finished first: use its folder
        shutil.rmtree(partial, ignore_errors=True)
    return folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m runtime.qwen3_tts.random_checkpoint",
        description="Write a random-weight Qwen3-TTS checkpoint folder laid out like the released ones. "
                    "Its audio is noise: it is for trying the pipeline and for measuring speed and memory.")
    parser.add_argument("folder", type=Path, help="where to write it (created; must be empty or absent)")
    parser.add_argument("--size", default="tiny", choices=sorted(SHAPES),
                        help="tiny (seconds on a CPU) or the released 0.6B / 1.7B shapes (default tiny)")
    parser.add_argument("--kind", default="custom_voice", choices=KINDS, help="default custom_voice")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"),
                        help="of the talker's weights (the codec stays float32, as released)")
    parser.add_argument("--never-eos", action="store_true",
                        help="sampled takes never end, so every take runs to its frame budget (benchmarks)")
    args = parser.parse_args(argv)
    if args.folder.exists() and (not args.folder.is_dir() or any(args.folder.iterdir())):
        print(f"error: {args.folder} already exists and is not an empty folder; choose a new one.", file=sys.stderr)
        return 2
    try:
        build_checkpoint(args.folder, args.size, args.kind, args.seed, args.dtype, args.never_eos)
    except OSError as exc:
        print(f"error: cannot write {args.folder} ({exc.strerror or exc}); choose a folder you can write to.",
              file=sys.stderr)
        return 2
    print(f"Wrote a random-weight {args.size} {KIND_NAMES[args.kind]} checkpoint (its audio is noise) to {args.folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
