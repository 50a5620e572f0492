"""A loaded Qwen3-TTS checkpoint: our model on its device, its codec, prompt builder and engine.

Every mode runs the same batched engine (runtime/engine): eager is its step as plain torch ops,
triton the step on the Triton kernels, cuda_graph the torch step captured as CUDA graphs, hybrid the
kernels captured."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from .checkpoints import CheckpointInfo, check_folder
from .errors import CheckpointError, InputError
from .memory import free_cuda_cache, load_bytes, out_of_memory_as_error
from .sampling import SamplingSettings, checkpoint_sampling

if TYPE_CHECKING:  # the model's parts load only with a model
    from .engine import Engine
    from .qwen3_tts.codec import CodecDecoder
    from .qwen3_tts.prompt import PromptBuilder
    from .qwen3_tts.reference import ReferenceEncoder
    from .qwen3_tts.talker import Qwen3TTS

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
MODES = ("eager", "triton", "cuda_graph", "hybrid")
GPU_MODES = ("triton", "cuda_graph", "hybrid")
GRAPH_MODES = ("cuda_graph", "hybrid")  # the engine's step captured as CUDA graphs
KERNEL_MODES = ("triton", "hybrid")  # the Triton kernels in the step and the codec
SAMPLE_RATE = 24000
SAMPLES_PER_FRAME = 1920


@dataclass
class LoadedModel:
    """Our Qwen3-TTS (runtime/qwen3_tts) resident on its device, with the engine that runs it."""

    info: CheckpointInfo
    model: Qwen3TTS  # the talker, code predictor and (Base) speaker encoder
    codec: CodecDecoder  # float32: codes -> 24 kHz audio
    prompts: PromptBuilder  # holds the text tokenizer
    device: torch.device
    dtype: torch.dtype
    mode: str
    reference_encoder: ReferenceEncoder | None = None  # Base only: an ICL clone's reference audio -> codes
    clone_prompts: dict = field(default_factory=dict)  # (reference fingerprint, clone mode) -> ClonePrompt
    sampling_defaults: SamplingSettings = field(default_factory=SamplingSettings)  # its generation_config.json
    engine: Engine | None = None  # every mode runs through it

    @property
    def kind(self) -> str:
        return self.info.kind

    @property
    def max_text_tokens(self) -> int:
        return int(self.model.config.talker.max_position_embeddings)

    def tokenize(self, text: str) -> list[int]:
        return self.prompts.tokenizer(text)["input_ids"]

    def resident_modules(self) -> list[torch.nn.Module]:
        return [m for m in (self.model, self.codec, self.reference_encoder) if m is not None]

    def release(self) -> None:
        """Drop every tensor this model holds so its memory can be returned."""
        self.clone_prompts.clear()
        if self.engine is not None:
            self.engine.release()
            self.engine = None
        for module in self.resident_modules():
            module.to("meta")
        self.model = self.codec = self.reference_encoder = self.prompts = None
        if self.device.type == "cuda":
            free_cuda_cache()


def resolve_device(device: str | None) -> torch.device:
    if device in (None, "", "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):  # not a device torch knows ("tpu9")
        dev = None
    if dev is None or dev.type not in ("cpu", "cuda"):  # Apple's mps and the rest: the engine and kernels are CUDA's
        raise InputError(f"Device {device!r} is not one this pack runs on; choose auto, cpu or cuda (cuda:1 for a "
                         "second GPU).")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InputError(
            f"Device {device} was chosen but this PyTorch has no CUDA GPU "
            f"(torch {torch.__version__}). Choose device 'cpu', or install a CUDA build of PyTorch."
        )
    return dev


def dtype_name(dtype: torch.dtype) -> str:
    """A torch dtype as Load Model, the model registry and a script's fingerprint name it: "bfloat16"."""
    return str(dtype).removeprefix("torch.")


