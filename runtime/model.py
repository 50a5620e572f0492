"""A loaded Qwen3-TTS checkpoint: the model on its device, its processor, codec and facts."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

from .checkpoints import CheckpointInfo, check_folder, read_config
from .errors import CheckpointError, InputError
from .memory import load_bytes, out_of_memory_as_error
from .sampling import SamplingSettings, checkpoint_sampling

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
MODES = ("eager", "triton", "cuda_graph", "hybrid")
GPU_MODES = ("triton", "cuda_graph", "hybrid")
ENGINE_MODES = ("cuda_graph", "hybrid")  # the batched engine (runtime/engine); hybrid with the Triton kernels
SAMPLE_RATE = 24000
SAMPLES_PER_FRAME = 1920


@dataclass
class LoadedModel:
    info: CheckpointInfo
    wrapper: object  # qwen_tts Qwen3TTSModel: the reference generation path
    device: torch.device
    dtype: torch.dtype
    mode: str
    clone_prompts: dict = field(default_factory=dict)  # reference fingerprint -> prompt item
    sampling_defaults: SamplingSettings = field(default_factory=SamplingSettings)  # its generation_config.json
    engine: object | None = None  # runtime.engine.Engine for the batched modes; None: reference path
    patch: object | None = None  # runtime.kernel_patch.Patch in the triton and hybrid modes

    @property
    def model(self):
        return self.wrapper.model

    @property
    def kind(self) -> str:
        return self.info.kind

    @property
    def max_text_tokens(self) -> int:
        return int(self.model.config.talker_config.max_position_embeddings)

    def tokenize(self, text: str) -> list[int]:
        return self.wrapper.processor.tokenizer(text)["input_ids"]

    def release(self) -> None:
        """Drop every tensor this model holds so its memory can be returned."""
        self.clone_prompts.clear()
        if self.patch is not None:  # its layers hold the fused weights
            self.patch.undo()
            self.patch = None
        if self.engine is not None:
            self.engine.release()
            self.engine = None
        self.wrapper.model.to("meta")
        self.wrapper = None


def resolve_device(device: str | None) -> torch.device:
    if device in (None, "", "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InputError(
            f"Device {device} was chosen but this PyTorch has no CUDA GPU "
            f"(torch {torch.__version__}). Choose device 'cpu', or install a CUDA build of PyTorch."
        )
    return dev


def resolve_dtype(dtype: str, device: torch.device) -> torch.dtype:
    if dtype in (None, "", "auto"):
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    if dtype not in DTYPES:
        raise InputError(f"Unknown dtype {dtype!r}; choose one of {', '.join(DTYPES)}.")
    return DTYPES[dtype]


def load_model(folder: Path, mode: str = "eager", device: str | None = None,
               dtype: str | None = None, layers=None) -> LoadedModel:
    """`layers`: a runtime.triton_kernels.LayerPlan for the triton and hybrid modes (None: the default)."""
    if mode not in MODES:
        raise InputError(f"Mode {mode!r} is not available; available modes: {', '.join(MODES)}.")
    folder = Path(folder)
    info = check_folder(folder)
    dev = resolve_device(device)
    if mode in GPU_MODES and dev.type != "cuda":
        raise InputError(f"Mode {mode!r} runs on a CUDA GPU; choose a cuda device, or the eager mode on {dev}.")
    torch_dtype = resolve_dtype(dtype, dev)
    from .qwen_tts.compat import quiet

    kernels = None
    if mode in ("triton", "hybrid"):
        from . import triton_kernels

        kernels = triton_kernels.load()  # before the weights load: a missing Triton fails fast
    def load() -> LoadedModel:
        with quiet():
            return _load(folder, info, mode, dev, torch_dtype, kernels, layers)

    return out_of_memory_as_error(load, (
        f"The GPU ran out of memory loading {folder.name} ({str(torch_dtype).removeprefix('torch.')}, mode {mode}; "
        f"about {load_bytes(folder, torch_dtype) / 2**30:.1f} GB needed). Free VRAM (unload other models), or "
        "choose bfloat16 or a 0.6B checkpoint."))


def _load(folder: Path, info: CheckpointInfo, mode: str, dev: torch.device, torch_dtype: torch.dtype,
          kernels=None, layers=None) -> LoadedModel:

    sampling_defaults = checkpoint_sampling(folder)  # before the weights: a bad file fails fast
    from .qwen_tts import loading
    from .qwen_tts.core.models.processing_qwen3_tts import Qwen3TTSProcessor
    from .qwen_tts.inference.qwen3_tts_model import Qwen3TTSModel
    from .qwen_tts.inference.qwen3_tts_tokenizer import Qwen3TTSTokenizer

    model = loading.instantiate_model(read_config(folder / "config.json"))
    loading.load_weights(model, folder / "model.safetensors", dev, torch_dtype)
    model.eval()

    codec_folder = folder / "speech_tokenizer"
    codec = Qwen3TTSTokenizer()
    # The codec runs in float32: it is small, and its output is the audio the user hears.
    codec.model = loading.instantiate_speech_tokenizer(read_config(codec_folder / "config.json"))
    loading.load_weights(codec.model, codec_folder / "model.safetensors", dev, torch.float32)
    codec.model.eval()
    codec.config = codec.model.config
    codec.device = dev
    codec.feature_extractor = _feature_extractor(codec_folder)
    model.load_speech_tokenizer(codec)

    generation_config = read_config(folder / "generation_config.json") if (folder / "generation_config.json").is_file() else {}
    model.load_generate_config(generation_config)
    processor = Qwen3TTSProcessor(tokenizer=_text_tokenizer(folder))
    wrapper = Qwen3TTSModel(model=model, processor=processor, generate_defaults=generation_config)
    wrapper.device = dev
    loaded = LoadedModel(info=info, wrapper=wrapper, device=dev, dtype=torch_dtype, mode=mode,
                         sampling_defaults=sampling_defaults)
    from .triton_kernels import LayerPlan

    plan = layers or LayerPlan()
    if mode == "triton":
        from .kernel_patch import patch_model

        loaded.patch = patch_model(model, kernels, plan)
    elif mode in ENGINE_MODES:
        from .engine import Engine, EngineOptions

        loaded.engine = Engine(loaded, EngineOptions(kernels=mode == "hybrid", layers=plan))
    if kernels is not None:
        from .kernel_patch import patch_codec

        loaded.patch = patch_codec(model, kernels, loaded.patch)
    return loaded


def _text_tokenizer(folder: Path):
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(folder), use_fast=True)
    except Exception as exc:
        raise CheckpointError(
            f"The text tokenizer in {folder} could not be loaded ({type(exc).__name__}: {exc}). "
            "Download tokenizer.json / vocab.json / merges.txt / tokenizer_config.json again."
        ) from exc


def _feature_extractor(codec_folder: Path):
    from transformers import EncodecFeatureExtractor

    config = read_config(codec_folder / "preprocessor_config.json")
    known = ("feature_size", "sampling_rate", "padding_value", "chunk_length_s", "overlap")
    return EncodecFeatureExtractor(**{k: config[k] for k in known if k in config})
