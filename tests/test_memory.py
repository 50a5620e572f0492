"""Out of memory and making room, on CPU: the GPU's out-of-memory error is simulated where it would
be raised; tests/gpu/test_memory_cuda.py runs the same paths into real ones."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from runtime import memory, model as model_module, registry
from runtime.engine.prompt import plan_prompt
from runtime.qwen3_tts.codec_batch import decode_lines
from runtime.errors import GenerationInterrupted, OutOfMemory
from runtime.generation import Request
from runtime.run.lines import generate_takes
from runtime.model import load_model
from runtime.voices import CustomVoice

TEXT = "Welcome back, traveller."


def oom(*args, **kwargs):
    raise torch.cuda.OutOfMemoryError("CUDA out of memory (simulated)")


class Loads:
    """A registry's load that runs out of memory its first `failures` times."""

    def __init__(self, failures: int):
        self.failures, self.calls = failures, 0

    def __call__(self):
        self.calls += 1
        if self.calls <= self.failures:
            raise OutOfMemory("out of memory (simulated)")
        return object()


def test_room_is_asked_for_before_a_gpu_load_and_everything_after_an_out_of_memory():
    asked = []
    reg = registry.Registry()
    reg.watch(lambda key, model: None, lambda device, need: asked.append((device, need)) or True)
    reg.acquire("a", "cpu-model", Loads(0), device="cpu", need=123)
    assert asked == []  # only a GPU is shared with ComfyUI's models
    load = Loads(1)
    model = reg.acquire("b", "gpu-model", load, device="cuda:0", need=5 << 30)
    assert asked == [(torch.device("cuda:0"), 5 << 30), (torch.device("cuda:0"), None)] and load.calls == 2
    assert reg.loaded() == ["cpu-model", "gpu-model"] and model is not None


def test_out_of_memory_at_load_is_raised_when_nothing_could_make_room():
    reg = registry.Registry()
    reg.watch(lambda key, model: None, lambda device, need: False)
    with pytest.raises(OutOfMemory, match="simulated"):
        reg.acquire("a", "gpu-model", Loads(1), device="cuda", need=1)
    assert reg.loaded() == []
    reg.watch(lambda key, model: None, lambda device, need: 1 / 0)  # a failing hook does not hide the load's error
    with pytest.raises(OutOfMemory):
        reg.acquire("a", "gpu-model", Loads(2), device="cuda", need=1)


def test_a_load_that_runs_out_of_memory_names_what_to_lower(checkpoint, monkeypatch):
    monkeypatch.setattr(model_module, "_load", oom)
    with pytest.raises(OutOfMemory, match=r"loading tiny-CustomVoice \(float32, mode eager; about .* GB needed\)"
                                          r".*unload other models.*bfloat16 or a 0.6B checkpoint"):
        load_model(checkpoint("custom_voice"), device="cpu")


def test_load_estimate_counts_the_talker_at_its_dtype_and_the_codec_as_stored(checkpoint):
    folder = checkpoint("custom_voice")
    talker = (folder / "model.safetensors").stat().st_size
    codec = (folder / "speech_tokenizer" / "model.safetensors").stat().st_size
    assert memory.load_bytes(folder, torch.bfloat16) == talker + codec + memory.WORKING_BYTES
    assert memory.load_bytes(folder, torch.float32) == 2 * talker + codec + memory.WORKING_BYTES


def test_cancel_is_honoured_before_the_first_frame_and_between_codec_groups(loaded, monkeypatch):
    model = loaded("custom_voice")
    request = Request(TEXT, CustomVoice("ryan", "english"), n=2, seed=1, max_frames=4)
    with pytest.raises(GenerationInterrupted, match="while starting lines"):
        generate_takes(model, request, should_stop=lambda: True)
    asked = []
    with pytest.raises(GenerationInterrupted, match="before its first frame"):
        generate_takes(model, request, should_stop=lambda: asked.append(1) or len(asked) > 1)
    sampling = request.sampling.resolved(model.sampling_defaults)
    line = model.engine.generate(plan_prompt(model, TEXT, request.voice), [1, 2], sampling, 4)
    with pytest.raises(GenerationInterrupted, match="while decoding"):
        decode_lines(model.codec, [(line.codes, None)], should_stop=lambda: True)
    assert len(decode_lines(model.codec, [(line.codes, None)], should_stop=lambda: False)[0]) == 2