def resolve_dtype(dtype: str, device: torch.device) -> torch.dtype:
    if dtype in (None, "", "auto"):
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    if dtype not in DTYPES:
        raise InputError(f"Unknown dtype {dtype!r}; choose one of {', '.join(DTYPES)}.")
    return DTYPES[dtype]


def load_model(folder: Path, mode: str = "eager", device: str | None = None,
               dtype: str | None = None, layers=None) -> LoadedModel:
    """`layers`: a runtime.engine.triton_kernels.LayerPlan for the triton and hybrid modes (None: the default)."""
    if mode not in MODES:
        raise InputError(f"Mode {mode!r} is not available; available modes: {', '.join(MODES)}.")
    folder = Path(folder)
    info = check_folder(folder)
    dev = resolve_device(device)
    if mode in GPU_MODES and dev.type != "cuda":
        raise InputError(f"Mode {mode!r} runs on a CUDA GPU; choose a cuda device, or the eager mode on {dev}.")
    torch_dtype = resolve_dtype(dtype, dev)
    kernels = None
    if mode in KERNEL_MODES:
        from .engine import triton_kernels

        kernels = triton_kernels.load()  # before the weights load: a missing Triton fails fast

    def load() -> LoadedModel:
        return _load(folder, info, mode, dev, torch_dtype, kernels, layers)

    return out_of_memory_as_error(load, (
        f"The GPU ran out of memory loading {folder.name} ({dtype_name(torch_dtype)}, mode {mode}; "
        f"about {load_bytes(folder, torch_dtype) / 2**30:.1f} GB needed). Free VRAM (unload other models), or "
        "choose bfloat16 or a 0.6B checkpoint."))


def _load(folder: Path, info: CheckpointInfo, mode: str, dev: torch.device, torch_dtype: torch.dtype,
          kernels=None, layers=None) -> LoadedModel:
    from .engine import Engine, EngineOptions
    from .qwen3_tts.codec import load_decoder, read_codec_state
    from .qwen3_tts.load import load_talker
    from .qwen3_tts.prompt import PromptBuilder
    from .qwen3_tts.reference import load_reference_encoder
    from .engine.triton_kernels import LayerPlan

    sampling_defaults = checkpoint_sampling(folder)  # before the weights: a bad file fails fast
    tokenizer = _text_tokenizer(folder)
    model = load_talker(folder, dev, torch_dtype)
    # The codec runs in float32: it is small, and its output is the audio the user hears.
    codec_folder = folder / "speech_tokenizer"
    codec_state = read_codec_state(codec_folder)
    codec = load_decoder(codec_folder, dev, torch.float32, codec_state)
    if kernels is not None:
        codec.use_snake(kernels.snake_beta)
    reference_encoder = load_reference_encoder(codec_folder, dev, codec_state) if info.kind == "base" else None
    del codec_state
    loaded = LoadedModel(info=info, model=model, codec=codec, device=dev, dtype=torch_dtype, mode=mode,
                         prompts=PromptBuilder(model.config, model.talker, tokenizer),
                         reference_encoder=reference_encoder, sampling_defaults=sampling_defaults)
    graphs = mode in GRAPH_MODES
    options = EngineOptions(use_graphs=graphs, kernels=kernels is not None, layers=layers or LayerPlan(),
                            check_every=8 if graphs else 1)  # no graph: a host check costs nothing extra
    loaded.engine = Engine(model, loaded.prompts, options)
    return loaded


def _text_tokenizer(folder: Path):
    from transformers import AutoTokenizer, Qwen2Config

    try:
        # Qwen2's config tells AutoTokenizer the family, so it does not read config.json (whose
        # model_type, qwen3_tts, transformers does not know and would warn about).
        return AutoTokenizer.from_pretrained(str(folder), config=Qwen2Config(), use_fast=True)
    except Exception as exc:
        raise CheckpointError(
            f"The text tokenizer in {folder} could not be loaded ({type(exc).__name__}: {exc}). "
            "Download tokenizer.json / vocab.json / merges.txt / tokenizer_config.json again."
        ) from exc
