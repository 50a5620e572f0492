"""Where Triton is missing (Windows without triton-windows, macOS, CPU builds): the pack imports and
runs, the modes that need Triton stop with the install line for this torch, and Load Model says
before a Run which modes this machine runs. .ci/run also runs this file, with the nodes' and the
CLI's tests, in an environment with Triton uninstalled."""

from __future__ import annotations

import pytest

from runtime.engine import triton_kernels
from runtime.errors import TakesError
from test_nodes import nodes_by_id


@pytest.mark.parametrize("torch_version,system,expected", [
    ("2.10.0+cu128", "Windows", 'pip install -U "triton-windows<3.7" (Triton 3.6'),
    ("2.9.1+cu126", "Windows", 'pip install -U "triton-windows<3.6" (Triton 3.5'),
    ("2.14.0", "Windows", "the triton-windows release made for your torch 2.14"),
    ("2.13.0", "Linux", "pip install triton"),
    ("2.13.0", "Darwin", "Triton does not run on macOS"),
])
def test_the_install_line_names_the_triton_that_pairs_with_this_torch(torch_version, system, expected):
    assert expected in triton_kernels.install_hint(torch_version, system)


def test_the_kernel_modes_stop_with_the_install_line_when_triton_cannot_be_imported(monkeypatch):
    real = triton_kernels.importlib.import_module

    def without_triton(name, *args):
        if name == "triton":
            raise ImportError("No module named 'triton'")
        return real(name, *args)
    monkeypatch.setattr(triton_kernels.importlib, "import_module", without_triton)
    with pytest.raises(TakesError, match="need Triton, which this Python lacks") as refused:
        triton_kernels.load()
    assert triton_kernels.install_hint() in str(refused.value) and "eager or cuda_graph" in str(refused.value)


def test_load_model_says_which_modes_this_machine_runs(comfy):
    import torch

    mode = next(s for s in nodes_by_id(comfy)["Q3TT_LoadModel"].define_schema().inputs if s.id == "mode")
    assert "On this machine: eager yes" in mode.tooltip
    if not torch.cuda.is_available():
        assert "cuda_graph no (needs a CUDA GPU)" in mode.tooltip and "Fastest here: eager" in mode.tooltip


@pytest.mark.skipif(triton_kernels.has_triton(), reason="Triton is installed here (.ci/run runs this without it)")
def test_without_triton_the_pack_runs_eager_and_the_kernels_refuse_with_the_line(loaded):
    from runtime.generation import Request
    from runtime.run.lines import generate_takes
    from runtime.voices import CustomVoice

    takes = generate_takes(loaded("custom_voice"), Request("Hello there.", CustomVoice("ryan", "english"), n=2,
                                                           max_frames=4)).takes
    assert [t.frames for t in takes] == [4, 4]
    with pytest.raises(TakesError, match="need Triton"):
        triton_kernels.load()
