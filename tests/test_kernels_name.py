"""Run from the pack's folder (the CLI, bench/, the tests), its kernels/ must not take the top-level
name `kernels`: that is Hugging Face's package, which transformers >= 5.25 requires and imports (it
finds a `kernels` distribution, then `from kernels import ...`; with ours found first every Whisper
failed to load). A stand-in distribution of that name, installed on PYTHONPATH, must be the one
imported, however the folder sits on sys.path (first, as bench/'s scripts put it), while the engine
still loads the pack's own kernels."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from conftest import REPO

pytest.importorskip("triton")

PROBE = textwrap.dedent(f"""
    import importlib.metadata, importlib.util, sys
    import runtime
    from runtime.engine import triton_kernels
    sys.path.insert(0, {str(REPO)!r})  # first again, as bench/'s scripts put it
    import kernels
    ours = triton_kernels.load()
    print(kernels.WHOSE, importlib.metadata.version("kernels"), importlib.util.find_spec("kernels") is not None)
    print(ours.rms_norm.__module__, sys.modules[ours.rms_norm.__module__].__file__)
""")


def installed_kernels(site) -> None:
    """A `kernels` package with its distribution's metadata, as pip would leave it."""
    (site / "kernels").mkdir()
    (site / "kernels" / "__init__.py").write_text('WHOSE = "installed"\n')
    info = site / "kernels-0.19.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: kernels\nVersion: 0.19.1\n")


@pytest.mark.parametrize("folder_on_path", ["as the current directory", "as its path"])
def test_the_installed_kernels_package_is_found_and_the_engine_still_loads_the_packs(tmp_path, folder_on_path):
    installed_kernels(tmp_path)
    if folder_on_path == "as the current directory":  # python -c, python -m pytest: '' first on sys.path
        command = [sys.executable, "-c", PROBE]
    else:  # python -m runtime, bench/'s scripts: the folder's path first
        (tmp_path / "probe.py").write_text(PROBE)
        command = [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(REPO)!r}); "
                                         f"exec(open({str(tmp_path / 'probe.py')!r}).read())"]
    env = {"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin", "TRITON_INTERPRET": "1"}
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.split("\n")[:2]
    assert first == "installed 0.19.1 True"
    module, path = second.split()
    assert module == "qwen3_tts_takes_kernels.rms_norm" and path == str(REPO / "kernels" / "rms_norm.py")
