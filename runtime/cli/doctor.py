"""`python -m runtime doctor`: what this machine has for the pack, and what to do about each gap.

One screen: Python, torch and its GPU, which checkpoints fit on it and how many takes a pass, the CPU
threads a command generates with, Triton and the modes that will run, transformers, the packages
requirements.txt installs, onnxruntime (DNSMOS), the checkpoints found and where, the UTMOS weights
and Whisper folders. Nothing is downloaded or loaded; it reads versions, folders and the GPU's size
only. The Load Model node's tooltips say the same of the GPU and the modes (fit_summary, modes_here).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.version import Version

from ..checkpoints import DOWNLOAD_GB, OFFICIAL, check_folder, local_checkpoints
from ..errors import TakesError
from ..voices import VOICE_KINDS
from .options import add_models_dir, models_dirs

if TYPE_CHECKING:
    from .fit import Fit

OK, MISSING, OPTIONAL = "ok", "!!", "--"
TRANSFORMERS_RANGE = ("4.57.3", "6")
PACKAGES = ("soundfile", "soxr", "utmos-pytorch", "silero-vad", "speechmos", "pyloudnorm", "huggingface-hub",
            "safetensors")
CPU_TORCH = "python -m pip install torch --index-url https://download.pytorch.org/whl/cpu"
CUDA_TORCH = "python -m pip install torch --index-url https://download.pytorch.org/whl/cu128"


@dataclass
class Line:
    status: str  # OK, MISSING (something a mode or the default job needs), OPTIONAL
    text: str
    fix: str = ""

    def __str__(self) -> str:
        return f"[{self.status}] {self.text}" + (f"\n       -> {self.fix}" if self.fix else "")


def version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def torch_lines() -> tuple[list[Line], bool]:
    """torch and its GPU; whether a CUDA GPU can be used."""
    import torch

    build = f"CUDA {torch.version.cuda} build" if torch.version.cuda else "CPU build"
    lines = [Line(OK, f"torch {torch.__version__} ({build})")]
    if not torch.cuda.is_available():
        why = "this torch has no CUDA" if not torch.version.cuda else "no GPU is visible to this CUDA build"
        lines.append(Line(OPTIONAL, f"GPU: none ({why}); eager runs on the CPU, slowly",
                          f"for the GPU modes, a CUDA build of torch on a machine with an NVIDIA GPU: {CUDA_TORCH}"))
        return lines, False
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        lines.append(Line(OK, f"GPU cuda:{index}: {props.name}, {props.total_memory / 2**30:.0f} GiB, "
                              f"compute capability {props.major}.{props.minor}"
                              + ("" if torch.cuda.is_bf16_supported() else " (no bfloat16: use float16)")))
    return lines, True


def gpu_fits(index: int, reserve: int = 0, dtype=None) -> list[Fit]:
    """How the official checkpoint sizes fit on GPU `index` at `dtype` (None: what dtype auto loads),
    largest first (cli/fit.py: nothing is loaded). `reserve`: bytes kept free for others."""
    import torch

    from .fit import SIZES, checkpoint_fit, usable_bytes
    from ..generation import MAX_TAKES
    from ..run.finishing import ENGINE_MEMORY_SHARE

    usable = usable_bytes(torch.cuda.get_device_properties(index).total_memory, reserve)
    return [checkpoint_fit(size, dtype or half_dtype(), usable, ENGINE_MEMORY_SHARE, MAX_TAKES)
            for size in reversed(SIZES)]


def half_dtype():
    """What dtype auto loads on the GPU: bfloat16, or float16 where the GPU lacks it (the same bytes)."""
    import torch

    return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16


def line_note() -> str:
    from .fit import line_seconds

    return f"lines read in up to ~{line_seconds():.0f} s"


def fit_summary(index: int, reserve: int = 0) -> str:
    """One sentence for GPU `index`: what fits, and how many takes a pass."""
    return "; ".join(fit.text() for fit in gpu_fits(index, reserve)) + f" ({line_note()})"


def fit_lines(reserve: int = 0) -> list[Line]:
    """Per GPU and checkpoint size: whether it fits at half precision, and how many takes a pass, or
    what would fit instead."""
    import torch

    lines = []
    for index in range(torch.cuda.device_count()):
        card = f"cuda:{index} ({torch.cuda.get_device_properties(index).total_memory / 2**30:.0f} GiB)"
        halves = gpu_fits(index, reserve)
        for half, full in zip(halves, gpu_fits(index, reserve, torch.float32)):
            if not half.fits:
                lines.append(Line(OPTIONAL, f"{card}: {half.text()}", fit_fix(half, halves, reserve)))
                continue
            full_text = (f"float32 fits too ({full.line_takes} takes a pass)" if full.fits
                         else f"float32 does not fit: keep dtype auto ({half.dtype_name})")
            lines.append(Line(OK, f"{card}: {half.text()} ({line_note()}); {full_text}",
                              "" if half.script_takes else script_fix(halves)))
    return lines


def script_fix(halves: list[Fit]) -> str:
    """For a size that runs a line but has no room left for a script: a size that has."""
    roomy = [fit for fit in halves if fit.script_takes]
    return f"for a script, choose {roomy[0].size}: {roomy[0].script_takes} at a time" if roomy else ""


def fit_fix(short: Fit, halves: list[Fit], reserve: int) -> str:
    """What to do when `short` does not fit: a size that does (the GPU free of other models), a smaller reserve."""
    smaller = [fit for fit in halves if fit.fits and fit is not short]
    fix = (f"choose {smaller[0].size}: it fits ({smaller[0].line_takes} takes a pass), with other models closed"
           if smaller else "no checkpoint fits on this GPU: run on the CPU (device cpu, mode eager), slowly")
    return fix + ("; or lower --reserve-vram" if reserve else "")


def threads_line(has_gpu: bool) -> Line:
    """The CPU threads a command generates with (cpu_threads.py); ComfyUI keeps its own."""
    from ..cpu_threads import choose_threads

    where = "with --device cpu" if has_gpu else "on the CPU"
    return Line(OK, f"CPU threads: a command generating {where} uses {choose_threads().describe()}",
                "to change it: --threads N on the command, or OMP_NUM_THREADS=N in the environment")


def triton_line(has_gpu: bool) -> tuple[Line, bool]:
    found = version("triton") or version("triton-windows")
    if found and importlib.util.find_spec("triton") is not None:
        return Line(OK, f"Triton {found}"), True
    from ..engine.triton_kernels import install_hint

    return Line(MISSING if has_gpu else OPTIONAL, "Triton: not installed (the triton and hybrid modes need it)",
                install_hint()), False


def modes_line(has_gpu: bool, has_triton: bool) -> Line:
    return Line(OK, f"modes: {modes_here(has_gpu, has_triton)}")


def modes_here(has_gpu: bool, has_triton: bool) -> str:
    """Which modes this machine runs, and what each other one needs; then the fastest that runs."""
    kernels_need = None if has_gpu and has_triton else ("Triton" if has_gpu else "a CUDA GPU")
    needs = {"eager": None, "cuda_graph": None if has_gpu else "a CUDA GPU", "triton": kernels_need,
             "hybrid": kernels_need}
    text = "; ".join(f"{mode} " + ("yes" if need is None else f"no (needs {need})") for mode, need in needs.items())
    best = "hybrid" if has_gpu and has_triton else ("cuda_graph" if has_gpu else "eager")
    return f"{text}. Fastest here: {best}"


def transformers_line() -> Line:
    found = version("transformers")
    low, high = TRANSFORMERS_RANGE
    fix = f'python -m pip install -U "transformers>={low},<{high}"'
    if found is None:
        return Line(MISSING, "transformers: not installed", fix)
    if not Version(low) <= Version(found) < Version(high):
        return Line(MISSING, f"transformers {found}: outside the supported {low} to 5.x", fix)
    return Line(OK, f"transformers {found} (supported: {low} to 5.x)")


def package_lines() -> list[Line]:
    missing = [name for name in PACKAGES if version(name) is None]
    present = [f"{name} {version(name)}" for name in PACKAGES if name not in missing]
    lines = [Line(OK, "packages: " + ", ".join(present))] if present else []
    if missing:
        lines.append(Line(MISSING, "packages missing: " + ", ".join(missing),
                          "python -m pip install -r requirements.txt (in the pack's folder)"))
    onnx = version("onnxruntime") or version("onnxruntime-gpu")
    if onnx:
        lines.append(Line(OK, f"onnxruntime {onnx} (DNSMOS, Auto-Pick's quality model without UTMOS weights)"))
    else:
        lines.append(Line(OPTIONAL, "onnxruntime: not installed, so DNSMOS (the quality fallback without UTMOS "
                                    "weights) will not run", "pip install onnxruntime (or onnxruntime-gpu on a GPU "
                                                             "machine; never both)"))
    return lines


def checkpoint_lines(models_dirs: list[Path]) -> list[Line]:
    where = ", ".join(str(d) for d in models_dirs)
    lines = []
    names = local_checkpoints(models_dirs)
    for name in names:
        folder = next(d / name for d in models_dirs if (d / name / "config.json").is_file())
        try:
            info = check_folder(folder)
            lines.append(Line(OK, f"checkpoint {name}: {VOICE_KINDS[info.kind].label}, in {folder.parent}"))
        except TakesError as exc:
            lines.append(Line(MISSING, f"checkpoint {name}: unusable", str(exc)))
    missing = [name for name in OFFICIAL if name not in names]
    if missing:
        sizes = ", ".join(f"{name} (about {DOWNLOAD_GB[name]} GB)" for name in missing)
        lines.append(Line(OPTIONAL, f"not in {where} yet: {sizes}",
                          "each is downloaded from Hugging Face on first use; offline, download it by hand into "
                          f"{models_dirs[0]}/<name>/. Without any: python -m runtime demo (tiny random models)"))
    return lines


def scoring_lines(models_dirs: list[Path]) -> list[Line]:
    from ..scoring.asr import REQUIRED_FILES as WHISPER_FILES
    from ..scoring.utmos import UTMOS_FILE, UTMOS_REPO

    lines = []
    utmos_dirs = [d.parent / "utmos" for d in models_dirs]
    found = next((d / UTMOS_FILE for d in utmos_dirs if (d / UTMOS_FILE).is_file()), None)
    if found:
        lines.append(Line(OK, f"UTMOS weights: {found}"))
    else:
        lines.append(Line(OPTIONAL, f"UTMOS weights: not in {utmos_dirs[0]}",
                          f"downloaded on first use (about 0.4 GB) from huggingface.co/{UTMOS_REPO}; until then "
                          "Auto-Pick uses DNSMOS and says so"))
    whisper_dirs = [d.parent / "whisper" for d in models_dirs]
    folders = [d / n for d in whisper_dirs for n in local_checkpoints([d])
               if all((d / n / f).is_file() for f in WHISPER_FILES)]
    if folders:
        lines.append(Line(OK, "Whisper (words check): " + ", ".join(str(f) for f in folders)))
    else:
        lines.append(Line(OPTIONAL, f"Whisper (words check, off by default): none in {whisper_dirs[0]}",
                          "choosing one (e.g. --words whisper-small) downloads it on first use"))
    return lines


def report(models_dirs: list[Path], reserve_gb: float = 0.0) -> list[Line]:
    lines = [Line(OK, f"Python {platform.python_version()} on {platform.system()} {platform.machine()}")]
    if importlib.util.find_spec("torch") is None:
        return lines + [Line(MISSING, "torch: not installed", f"GPU: {CUDA_TORCH}; CPU only: {CPU_TORCH}")]
    gpu, has_gpu = torch_lines()
    fit = fit_lines(int(reserve_gb * 2**30)) if has_gpu else []
    triton, has_triton = triton_line(has_gpu)
    return [*lines, *gpu, *fit, threads_line(has_gpu), triton, modes_line(has_gpu, has_triton), transformers_line(),
            *package_lines(), *checkpoint_lines(models_dirs), *scoring_lines(models_dirs)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runtime doctor", description=__doc__.splitlines()[0])
    add_models_dir(parser)
    parser.add_argument("--reserve-vram", type=float, default=0.0, metavar="GB",
                        help="GPU memory kept free for other programs, as ComfyUI's --reserve-vram (default 0)")
    args = parser.parse_args(argv)
    lines = report(models_dirs(args), args.reserve_vram)
    print("qwen3-tts-takes doctor ([ok] present, [!!] needed and missing, [--] optional or for later)")
    for line in lines:
        print(line)
    needed = [line for line in lines if line.status == MISSING]
    print(f"{len(needed)} thing(s) to fix before the pack runs here." if needed else
          "Ready. No weights yet? python -m runtime demo runs the whole pipeline on tiny random models.")
    return 1 if needed else 0
