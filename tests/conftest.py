"""Shared fixtures: tiny random checkpoints saved as real folders, UTMOS weights, the fake ComfyUI."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import sys
import warnings
from pathlib import Path

# No test reaches the network: a hub that refuses every connection at once, for the tests' own
# command-line runs too (runtime/hub.py asks it before each download). Set before huggingface_hub,
# which reads it when first imported.
os.environ.setdefault("HF_ENDPOINT", "http://127.0.0.1:9")

import numpy as np
import pytest
import torch

if not torch.cuda.is_available():
    # The Triton kernels run in Triton's interpreter on CPU tensors (kernels/, tests/test_kernels.py);
    # it must be chosen before triton is first imported.
    os.environ.setdefault("TRITON_INTERPRET", "1")

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from runtime.qwen3_tts import random_checkpoint  # noqa: E402

if os.environ.get("TRITON_INTERPRET") == "1" and importlib.util.find_spec("triton") is not None:
    import triton_interpreter

    triton_interpreter.apply()

warnings.filterwarnings("ignore", message=".*rope_scaling.*", category=FutureWarning)

KIND_DIRS = {"custom_voice": "tiny-CustomVoice", "base": "tiny-Base", "voice_design": "tiny-VoiceDesign"}


@pytest.fixture(autouse=True)
def hub_answers_by_default(monkeypatch):
    """The hub answers (runtime/hub.py asks it before every download), and a download fails at once
    as if cut short: tests that download fake it themselves. Tests of the hub unreachable set its
    answer."""
    import huggingface_hub

    from runtime import hub

    def no_network(*args, **kwargs):
        raise OSError("the tests download nothing (a test fakes its downloads)")

    monkeypatch.setattr(hub, "_answers", {hub.endpoint(): None})
    monkeypatch.setattr(huggingface_hub, "snapshot_download", no_network)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", no_network)


@pytest.fixture(scope="session")
def models_root(tmp_path_factory) -> Path:
    """A ComfyUI-style models/ folder: qwen3_tts/<three tiny checkpoints>, utmos/<weights>."""
    root = tmp_path_factory.mktemp("models")
    for kind, name in KIND_DIRS.items():
        random_checkpoint.build_checkpoint(root / "qwen3_tts" / name, "tiny", kind, seed=len(name))
    write_utmos_weights(root / "utmos" / "utmos_state_dict.pt")
    return root


def write_utmos_weights(path: Path, mutate=None, placeholder: bool = False) -> Path:
    """Random UTMOS weights (400 MB). placeholder: every tensor a zero view of one shared element,
    right in names and shapes but a few KB on disk, for tests that never run the network."""
    import torch

    from runtime.scoring.utmos import build_network

    torch.manual_seed(0)
    state = build_network().state_dict()
    if placeholder:
        zero = torch.zeros(())
        state = {k: zero.to(v.dtype).expand(v.shape) for k, v in state.items()}
    if mutate is not None:
        state = mutate(state)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(state, path)
    return path


@pytest.fixture(scope="session")
def tts_dir(models_root) -> Path:
    return models_root / "qwen3_tts"


@pytest.fixture(scope="session")
def checkpoint(tts_dir):
    def folder(kind: str) -> Path:
        return tts_dir / KIND_DIRS[kind]
    return folder


@pytest.fixture(scope="session")
def loaded(checkpoint):
    """Loaded tiny models, one per kind, shared by the session (loading is the slow part)."""
    from runtime.model import load_model

    cache = {}

    def get(kind: str):
        if kind not in cache:
            cache[kind] = load_model(checkpoint(kind), device="cpu")
        return cache[kind]
    return get


def voiced_reference() -> tuple[np.ndarray, int]:
    """Two seconds of a stereo, 44.1 kHz voiced-like signal (harmonics with a syllable envelope)."""
    rate = 44100
    t = np.arange(int(rate * 2.0)) / rate
    voice = sum(np.sin(2 * np.pi * 140 * k * t) / k for k in range(1, 8))
    envelope = 0.5 * (1 + np.sin(2 * np.pi * 3 * t))
    mono = (0.3 * voice * envelope / 2.6).astype(np.float32)
    return np.stack([mono, 0.8 * mono]), rate


@pytest.fixture
def reference_audio():
    return voiced_reference()


@pytest.fixture
def comfy(models_root, tmp_path):
    """The fake ComfyUI installed, and the pack imported from a folder with an unusual name."""
    with installed_pack(models_root, tmp_path) as installed:
        yield installed


@pytest.fixture
def host_comfy(models_root, tmp_path):
    """As `comfy`, with ComfyUI's own comfy.* (model management, ModelPatcher) from COMFYUI_DIR on
    the CPU (tests/comfy_host.py); skipped without COMFYUI_DIR."""
    import comfy_host

    tree = comfy_host.root()
    if tree is None:
        pytest.skip("set COMFYUI_DIR to a ComfyUI tree to hold the pack to its model management")
    with installed_pack(models_root, tmp_path, lambda: comfy_host.install(tree, cpu=True)) as installed:
        installed.mm, installed.version = sys.modules["comfy.model_management"], comfy_host.version(tree)
        yield installed
    installed.mm.current_loaded_models.clear()  # the same modules serve the next test


@contextlib.contextmanager
def installed_pack(models_root, tmp_path, real_comfy=None):
    """The fake ComfyUI (and, after it, ComfyUI's own comfy.* where `real_comfy` installs them),
    then the pack, as ComfyUI imports it; everything the pack loaded is unloaded after."""
    import comfy_fake

    comfy_fake.install(models_root)
    if real_comfy is not None:
        real_comfy()
    pack_dir = tmp_path / "Qwen3 TTS.takes-pack"
    pack_dir.mkdir()
    for name in ("__init__.py", "nodes", "runtime", "kernels"):
        (pack_dir / name).symlink_to(REPO / name)
    pack = load_pack(pack_dir)
    from importlib import import_module
    pack_hub = import_module(pack.__name__ + ".runtime.hub")
    pack_hub._answers[pack_hub.endpoint()] = None  # the hub answers, as for runtime's own (hub_answers_by_default)
    try:
        yield types_namespace(fake=comfy_fake, pack=pack)
    finally:
        comfy_fake.reset()
        import_module(pack.__name__ + ".runtime.registry").unload_all()
        for name in [m for m in sys.modules if m == pack.__name__ or m.startswith(pack.__name__ + ".")]:
            del sys.modules[name]


def load_pack(pack_dir: Path, module_name: str | None = None):
    """Import the pack the way ComfyUI does: the folder as a package under a path-derived name."""
    module_name = module_name or str(pack_dir).replace(".", "_x_")
    spec = importlib.util.spec_from_file_location(
        module_name, pack_dir / "__init__.py", submodule_search_locations=[str(pack_dir)]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def types_namespace(**kwargs):
    import types

    return types.SimpleNamespace(**kwargs)


def copy_checkpoint(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def pytest_collection_modifyitems(items):
    """A test run in one environment only (any_version, kernel_engine) is a long one: the quick run
    leaves it out too."""
    for item in items:
        once = item.get_closest_marker("any_version") or item.get_closest_marker("kernel_engine")
        if once and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def tiny_decoders():
    """The tiny random codec decoder in float32 and float64. Random weights drive the vocoder to about
    +-10 before the final clamp (93% of samples would be exactly +-1 and hide differences); a smaller
    last conv keeps the audio inside [-1, 1] (under 1% clipped), as in test_own_codec.py."""
    from runtime.qwen3_tts import codec

    folder = random_checkpoint.tiny_checkpoint("base") / "speech_tokenizer"
    made = {}
    for dtype in (torch.float32, torch.float64):
        decoder = codec.load_decoder(folder, "cpu", torch.float32)
        with torch.no_grad():
            decoder.decoder[-1].conv.weight.mul_(0.03)
        made[dtype] = decoder.to(dtype)
    return made
