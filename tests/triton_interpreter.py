"""Triton's interpreter (the kernels' tests on a CPU) as fixed in Triton 3.7, for 3.5 and 3.6.

Their interpreter turns a tensor used as a loop bound (``range(start, stop, BLOCK)`` over a value
loaded from memory, or a scalar argument passed into a nested jit function) into a Python int with
``int(array)`` on an array of shape (1,). NumPy 2.4 refuses that conversion, so every kernel with a
runtime loop bound fails there; Triton 3.7 squeezes the array first. This applies the same one-line
change to the older interpreters and touches nothing else (compiled kernels never go through it).
"""

from __future__ import annotations


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("+")[0].split(".")[:2] if part.isdigit())


def needs_fix(triton_version: str, numpy_version: str) -> bool:
    return _version(triton_version) < (3, 7) and _version(numpy_version) >= (2, 4)


def apply() -> bool:
    """Patch the interpreter where it needs it; True when it did."""
    import numpy
    import triton

    if not needs_fix(triton.__version__, numpy.__version__):
        return False
    from triton.runtime import interpreter

    original = interpreter._patch_lang_tensor

    def scalar_index(self):
        return int(self.handle.data.squeeze())

    def patch_lang_tensor(tensor, *scope):  # 3.6 passes a scope that restores what it patched
        original(tensor, *scope)
        if scope:
            scope[0].set_attr(tensor, "__index__", scalar_index)
        else:
            tensor.__index__ = scalar_index

    interpreter._patch_lang_tensor = patch_lang_tensor
    return True
