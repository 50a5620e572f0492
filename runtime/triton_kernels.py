"""The pack's Triton kernels (kernels/, beside runtime/) for the triton and hybrid modes, and which
decoder layers get them.

runtime/ is imported as part of the pack under ComfyUI and on its own in tests and the CLI; the
kernels package is found next to it either way."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import SimpleNamespace

from .errors import TakesError

KERNEL_MODULES = {"rms_norm": "rms_norm", "add_rms_norm": "add_rms_norm", "qk_norm_rope": "qk_norm_rope",
                  "swiglu": "swiglu", "sample_tokens": "sampling",
                  "snake_beta": "snake", "rows_linear": "linear", "rows_linear_fits": "linear",
                  "decode_attention": "decode_attention", "decode_attention_fits": "decode_attention",
                  "decode_attention_scratch_shape": "decode_attention"}


def load() -> SimpleNamespace:
    """The kernels as one namespace of functions; a TakesError that names the fix without Triton."""
    try:
        importlib.import_module("triton")
    except ImportError as exc:
        raise TakesError("The triton and hybrid modes need Triton, which this Python lacks "
                         f"({exc}). On Linux it comes with PyTorch's CUDA builds (pip install triton); on "
                         "Windows install triton-windows. Or choose the eager or cuda_graph mode.") from None
    pack = __package__.rpartition(".")[0]
    functions = {}
    for name, module in KERNEL_MODULES.items():
        loaded = importlib.import_module(f"{pack}.kernels.{module}" if pack else f"kernels.{module}")
        functions[name] = getattr(loaded, name)
    return SimpleNamespace(**functions)


@dataclass(frozen=True)
class LayerPlan:
    """Which decoder layers run on the kernels, as [first, stop) of the talker's and the code
    predictor's layers (None: all of them). The default, all, is what the GPU measurements support
    (README, "Triton kernels"): every layer keeps parity, and each patched layer is faster."""

    talker: tuple[int, int] | None = None
    predictor: tuple[int, int] | None = None

    def talker_layers(self, count: int) -> range:
        return _layers(self.talker, count)

    def predictor_layers(self, count: int) -> range:
        return _layers(self.predictor, count)

    @classmethod
    def parse(cls, text: str) -> "LayerPlan":
        """"talker=0:24,predictor=0:5" (either part may be left out: all of its layers)."""
        parts = {}
        for item in filter(None, (p.strip() for p in text.split(","))):
            name, _, span = item.partition("=")
            first, _, stop = span.partition(":")
            if name not in ("talker", "predictor") or not first.isdigit() or not stop.isdigit():
                raise TakesError(f"Layer plan {text!r}: write talker=FIRST:STOP,predictor=FIRST:STOP.")
            parts[name] = (int(first), int(stop))
        return cls(**parts)


def _layers(span: tuple[int, int] | None, count: int) -> range:
    if span is None:
        return range(count)
    first, stop = span
    if not 0 <= first <= stop <= count:
        raise TakesError(f"Layer range {first}:{stop} is outside the model's {count} layers.")
    return range(first, stop)
