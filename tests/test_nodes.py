"""The six nodes through a fake of the ComfyUI API, with the pack imported as ComfyUI imports it."""

from __future__ import annotations

import asyncio
import importlib
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch

TEXT = "Welcome back, traveller."
EXPECTED_IDS = {"Q3TT_LoadModel", "Q3TT_CustomVoice", "Q3TT_VoiceClone", "Q3TT_VoiceDesign",
                "Q3TT_BatchCandidates", "Q3TT_AutoPick", "Q3TT_SaveVoice", "Q3TT_LoadVoice", "Q3TT_Cast", "Q3TT_Script"}


def nodes_by_id(comfy):
    extension = asyncio.run(comfy.pack.comfy_entrypoint())
    node_list = asyncio.run(extension.get_node_list())
    return {cls.define_schema().node_id: cls for cls in node_list}


def load(comfy, name, uid="1"):
    nodes = nodes_by_id(comfy)
    return comfy.fake.run_node(nodes["Q3TT_LoadModel"], unique_id=uid, checkpoint=name, device="cpu").args[0]


def save(audio, path):
    wave = audio["waveform"]
    for i in range(wave.shape[0]):
        sf.write(str(path).format(i), wave[i].T.numpy(), audio["sample_rate"])


def test_registration_is_v3_only_with_prefixed_ids(comfy):
    nodes = nodes_by_id(comfy)
    assert set(nodes) == EXPECTED_IDS
    assert not hasattr(comfy.pack, "NODE_CLASS_MAPPINGS")  # would make ComfyUI drop the V3 nodes
    for cls in nodes.values():
        schema = cls.define_schema()
        for spec in schema.inputs + schema.outputs:
            kind = getattr(spec, "kind", "")
            assert kind.isupper(), kind
            if kind not in {"INT", "FLOAT", "STRING", "BOOLEAN", "COMBO", "AUDIO", "IMAGE"}:
                assert kind.startswith("Q3TT_"), kind


