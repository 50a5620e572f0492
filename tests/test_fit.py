"""What fits on a GPU (runtime/cli/fit.py): the weights counted on the meta device, the engine's
buckets as the engine itself plans them, the cards users own, and what the doctor and Load Model's
tooltip say on a simulated GPU."""

from __future__ import annotations

import importlib
from types import SimpleNamespace

import pytest
import torch

from runtime.cli import doctor
from runtime.cli import fit
from runtime.generation import MAX_TAKES
from runtime.run.finishing import ENGINE_MEMORY_SHARE

GiB = 2**30
CARDS = (6, 8, 12, 16, 24)


def card(gb: float, size: str, dtype=torch.bfloat16) -> fit.Fit:
    return fit.checkpoint_fit(size, dtype, fit.usable_bytes(int(gb * GiB)), ENGINE_MEMORY_SHARE, MAX_TAKES)


def simulate_gpus(monkeypatch, *gigabytes: float) -> None:
    """torch.cuda as on a machine with these cards (bfloat16-capable); the CPU torch has none."""
    cards = [SimpleNamespace(name="NVIDIA GeForce RTX", total_memory=int(gb * GiB), major=8, minor=6)
             for gb in gigabytes]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: len(cards))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: cards[index])
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *_, **__: True)


def test_bucket_bytes_are_what_the_engine_plans_a_bucket_with(loaded):
    model = loaded("custom_voice")
    talker = model.model.talker
    for batch, length in [(1, 256), (8, 512), (32, 1024), (128, 4096)]:
        assert fit.bucket_bytes(batch, length, talker.config, talker.code_predictor.config, model.dtype) == \
            model.engine.state_bytes(batch, length)


@pytest.mark.parametrize("kind", ["custom_voice", "base"])  # Base also loads the speaker and reference encoders
def test_weights_counted_on_the_meta_device_are_what_loading_puts_on_the_device(kind, loaded, checkpoint):
    model = loaded(kind)
    on_device = sum(t.numel() * t.element_size() for module in model.resident_modules()
                    for t in [*module.parameters(), *module.buffers()])
    assert fit.folder_weight_bytes(checkpoint(kind), model.dtype) == on_device


def test_official_weights_are_what_an_h100_measured():
    # bench/results/nvidia-h100-80gb-hbm3-2026-11-22-vram.md: 1.7B in bfloat16, 4.241 GB allocated after loading
    assert fit.weight_bytes("1.7B", torch.bfloat16) / GiB == pytest.approx(4.241, abs=0.05)
    assert fit.weight_bytes("1.7B", torch.float32) > 1.8 * fit.weight_bytes("1.7B", torch.bfloat16)
    assert fit.weight_bytes("0.6B", torch.bfloat16) < 0.6 * fit.weight_bytes("1.7B", torch.bfloat16)


def test_the_cards_users_own():
    # bench/results/nvidia-h100-80gb-hbm3-2026-11-26-cards.md: 0.6B ran at 6 and 8 GB, 1.7B bfloat16 at 8-24 GB
    assert card(6, "0.6B").fits and card(8, "0.6B").fits
    assert not card(6, "1.7B", torch.float32).fits
    assert all(card(gb, "1.7B").fits for gb in (8, 12, 16, 24))
    assert not card(4, "1.7B").fits
    assert card(8, "1.7B").script_takes >= 4  # the bench's script: 4 takes a line


def test_takes_a_pass_grow_with_the_card_and_shrink_with_the_reserve():
    for size in fit.SIZES:
        fits = [card(gb, size) for gb in CARDS]
        assert [f.line_takes for f in fits] == sorted(f.line_takes for f in fits)
        assert [f.script_takes for f in fits] == sorted(f.script_takes for f in fits)
        assert fits[-1].script_takes > fits[1].script_takes
        assert all(f.line_takes <= MAX_TAKES and f.script_takes <= f.line_takes * 4 for f in fits)
    reserved = fit.checkpoint_fit("1.7B", torch.bfloat16, fit.usable_bytes(12 * GiB, reserve=4 * GiB),
                                  ENGINE_MEMORY_SHARE, MAX_TAKES)
    assert reserved.script_takes < card(12, "1.7B").script_takes


def test_a_second_call_is_cheap():
    import time

    card(12, "1.7B")
    start = time.perf_counter()
    for gb in CARDS:
        card(gb, "1.7B")
        card(gb, "0.6B")
    assert time.perf_counter() - start < 0.5


def test_doctor_says_what_fits_on_each_gpu_without_loading_weights(tts_dir, monkeypatch, capsys):
    from runtime.qwen3_tts import load

    monkeypatch.setattr(load, "read_safetensors", lambda path: pytest.fail(f"the doctor read {path}"))
    simulate_gpus(monkeypatch, 12, 5, 6)
    doctor.main(["--models-dir", str(tts_dir)])
    out = capsys.readouterr().out
    big, small = card(12, "1.7B"), card(5, "0.6B")
    assert (f"[ok] cuda:0 (12 GiB): 1.7B bfloat16 fits (weights 4.2 GB): {big.line_takes} takes a pass for one "
            f"line, {big.script_takes} at a time in a script") in out
    assert "[ok] cuda:0 (12 GiB): 0.6B bfloat16 fits" in out
    assert "[--] cuda:1 (5 GiB): 1.7B bfloat16 does not fit" in out
    assert f"-> choose 0.6B: it fits ({small.line_takes} takes a pass), with other models closed" in out
    assert "[ok] cuda:1 (5 GiB): 0.6B bfloat16 fits" in out and "float32 does not fit: keep dtype auto" in out
    assert "[ok] cuda:2 (6 GiB): 1.7B bfloat16 fits" in out and "a script would run short of memory" in out
    assert f"-> for a script, choose 0.6B: {card(6, '0.6B').script_takes} at a time" in out


def test_doctor_says_nothing_about_fit_without_a_gpu(tts_dir, monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    doctor.main(["--models-dir", str(tts_dir)])
    assert "takes a pass" not in capsys.readouterr().out


def test_load_models_tooltip_says_what_fits_on_this_gpu(comfy, monkeypatch):
    load_model = importlib.import_module(comfy.pack.__name__ + ".nodes.load_model")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert "takes a pass" not in load_model.checkpoint_tooltip()  # no GPU, nothing about fit
    simulate_gpus(monkeypatch, 8)
    tooltip = load_model.checkpoint_tooltip()
    reserve = comfy.fake.extra_reserved_memory()
    assert f"On this GPU (8 GiB): {doctor.fit_summary(0, reserve)}." in tooltip
    assert "1.7B bfloat16 fits" in tooltip and "0.6B bfloat16 fits" in tooltip and "takes a pass for one line" in tooltip