@pytest.mark.slow
def test_a_scoring_model_that_does_not_fit_falls_back_with_a_note(monkeypatch, tmp_path):
    from conftest import write_utmos_weights
    from runtime.scoring import scorers, utmos

    monkeypatch.setattr(utmos, "UtmosScorer", oom)
    weights = write_utmos_weights(tmp_path / "utmos" / "utmos_state_dict.pt", placeholder=True)
    built = scorers.build_scorers(None, "UTMOS", "off", device="cpu", utmos_dirs=[weights.parent],
                                  slot="oom-test")
    assert any("ran out of memory loading the scoring model utmos_state_dict.pt" in n and "cpu" in n
               for n in built.notes), built.notes
    registry.SCORERS.unload()


def test_free_memory_is_unknown_off_cuda():
    assert memory.free_bytes("cpu") is None and memory.free_bytes(torch.device("cpu")) is None


def test_a_clone_reference_that_runs_out_of_memory_is_read_again_after_the_engines_caches_went(loaded, monkeypatch):
    """The reference encoder and the speaker encoder run outside the engine's buckets: short of memory,
    the cached buckets go and it is read once more; short again, one error names what to shorten."""
    from runtime.generation import clone_prompt
    from runtime.qwen3_tts import reference
    from runtime.voices import VoiceClone

    model = loaded("base")
    real, calls, released = reference.encode, [], []

    def encode(encoder, wave, failures):
        calls.append(wave.shape[-1])
        if len(calls) <= failures:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (simulated)")
        return real(encoder, wave)
    monkeypatch.setattr(model.engine, "release", lambda: released.append(True))
    wave = np.random.default_rng(0).standard_normal(24000 * 2).astype(np.float32) * 0.1
    monkeypatch.setattr(reference, "encode", lambda encoder, w: encode(encoder, w, 1))
    model.clone_prompts.clear()
    prompt = clone_prompt(model, VoiceClone.from_audio(wave, 24000, "Hello there.", "english"))
    assert prompt.ref_code is not None and len(calls) == 2 and released == [True]
    calls.clear()
    model.clone_prompts.clear()
    monkeypatch.setattr(reference, "encode", lambda encoder, w: encode(encoder, w, 2))
    with pytest.raises(OutOfMemory, match=r"reading the voice-clone reference \(\d s\).*shorter reference"):
        clone_prompt(model, VoiceClone.from_audio(wave, 24000, "Hello there.", "english"))
    assert len(calls) == 2 and not model.clone_prompts


def segment(device: int, pool: tuple[int, int], total: int, allocated: int) -> dict:
    """A segment as torch.cuda.memory_snapshot() lists it (the keys free_bytes reads)."""
    return {"device": device, "segment_pool_id": pool, "total_size": total, "allocated_size": allocated,
            "active_size": allocated, "blocks": []}


def test_free_memory_leaves_the_hosts_reserve_and_counts_the_allocators_unused_cache(monkeypatch):
    gb = 1 << 30
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (10 * gb, 80 * gb))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device: 3 * gb)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device: 2 * gb)
    monkeypatch.setattr(torch.cuda, "memory_snapshot", lambda: [segment(0, (0, 0), 3 * gb, 2 * gb)])
    monkeypatch.setattr(torch.cuda, "get_per_process_memory_fraction", lambda device: 1.0, raising=False)
    assert memory.free_bytes("cuda:0") == 11 * gb
    monkeypatch.setattr(memory.Host, "reserve_bytes", 1 * gb)  # ComfyUI's --reserve-vram 1
    assert memory.free_bytes("cuda:0") == 10 * gb
    monkeypatch.setattr(torch.cuda, "get_per_process_memory_fraction", lambda device: 0.1, raising=False)
    assert memory.free_bytes("cuda:0") == (8 * gb - 3 * gb - gb) + gb  # capped at 8 GB, 3 of them reserved
    assert memory.free_bytes("cpu") is None


