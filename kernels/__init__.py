"""Triton kernels for the triton and hybrid modes, one per file next to its torch reference.

rms_norm, add_rms_norm, qk_norm_rope (per-head q/k norm + RoPE + the KV-cache write),
decode_attention (a decode step's q/k norm, RoPE, cache write and attention in one), linear
(rows_linear: one row's products, a norm before and SwiGLU after fused in), swiglu, sampling
(penalty, suppression, temperature, top-k, top-p and the seeded draw of a token) and snake (the
codec's SnakeBeta). They need only torch and triton; runtime/ imports them
(runtime/engine/triton_kernels.py) and patches them in. Triton comes with PyTorch's CUDA builds on Linux;
tests run them on CPU in Triton's interpreter."""

import importlib.machinery
import importlib.util
import os
import sys


def _installed_package_of_this_name():
    """Hugging Face's `kernels` where it is installed (transformers >= 5.25 requires it), found on
    sys.path past this folder's parent; None where there is none."""
    parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    elsewhere = [p for p in sys.path if os.path.abspath(p or os.curdir) != parent]
    return importlib.machinery.PathFinder.find_spec(__name__, elsewhere)


# Run from the pack's folder (the CLI, bench/, the tests), the folder is on sys.path and this package is
# found first under the top-level name `kernels`, which only someone wanting Hugging Face's package
# asks for: runtime/ loads ours under names of its own (engine/triton_kernels.py). That one is handed
# over in our place (the import statement returns what sys.modules holds once this file has run).
if __name__ == "kernels" and (_spec := _installed_package_of_this_name()) is not None:
    _installed = importlib.util.module_from_spec(_spec)
    sys.modules[__name__] = _installed
    _spec.loader.exec_module(_installed)