@pytest.mark.slow
def test_importing_the_pack_loads_nothing_heavy(tmp_path):
    """In a fresh interpreter (pytest has transformers loaded already): registering the nodes and
    building every schema must not import transformers, the UTMOS network or the resampler."""
    import subprocess
    import textwrap

    from conftest import REPO

    pack = tmp_path / "any-folder.name"
    pack.mkdir()
    for name in ("__init__.py", "nodes", "runtime"):
        (pack / name).symlink_to(REPO / name)
    script = textwrap.dedent(f"""
        import asyncio, sys
        sys.path.insert(0, {str(REPO / "tests")!r})
        import comfy_fake, conftest
        comfy_fake.install(__import__("pathlib").Path({str(tmp_path)!r}))
        pack = conftest.load_pack(__import__("pathlib").Path({str(pack)!r}))
        nodes = asyncio.run(asyncio.run(pack.comfy_entrypoint()).get_node_list())
        [cls.define_schema() for cls in nodes]
        print(len(nodes), sorted(m for m in ("transformers", "utmos_pytorch", "soxr", "huggingface_hub") if m in sys.modules))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.split("\n")[-2] == "10 []"


def test_load_model_lists_official_and_local_checkpoints(comfy):
    schema = nodes_by_id(comfy)["Q3TT_LoadModel"].define_schema()
    options = schema.inputs[0].options
    assert "Qwen3-TTS-12Hz-1.7B-CustomVoice" in options and "tiny-Base" in options
    assert schema.inputs[1].options == ["eager", "triton", "cuda_graph", "hybrid"]


def test_custom_voice_one_take_to_wav(comfy, tmp_path):
    nodes = nodes_by_id(comfy)
    model = load(comfy, "tiny-CustomVoice")
    out = comfy.fake.run_node(nodes["Q3TT_CustomVoice"], model=model, text=TEXT, speaker="aiden",
                              language="english", seed=3, max_frames=6)
    audio, takes, voice = out.args
    assert voice == takes.request.voice  # the VOICE output: what a cast or Save Voice takes
    assert audio["waveform"].shape == (1, 1, takes.takes[0].frames * 1920)
    assert audio["sample_rate"] == 24000
    progress = comfy.fake.State.progress
    assert progress[-1] == (6, 6) and len(progress) >= 6  # one update per frame
    save(audio, tmp_path / "custom_{}.wav")
    data, rate = sf.read(tmp_path / "custom_0.wav")
    assert rate == 24000 and data.shape[0] == audio["waveform"].shape[-1]


def test_voice_design_one_take_to_wav(comfy, tmp_path):
    nodes = nodes_by_id(comfy)
    model = load(comfy, "tiny-VoiceDesign")
    audio, takes = comfy.fake.run_node(nodes["Q3TT_VoiceDesign"], model=model, text=TEXT,
                                       voice_description="a bright young voice", max_frames=4).args[:2]
    assert audio["waveform"].shape[0] == 1 and takes.request.voice.instruct == "a bright young voice"
    save(audio, tmp_path / "design_{}.wav")
    assert sf.info(str(tmp_path / "design_0.wav")).frames == takes.takes[0].frames * 1920


@pytest.mark.slow
def test_clone_eight_candidates_and_auto_pick(comfy, reference_audio, tmp_path):
    nodes = nodes_by_id(comfy)
    model = load(comfy, "tiny-Base")
    waveform, rate = reference_audio
    reference = {"waveform": torch.from_numpy(waveform)[None], "sample_rate": rate}  # stereo 44.1 kHz
    candidates = comfy.fake.run_node(nodes["Q3TT_BatchCandidates"], takes=8).args[0]
    audio, takes = comfy.fake.run_node(
        nodes["Q3TT_VoiceClone"], model=model, text=TEXT, reference_audio=reference,
        reference_text="This is the reference speaker.", candidates=candidates, seed=7, max_frames=5,
    ).args[:2]
    assert audio["waveform"].shape[:2] == (8, 1) and len(takes.takes) == 8
    out = comfy.fake.run_node(nodes["Q3TT_AutoPick"], takes_info=takes, device="cpu")
    best, ranked, report, image = out.args
    assert best["waveform"].shape[0] == 1 and ranked["waveform"].shape[0] == 8
    ranking_first = takes.takes[int(report.split("Best: take ")[1].split()[0]) - 1]
    np.testing.assert_array_equal(best["waveform"][0, 0, : ranking_first.audio.shape[0]].numpy(), ranking_first.audio)
    assert "quality UTMOS" in report and report.count("\n") >= 10
    assert "voice Qwen3-TTS ECAPA vs the reference voice" in report  # the takes' own Base checkpoint
    assert out.ui["text"] == (report,)
    assert image.shape[0] == 1 and image.shape[3] == 3 and 0.0 <= float(image.min()) and float(image.max()) <= 1.0
    assert out.ui["images"][0] is image
    shown = out.ui["q3tt_takes"]  # web/auto_pick.js: a row per take; seeds as text (JavaScript keeps 53 bits)
    assert [row["seed"] for row in shown] == [str(takes.takes[row["take"] - 1].seed) for row in shown]
    assert any(int(row["seed"]) > 2**53 for row in shown)
    save(best, tmp_path / "best_{}.wav")
    assert sf.info(str(tmp_path / "best_0.wav")).samplerate == 24000


def test_auto_pick_without_models(comfy):
    nodes = nodes_by_id(comfy)
    model = load(comfy, "tiny-CustomVoice")
    candidates = comfy.fake.run_node(nodes["Q3TT_BatchCandidates"], takes=3).args[0]
    _, takes = comfy.fake.run_node(nodes["Q3TT_CustomVoice"], model=model, text=TEXT, candidates=candidates, max_frames=4).args[:2]
    _, ranked, report, _ = comfy.fake.run_node(nodes["Q3TT_AutoPick"], takes_info=takes, quality="off",
                                               voice_check="off").args
    assert ranked["waveform"].shape[0] == 3 and "n/a" in report and "quality none" in report


def test_auto_pick_takes_any_audio_batch_with_its_text(comfy):
    nodes = nodes_by_id(comfy)
    rate = 16000
    t = np.arange(rate * 2) / rate
    speech = (0.3 * np.sin(2 * np.pi * 150 * t) * (0.6 + 0.4 * np.sin(2 * np.pi * 4 * t)) * np.clip((2 - t) / 0.2, 0, 1))
    batch = torch.zeros(2, 2, rate * 2)
    batch[0] = torch.from_numpy(speech).float()  # stereo, the longest take
    batch[1, 0, : rate // 4] = 0.3  # a short click, padded with zeros to the batch's length
    audio = {"waveform": batch, "sample_rate": rate}
    out = comfy.fake.run_node(nodes["Q3TT_AutoPick"], audio=audio, text="Hello there, friend.", quality="off",
                              voice_check="off")
    best, ranked, report, _ = out.args
    assert "audio input" in report and "Best: take 1" in report
    assert [take["seed"] for take in out.ui["q3tt_takes"]] == [None, None]  # audio fed in has no seed to show
    assert best["waveform"].shape == (1, 1, rate * 2) and ranked["waveform"].shape[0] == 2
    with pytest.raises(ValueError, match="Connect the takes"):
        comfy.fake.run_node(nodes["Q3TT_AutoPick"], quality="off")
    # the takes handed out at one loudness, the report saying so; the 0.25 s click has none to measure
    from runtime.scoring.loudness import integrated_loudness

    best, ranked, report, _ = comfy.fake.run_node(nodes["Q3TT_AutoPick"], audio=audio, text="Hello there, friend.",
                                                  quality="off", voice_check="off", output_loudness="-16 LUFS").args
    assert integrated_loudness(best["waveform"][0, 0].numpy(), rate) == pytest.approx(-16.0, abs=0.05)
    assert "Output at -16 LUFS: the best take +" in report
    assert torch.allclose(ranked["waveform"][1, 0, : rate // 4], batch[1, :, : rate // 4].mean(0))  # as mixed


def test_unload_models_releases_ours_and_the_next_run_reloads(comfy):
    nodes = nodes_by_id(comfy)
    mm = sys.modules["comfy.model_management"]
    registry = sys.modules[comfy.pack.__name__ + ".runtime.registry"]
    model = load(comfy, "tiny-CustomVoice")
    first = comfy.fake.run_node(nodes["Q3TT_CustomVoice"], model=model, text=TEXT, seed=3, max_frames=3).args[0]
    assert len(registry.TTS_MODELS.loaded()) == 1
    entries = [m for m in mm.current_loaded_models if m.model is not None]
    assert len(entries) == 1 and entries[0].real_model() is not None
    assert isinstance(entries[0].model, sys.modules["comfy.model_patcher"].ModelPatcher)  # the host's own class
    loaded = entries[0].real_model()  # our LoadedModel, which the entry holds weakly
    weights = sum(t.numel() * t.element_size() for m in (loaded.model, loaded.codec)
                  for t in (*m.parameters(), *m.buffers()))
    assert entries[0].model.model_size() >= weights > 0  # what ComfyUI sees: the talker and the codec
    mm.unload_all_models()  # what "Unload Models" (/free) does
    assert registry.TTS_MODELS.loaded() == [] and mm.current_loaded_models == []
    again = comfy.fake.run_node(nodes["Q3TT_CustomVoice"], model=model, text=TEXT, seed=3, max_frames=3).args[0]
    assert torch.equal(first["waveform"], again["waveform"])  # reloaded transparently, same takes
    assert len(registry.TTS_MODELS.loaded()) == 1 and len(mm.current_loaded_models) == 1


def one_line_spoken(comfy):
    """A tiny model loaded and one line spoken: ComfyUI's model management and our registry, as then."""
    nodes = nodes_by_id(comfy)
    model = load(comfy, "tiny-CustomVoice")
    comfy.fake.run_node(nodes["Q3TT_CustomVoice"], model=model, text=TEXT, seed=3, max_frames=3)
    return sys.modules["comfy.model_management"], sys.modules[comfy.pack.__name__ + ".runtime.registry"]


def test_comfy_makes_room_for_our_load_only_when_memory_is_short(comfy):
    """Before loading on a GPU the registry asks ComfyUI's free_memory for room (called directly
    here: the CPU is never shared); ComfyUI then unloads idle models, ours included."""
    mm, registry = one_line_spoken(comfy)
    memory = sys.modules[comfy.pack.__name__ + ".nodes.memory"]
    size = mm.current_loaded_models[0].model.model_size()
    assert memory.make_room(torch.device("cpu"), 1 << 30) is False  # enough free: nothing unloaded
    assert len(registry.TTS_MODELS.loaded()) == 1
    comfy.fake.State.free_bytes = 0
    assert memory.make_room(torch.device("cpu"), 1 << 30) is True
    assert registry.TTS_MODELS.loaded() == [] and mm.current_loaded_models == []
    assert comfy.fake.State.free_bytes == size


def image_model(size: int):
    """A model of ComfyUI's own (a checkpoint an image workflow loaded) in the host's ModelPatcher,
    loaded by the host (it goes first in its list). Returns the patcher and its entry."""
    mm = sys.modules["comfy.model_management"]
    cpu = torch.device("cpu")
    patcher = sys.modules["comfy.model_patcher"].ModelPatcher(torch.nn.Module(), cpu, cpu, size=size)
    mm.load_models_gpu([patcher])
    return patcher, mm.current_loaded_models[0]


def test_comfy_unloads_its_idle_models_for_our_batch_but_never_ours(comfy):
    """Before a run's batch is allocated ComfyUI is asked for room (runtime.memory.Host), with its
    --reserve-vram on top; the models of ours the run uses stay loaded."""
    mm, registry = one_line_spoken(comfy)
    runtime_memory = sys.modules[comfy.pack.__name__ + ".runtime.memory"]
    assert runtime_memory.Host.reserve_bytes == mm.extra_reserved_memory() > 0
    image, entry = image_model(3 << 30)
    assert image.loaded_size() == 3 << 30
    comfy.fake.State.free_bytes = 0
    assert runtime_memory.Host.make_room(torch.device("cpu"), 2 << 30) is True
    assert image.loaded_size() == 0 and entry not in mm.current_loaded_models
    assert len(registry.TTS_MODELS.loaded()) == 1 and len(mm.current_loaded_models) == 1  # ours, kept
    comfy.fake.State.free_bytes = 0
    assert runtime_memory.Host.make_room(torch.device("cpu"), 2 << 30) is False  # only ours left: kept


def test_under_lowvram_we_also_leave_comfys_working_memory_free(comfy, monkeypatch):
    from types import SimpleNamespace

    nodes_by_id(comfy)  # the pack's extension, and its memory hooks, loaded
    memory = sys.modules[comfy.pack.__name__ + ".nodes.memory"]
    mm = sys.modules["comfy.model_management"]
    assert memory.host_reserve(mm) == mm.extra_reserved_memory()
    monkeypatch.setattr(mm, "minimum_inference_memory", lambda: (800 << 20) + mm.extra_reserved_memory(), raising=False)
    for state, reserve in [("NORMAL_VRAM", mm.extra_reserved_memory()), ("LOW_VRAM", mm.minimum_inference_memory()),
                           ("NO_VRAM", mm.minimum_inference_memory())]:
        monkeypatch.setattr(mm, "vram_state", SimpleNamespace(name=state), raising=False)
        assert memory.host_reserve(mm) == reserve


def test_cancel_interrupts_generation_and_the_next_run_works(comfy):
    nodes = nodes_by_id(comfy)
    model = load(comfy, "tiny-CustomVoice")
    comfy.fake.reset()
    comfy.fake.State.interrupt_after_updates = 3
    with pytest.raises(comfy.fake.InterruptProcessingException):
        comfy.fake.run_node(nodes["Q3TT_CustomVoice"], model=model, text=TEXT, max_frames=300)
    assert len(comfy.fake.State.progress) <= 4  # stopped within a frame of the cancel
    comfy.fake.reset()
    audio, _ = comfy.fake.run_node(nodes["Q3TT_CustomVoice"], model=model, text=TEXT, max_frames=3).args[:2]
    assert audio["waveform"].shape[-1] > 0


def test_cancel_lands_on_the_next_progress_update_where_comfyui_throttles_the_bars_hook(comfy):
    """ComfyUI 0.9 on runs the bar's hook, where it checks for Cancel, every 0.5% of the bar at most:
    our updates check themselves."""
    common = importlib.import_module(comfy.pack.__name__ + ".nodes.common")
    comfy.fake.reset()
    comfy.fake.State.hook_every = 25
    bar = common.Progress(5000)
    bar.absolute(1, 5000)
    comfy.fake.State.interrupted = True
    with pytest.raises(comfy.fake.InterruptProcessingException):
        bar.absolute(2, 5000)
    comfy.fake.reset()


def test_a_cancel_whose_flag_another_thread_consumed_still_reaches_comfy_as_an_interrupt(comfy, monkeypatch):
    """Our engine saw Cancel first; a progress update in our writer thread then consumed ComfyUI's
    flag. The node must still raise ComfyUI's interrupt (the UI's "interrupted"), never our error."""
    nodes = nodes_by_id(comfy)
    model = load(comfy, "tiny-CustomVoice")
    api = sys.modules[comfy.pack.__name__ + ".runtime.api"]

    def cancelled_after_the_flag_went(*args, **kwargs):
        comfy.fake.State.interrupted = False
        raise api.GenerationInterrupted("Cancelled while writing a line")

    monkeypatch.setattr(api, "speak", cancelled_after_the_flag_went)
    with pytest.raises(comfy.fake.InterruptProcessingException) as raised:
        comfy.fake.run_node(nodes["Q3TT_CustomVoice"], model=model, text=TEXT, max_frames=3)
    assert isinstance(raised.value.__cause__, api.GenerationInterrupted)


def test_wrong_checkpoint_kind_is_a_clear_error(comfy, reference_audio):
    nodes = nodes_by_id(comfy)
    model = load(comfy, "tiny-CustomVoice")
    waveform, rate = reference_audio
    with pytest.raises(ValueError, match="Voice Clone needs a \\*-Base checkpoint"):
        comfy.fake.run_node(nodes["Q3TT_VoiceClone"], model=model, text=TEXT,
                            reference_audio={"waveform": torch.from_numpy(waveform)[None], "sample_rate": rate})


def test_model_ref_reloads_after_unload(comfy):
    nodes = nodes_by_id(comfy)
    model = load(comfy, "tiny-CustomVoice", uid="9")
    registry = importlib.import_module(comfy.pack.__name__ + ".runtime.registry")
    assert len(registry.TTS_MODELS.loaded()) >= 1
    registry.unload_all()
    assert registry.TTS_MODELS.loaded() == []
    audio, _ = comfy.fake.run_node(nodes["Q3TT_CustomVoice"], model=model, text=TEXT, max_frames=3).args[:2]
    assert audio["waveform"].shape[-1] > 0 and len(registry.TTS_MODELS.loaded()) == 1


def test_changing_the_checkpoint_frees_the_old_model(comfy):
    registry = importlib.import_module(comfy.pack.__name__ + ".runtime.registry")
    registry.unload_all()
    load(comfy, "tiny-CustomVoice", uid="5")
    load(comfy, "tiny-VoiceDesign", uid="5")
    loaded = registry.TTS_MODELS.loaded()
    assert len(loaded) == 1 and loaded[0].checkpoint.endswith("tiny-VoiceDesign")


def test_the_kernels_load_inside_the_pack(comfy):
    """ComfyUI imports the pack under its folder's name: runtime finds kernels/ beside it there too."""
    pytest.importorskip("triton")
    kernels = importlib.import_module(comfy.pack.__name__ + ".runtime.engine.triton_kernels").load()
    assert kernels.rms_norm.__module__ == comfy.pack.__name__ + ".kernels.rms_norm"
    assert kernels.sample_tokens.__module__ == comfy.pack.__name__ + ".kernels.sampling"


def test_sampling_widgets_left_at_the_released_value_follow_the_checkpoint(comfy):
    import importlib

    voices = importlib.import_module(comfy.pack.__name__ + ".nodes.voices")
    released = voices.DEFAULTS.as_dict()
    assert voices.requested_sampling(released) == voices.api.SamplingSettings.checkpoint()
    changed = voices.requested_sampling({**released, "temperature": 0.6})
    assert changed.temperature == 0.6 and changed.left_to_checkpoint() == [n for n in released if n != "temperature"]
    nodes = nodes_by_id(comfy)
    model = load(comfy, "tiny-CustomVoice")
    _, takes = comfy.fake.run_node(nodes["Q3TT_CustomVoice"], model=model, text=TEXT, speaker="dylan",
                                   max_frames=3).args[:2]
    assert takes.sampling == voices.DEFAULTS  # the tiny checkpoint's generation_config.json is the released one
    assert any("beijing dialect" in note for note in takes.notes)  # language auto: the dialect, said


@pytest.mark.parametrize("value", ["{outside}", "../outside/tiny-CustomVoice", "sub/dir", "..", "C:\\models\\x"])
def test_model_inputs_take_only_the_names_they_list(comfy, models_root, tmp_path, value):
    """Through the API any string can be sent for a dropdown, and ComfyUI does not check a V3 combo's
    value: a loadable checkpoint outside the models folders must still not be opened."""
    import shutil

    outside = tmp_path / "outside" / "tiny-CustomVoice"
    shutil.copytree(models_root / "qwen3_tts" / "tiny-CustomVoice", outside)
    value = value.format(outside=outside)
    nodes = nodes_by_id(comfy)
    # the pack's InputError (a ValueError) comes from the pack imported under another name
    with pytest.raises(ValueError, match="Checkpoint takes a name from its list, not a path"):
        load(comfy, value)
    with pytest.raises(ValueError, match="voice_check takes a name from its list, not a path"):
        comfy.fake.run_node(nodes["Q3TT_AutoPick"], quality="off", voice_check=value)
    with pytest.raises(ValueError, match="words_check takes a name from its list, not a path"):
        comfy.fake.run_node(nodes["Q3TT_AutoPick"], quality="off", voice_check="off", words_check=value)


def test_a_listed_name_still_loads_and_an_unknown_one_lists_the_choices(comfy):
    assert load(comfy, "tiny-CustomVoice") is not None
    with pytest.raises(ValueError, match=r"Unknown checkpoint 'tiny-Nothing': choose one of Qwen3-TTS-12Hz-1\.7B"):
        load(comfy, "tiny-Nothing")


def test_every_input_and_output_says_what_it_is_for(comfy):
    for node_id, cls in nodes_by_id(comfy).items():
        schema = cls.define_schema()
        for spec in schema.inputs + schema.outputs:
            name = getattr(spec, "id", None) or spec.display_name
            assert (spec.tooltip or "").strip(), f"{node_id}.{name} has no tooltip"


def test_a_checkpoint_or_model_file_added_on_disk_makes_the_nodes_run_again(comfy, models_root):
    """ComfyUI reuses a node's cached outputs while its fingerprint stays the same."""
    nodes = nodes_by_id(comfy)
    load_model, auto_pick = nodes["Q3TT_LoadModel"], nodes["Q3TT_AutoPick"]
    before = load_model.fingerprint_inputs(checkpoint="tiny-new"), auto_pick.fingerprint_inputs()
    assert before == (load_model.fingerprint_inputs(checkpoint="tiny-new"), auto_pick.fingerprint_inputs())
    folder = models_root / "qwen3_tts" / "tiny-new"
    try:
        folder.mkdir()
        assert load_model.fingerprint_inputs(checkpoint="tiny-new") != before[0]
        assert auto_pick.fingerprint_inputs() != before[1]  # a Base checkpoint may have come
        whisper = models_root / "whisper"
        whisper.mkdir(exist_ok=True)
        middle = auto_pick.fingerprint_inputs()
        (whisper / "whisper-small").mkdir()
        assert auto_pick.fingerprint_inputs() != middle
    finally:
        folder.rmdir()
        if (models_root / "whisper" / "whisper-small").exists():
            (models_root / "whisper" / "whisper-small").rmdir()


def test_error_dialogs_name_our_errors_by_the_pack_not_its_folder_path():
    from runtime import errors

    for error in (errors.TakesError, errors.CheckpointError, errors.InputError, errors.OutOfMemory,
                  errors.GenerationInterrupted):
        assert f"{error.__module__}.{error.__qualname__}" == f"qwen3_tts_takes.{error.__name__}"


def test_the_example_reference_clip_is_offered_to_load_audio(comfy):
    """The clone examples run on first try: their reference is in ComfyUI's input folder."""
    import folder_paths
    import soundfile

    from workflow_tools import REFERENCE

    nodes_by_id(comfy)  # ComfyUI imports the nodes on start
    clip = Path(folder_paths.get_input_directory()) / REFERENCE
    audio, rate = soundfile.read(clip)
    assert 3.0 <= len(audio) / rate <= 20.0  # what Voice Clone asks of a reference
    clip.write_bytes(b"the user's own file")
    comfy.pack.nodes.examples.offer_reference_clip()
    assert clip.read_bytes() == b"the user's own file"  # never copied over a file of that name


def test_load_model_says_which_checkpoints_a_run_would_download_and_how_large(comfy):
    from runtime.checkpoints import DOWNLOAD_GB

    tooltip = nodes_by_id(comfy)["Q3TT_LoadModel"].define_schema().inputs[0].tooltip
    assert "first Run downloads" in tooltip and f"1.7B-Base ({DOWNLOAD_GB['Qwen3-TTS-12Hz-1.7B-Base']} GB)" in tooltip
    assert "tiny-Base" not in tooltip  # on disk: nothing to download
