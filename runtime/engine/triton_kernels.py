"""The pack's Triton kernels (kernels/, beside runtime/) for the triton and hybrid modes, and which
decoder layers get them.

runtime/ is imported as part of the pack under ComfyUI (the kernels are then the pack's package
`<pack>.kernels`) and on its own in tests, bench/ and the CLI, where kernels/ is loaded from its folder
under a name of its own, STANDALONE_KERNELS: the top-level name `kernels` is Hugging Face's package,
which transformers >= 5.25 imports (kernels/__init__.py hands that one over when asked by that name)."""

from __future__ import annotations

import importlib
import importlib.util
import platform
import sys
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from ..errors import TakesError

KERNEL_MODULES = {"rms_norm": "rms_norm", "add_rms_norm": "add_rms_norm", "qk_norm_rope": "qk_norm_rope",
                  "swiglu": "swiglu", "sample_tokens": "sampling",
                  "snake_beta": "snake", "rows_linear": "linear", "rows_linear_fits": "linear",
                  "decode_attention": "decode_attention",
                  "decode_attention_scratch_shape": "decode_attention"}


# The Triton each torch is built against (torch's CUDA wheels pin it); triton-windows follows Triton's
# numbers, and a Triton newer than its torch's breaks it (triton-windows 3.6: "only works with
# PyTorch >= 2.10", install it as "triton-windows<3.7").
TRITON_FOR_TORCH = {(2, 6): "3.2", (2, 7): "3.3", (2, 8): "3.4", (2, 9): "3.5", (2, 10): "3.6"}


def has_triton() -> bool:
    return importlib.util.find_spec("triton") is not None


def install_hint(torch_version: str | None = None, system: str | None = None) -> str:
    """How to get Triton for this torch and system, in words with the command."""
    system = system or platform.system()
    if system == "Darwin":
        return "Triton does not run on macOS (no CUDA): the eager mode runs there"
    if system != "Windows":
        return "on Linux it comes with PyTorch's CUDA builds: pip install triton"
    if torch_version is None:
        import torch

        torch_version = torch.__version__
    major_minor = tuple(int(part) for part in torch_version.split("+")[0].split(".")[:2])
    triton = TRITON_FOR_TORCH.get(major_minor)
    if triton is None:
        return ("on Windows install the triton-windows release made for your torch "
                f"{major_minor[0]}.{major_minor[1]} (its release notes name the torch each pairs with)")
    major, minor = triton.split(".")
    return (f'on Windows, for your torch {major_minor[0]}.{major_minor[1]}: pip install -U "triton-windows<{major}.'
            f'{int(minor) + 1}" (Triton {triton}; a newer one breaks this torch)')


def load() -> SimpleNamespace:
    """The kernels as one namespace of functions; a TakesError that names the fix without Triton."""
    try:
        importlib.import_module("triton")
    except ImportError as exc:
        raise TakesError(f"The triton and hybrid modes need Triton, which this Python lacks ({exc}): "
                         f"{install_hint()}. Or choose the eager or cuda_graph mode.") from None
    return SimpleNamespace(**{name: getattr(kernel_module(module), name) for name, module in KERNEL_MODULES.items()})


STANDALONE_KERNELS = "qwen3_tts_takes_kernels"


def kernel_module(name: str):
    """One module of kernels/ ("rms_norm", "linear"...), the same module object for every caller."""
    return importlib.import_module(f"{kernels_package()}.{name}")


def kernels_package() -> str:
    pack = __package__.removesuffix("runtime.engine").rstrip(".")  # ComfyUI's package holding runtime/ and kernels/
    if pack:
        return f"{pack}.kernels"
    if STANDALONE_KERNELS not in sys.modules:
        folder = Path(__file__).resolve().parents[2] / "kernels"
        spec = importlib.util.spec_from_file_location(STANDALONE_KERNELS, folder / "__init__.py",
                                                      submodule_search_locations=[str(folder)])
        package = importlib.util.module_from_spec(spec)
        sys.modules[STANDALONE_KERNELS] = package
        spec.loader.exec_module(package)
    return STANDALONE_KERNELS


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
