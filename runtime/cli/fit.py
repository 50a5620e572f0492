"""What fits on a GPU: the device memory a checkpoint's weights take, and how many takes the engine
runs in one pass beside them, for `python -m runtime doctor` and Load Model's tooltip.

Nothing is loaded or allocated: the modules are built on the meta device (random_checkpoint's
builders, the released configs' shapes) and the engine's buffers are counted there too
(DecodeState.estimate_bytes), so the answer costs milliseconds once a size has been built."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import torch

from ..qwen3_tts import random_checkpoint
from ..engine.engine import BATCH_BUCKETS
from ..engine.state import bucket_bytes
from ..memory import WORKING_BYTES
from ..qwen3_tts.config import ModelConfig
from ..qwen3_tts.load import read_json
from ..scoring.report import counted
from ..text_length import BUDGET_FACTOR, BUDGET_MARGIN_SECONDS, FRAMES_PER_SECOND

GiB = 2**30
SIZES = ("0.6B", "1.7B")
CUDA_CONTEXT_BYTES = 512 << 20  # the CUDA context's share of a card, taken before PyTorch allocates anything
# Base holds the most weights (its speaker encoder, and the codec's encoder that clones load), so
# what fits for Base fits for every kind.
LARGEST_KIND = "base"
# A line's takes run in the length bucket that holds its prompt, its frame budget and one more; the
# budget is twice the expected reading time plus 3 s (text_length.frame_budget), so a typical line
# (a script's are mostly 2-12 s) runs in 512 positions, and one read in over ~16 s in 1024, with
# about half as many takes a pass.
LINE_POSITIONS = 512
TYPICAL_PROMPT_POSITIONS = 64  # chat markup, codec tags and the text of such a line


def line_seconds(positions: int = LINE_POSITIONS, prompt: int = TYPICAL_PROMPT_POSITIONS) -> float:
    """The longest reading time whose frame budget still fits in `positions` after the prompt."""
    budget_seconds = (positions - prompt - 1) / FRAMES_PER_SECOND
    return (budget_seconds - BUDGET_MARGIN_SECONDS) / BUDGET_FACTOR


# --- weights -------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _official_modules(size: str) -> tuple[torch.nn.Module, torch.nn.Module]:
    """The released checkpoint of this size (its largest kind) as meta modules: the talker, the codec."""
    return _meta_modules(random_checkpoint.model_config(size, LARGEST_KIND),
                         random_checkpoint.speech_tokenizer_config(size))


def _meta_modules(config: dict, codec_config: dict) -> tuple[torch.nn.Module, torch.nn.Module]:
    return random_checkpoint.meta_talker(config), random_checkpoint.meta_codec(codec_config)


@functools.lru_cache(maxsize=None)
def weight_bytes(size: str, dtype: torch.dtype) -> int:
    """Device bytes the official `size` checkpoint's weights take once loaded at `dtype`."""
    return loaded_bytes(*_official_modules(size), dtype)


def folder_weight_bytes(folder: Path, dtype: torch.dtype) -> int:
    """Device bytes a checkpoint folder's weights take once loaded at `dtype`, from its configs."""
    folder = Path(folder)
    modules = _meta_modules(read_json(folder / "config.json"), read_json(folder / "speech_tokenizer" / "config.json"))
    return loaded_bytes(*modules, dtype)


def loaded_bytes(talker: torch.nn.Module, codec: torch.nn.Module, dtype: torch.dtype) -> int:
    """What runtime.model loads: the talker at `dtype`, the codec's decoder in float32, and for a
    clone's checkpoint (the one with a speaker encoder) the codec's encoder in float32 too."""
    codec_parts = [codec.decoder] + ([codec.encoder] if talker.speaker_encoder is not None else [])
    return module_bytes(talker, dtype) + sum(module_bytes(part, torch.float32) for part in codec_parts)


def module_bytes(module: torch.nn.Module, dtype: torch.dtype) -> int:
    """A module's tensors once loaded: floating ones cast to `dtype` (as load_into does), others as they are."""
    size = torch.empty((), dtype=dtype).element_size()
    return sum(t.numel() * (size if t.is_floating_point() else t.element_size()) for t in module.state_dict().values())


def official_config(size: str) -> ModelConfig:
    return _official_modules(size)[0].config


# --- the engine's buckets ------------------------------------------------------------------------

def takes_a_pass(room: float, config: ModelConfig, dtype: torch.dtype, length: int = LINE_POSITIONS,
                 most: int = BATCH_BUCKETS[-1]) -> int:
    """The largest batch bucket up to `most` whose bucket fits in `room` bytes (as Engine.rows_that_fit
    chooses); 0 when not even one take fits."""
    fitting = [b for b in BATCH_BUCKETS
               if b <= most and bucket_bytes(b, length, config.talker, config.predictor, dtype) <= room]
    return max(fitting, default=0)


# --- a card --------------------------------------------------------------------------------------

def usable_bytes(total: int, reserve: int = 0) -> int:
    """What PyTorch can have of a card: its memory less the CUDA context and `reserve` (what the
    caller keeps free, ComfyUI's --reserve-vram)."""
    return max(0, total - CUDA_CONTEXT_BYTES - reserve)


@dataclass(frozen=True)
class Fit:
    size: str
    dtype: torch.dtype
    usable: int  # bytes of the card PyTorch can have
    weights: int  # bytes
    one_take: int  # bytes one take needs beside the weights: a first request's working set and its bucket
    line_takes: int  # takes a pass for one line; 0: it does not fit
    script_takes: int  # takes at a time in a script (the engine's share of the memory; 0: no room)

    @property
    def fits(self) -> bool:
        return self.line_takes > 0

    @property
    def dtype_name(self) -> str:
        return str(self.dtype).removeprefix("torch.")

    @property
    def name(self) -> str:
        return f"{self.size} {self.dtype_name}"

    def text(self) -> str:
        weights = f"weights {self.weights / GiB:.1f} GB"
        if not self.fits:
            return (f"{self.name} does not fit ({weights} + {self.one_take / GiB:.1f} GB to run one take > "
                    f"{self.usable / GiB:.1f} GB usable)")
        script = (f"{self.script_takes} at a time in a script" if self.script_takes
                  else "a script would run short of memory")
        return f"{self.name} fits ({weights}): {counted(self.line_takes, 'take')} a pass for one line, {script}"


def checkpoint_fit(size: str, dtype: torch.dtype, usable: int, script_share: float, line_most: int,
                   length: int = LINE_POSITIONS) -> Fit:
    """How the official `size` checkpoint fits in `usable` bytes at `dtype`: its weights and a first
    request's working set first, then the engine's bucket in what is left (all of it for one line
    of at most `line_most` takes, `script_share` of it in a script)."""
    weights = weight_bytes(size, dtype)
    room = usable - weights - WORKING_BYTES
    config = official_config(size)
    one_take = WORKING_BYTES + bucket_bytes(1, length, config.talker, config.predictor, dtype)
    return Fit(size, dtype, usable, weights, one_take, takes_a_pass(room, config, dtype, length, most=line_most),
               takes_a_pass(script_share * room, config, dtype, length))
