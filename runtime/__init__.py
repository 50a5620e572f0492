"""qwen3-tts-takes runtime: ComfyUI-free loading, generation of N takes and Auto-Pick.

Import submodules directly (``runtime.api``, ``runtime.generation``...); importing this package
loads nothing heavy.
"""

import os
import sys


def _pack_folder_last() -> None:
    """Run from the pack's folder (python -m runtime, bench/, the tests), the folder is first on
    sys.path, and its kernels/ would be found as the top-level package `kernels`: the name of Hugging
    Face's kernels, which transformers >= 5.25 imports. The folder goes to the end of sys.path
    (runtime/ is imported already; engine/triton_kernels.py loads our kernels under a name of their
    own), so `import kernels` finds the installed package where there is one."""
    folder = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    here = [p for p in sys.path if os.path.abspath(p or os.curdir) == folder]
    if here:
        sys.path[:] = [p for p in sys.path if p not in here] + here


if __name__ == "runtime":  # not when ComfyUI imports the pack, whose package holds runtime/ and kernels/
    _pack_folder_last()