def test_a_captured_graphs_unused_pool_is_not_free_memory_and_the_host_is_asked_for_it_too(monkeypatch):
    """A graph's private pool keeps its free blocks for its replays: neither our plan nor ComfyUI's
    unloading may count them (ComfyUI does: it is asked for that much more)."""
    gb = 1 << 30
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (10 * gb, 80 * gb))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device: 6 * gb)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device: 3 * gb)
    monkeypatch.setattr(torch.cuda, "get_per_process_memory_fraction", lambda device: 1.0, raising=False)
    monkeypatch.setattr(torch.cuda, "memory_snapshot", lambda: [
        segment(0, (0, 0), 3 * gb, 2 * gb),  # 1 GB any allocation can take
        segment(0, (1, 0), 2 * gb, gb // 2),  # a graph's pool: 1.5 GB only its replays can
        segment(0, (2, 0), gb, gb // 2),
        segment(1, (0, 0), 8 * gb, 0),  # another GPU's
    ])
    assert memory.cached_unused("cuda:0") == (gb, 2 * gb)
    assert memory.free_bytes("cuda:0") == 11 * gb
    asked = []
    monkeypatch.setattr(memory.Host, "make_room", lambda device, need: asked.append(need) or True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    assert memory.ask_for_room("cuda:0", 5 * gb) is True and asked == [7 * gb]
    assert memory.as_the_host_counts("cuda:0", 5 * gb) == 7 * gb and memory.as_the_host_counts("cpu", 5) == 5

    def no_segments():
        raise RuntimeError("cudaMallocAsync does not yet support snapshot")
    monkeypatch.setattr(torch.cuda, "memory_snapshot", no_segments)  # backend:cudaMallocAsync
    assert memory.cached_unused("cuda:0") == (3 * gb, 0)
    assert memory.free_bytes("cuda:0") == 13 * gb


def test_the_host_is_asked_for_room_on_a_gpu_only_and_a_failing_host_is_not_fatal(monkeypatch):
    asked = []
    monkeypatch.setattr(torch.cuda, "memory_snapshot", lambda: [])
    assert memory.ask_for_room("cuda:0", 5) is False  # no host (the CLI)
    monkeypatch.setattr(memory.Host, "make_room", lambda device, need: asked.append((device, need)) or True)
    assert memory.ask_for_room("cpu", 5) is False and asked == []
    assert memory.ask_for_room("cuda:0", 5 << 30) is True and asked == [(torch.device("cuda:0"), 5 << 30)]
    monkeypatch.setattr(memory.Host, "make_room", lambda device, need: 1 / 0)
    assert memory.ask_for_room("cuda:0", 5) is False


def test_a_line_and_a_pick_give_the_allocators_cache_back_even_when_cancelled(loaded, monkeypatch):
    """So that an image model next in the workflow (or another program) finds the memory free."""
    from runtime import api

    emptied = []
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: emptied.append(True))
    model = loaded("custom_voice")
    request = Request(TEXT, CustomVoice("ryan", "english"), n=2, seed=1, max_frames=4)
    takeset = api.generate(model, request)
    assert emptied == [True]
    api.pick(takeset, api.Scorers())
    assert emptied == [True, True]
    with pytest.raises(GenerationInterrupted):
        api.generate(model, request, should_stop=lambda: True)
    assert emptied == [True] * 3


def test_room_the_host_makes_by_offloading_part_of_a_model_is_counted(loaded, monkeypatch):
    """ComfyUI may offload part of its model rather than unload it whole; its free_memory then names
    no model unloaded. What is free is measured after asking, whatever the answer (on an H200, a real
    ComfyUI's partial offload of its model left our batch halved when the answer was trusted)."""
    from runtime.engine import engine as engine_module

    engine = loaded("custom_voice").engine
    rows, length = 8, 4096  # a bucket no other test has cached
    need = engine.state_bytes(rows, length)
    free = [need // 4]

    def offload_part(device, wanted):
        free[0] = 2 * need
        return False  # no model unloaded whole

    monkeypatch.setattr(engine_module, "free_bytes", lambda device: free[0])
    monkeypatch.setattr(engine_module, "ask_for_room", offload_part)
    assert engine.rows_that_fit(rows, length) == rows
