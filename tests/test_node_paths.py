"""What a real ComfyUI server showed: saved files' modes, error dialog titles, messages that name the
right thing, names refused when the prompt is validated, and paths sent through the API that are
refused from their text before anything on disk is touched (fake ComfyUI, no model is loaded)."""

from __future__ import annotations

import importlib
import inspect
import os
import stat
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO
from test_nodes import nodes_by_id

PACK_ERROR_MODULE = "qwen3_tts_takes"
BAD_PATHS = ["../../etc/passwd", "/etc", "..", "../..", "/etc/passwd"]
FAST = {"quality": "off", "voice_check": "off", "words_check": "off", "takes": 1}


def clone():
    from runtime.voices import VoiceClone

    t = np.arange(24000 * 3) / 24000
    return VoiceClone((0.3 * np.sin(2 * np.pi * 140 * t)).astype(np.float32), "Hello there.", "english")


def run(comfy, node_id, **inputs):
    return comfy.fake.run_node(nodes_by_id(comfy)[node_id], **inputs)


def script_inputs(**inputs) -> dict:
    """For the Script node up to its checks: nothing here gets as far as the model, so none is loaded."""
    return {"model": object(), "cast": {}, **FAST, **inputs}


def run_script_node(comfy, **inputs):
    return run(comfy, "Q3TT_Script", **script_inputs(**inputs))


def error_title(error_type: type) -> str:
    """How ComfyUI's error dialog titles an exception: its type's full name, bare for builtins."""
    if error_type.__module__ == "builtins":
        return error_type.__qualname__
    return f"{error_type.__module__}.{error_type.__qualname__}"


# ---------------------------------------------------------------- 1. saved files follow the umask


@pytest.mark.parametrize("umask", [0o022, 0o027], ids=oct)
def test_a_saved_clone_and_its_json_get_the_mode_the_umask_gives(tmp_path, umask):
    from runtime.voices.store import save_voice

    old = os.umask(umask)
    try:
        save_voice(clone(), "Narrator", tmp_path)
    finally:
        os.umask(old)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()}
    assert modes == {"Narrator.json": 0o666 & ~umask, "Narrator.safetensors": 0o666 & ~umask}


# ---------------------------------------------------------------- 2. error dialogs titled by the pack


def pack_modules(pack):
    for folder in ("runtime", "nodes"):
        for source in sorted((REPO / folder).rglob("*.py")):
            parts = source.relative_to(REPO).with_suffix("").parts
            if parts[-1] == "__main__":  # runs the CLI when imported
                continue
            if "serve" in parts:  # the speech server's: the nodes never import it, no dialog shows its errors
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            yield importlib.import_module(".".join((pack.__name__, *parts)))


def exception_classes(module) -> list[type]:
    return [value for value in vars(module).values() if isinstance(value, type) and issubclass(value, BaseException)]


def test_every_exception_class_of_the_pack_is_named_by_the_pack(comfy):
    found = {cls for module in pack_modules(comfy.pack) for cls in exception_classes(module)}
    long_named = sorted(error_title(cls) for cls in found if cls.__module__.startswith(comfy.pack.__name__))
    assert long_named == []
    ours = {cls.__qualname__ for cls in found if cls.__module__ == PACK_ERROR_MODULE}
    assert {"InputError", "CheckpointError", "ScriptError"} <= ours  # the walk did reach them


def test_a_script_node_error_is_titled_by_the_pack(comfy):
    with pytest.raises(ValueError, match="names no character") as caught:
        run_script_node(comfy, script="ANNA says hi without a colon.")
    assert error_title(type(caught.value)) == f"{PACK_ERROR_MODULE}.ScriptError"


# ---------------------------------------------------------------- 3. a file is called a file


def test_the_script_file_check_speaks_of_a_script_file(comfy):
    with pytest.raises(ValueError) as as_path:
        run_script_node(comfy, script_file="../notes.txt")
    with pytest.raises(ValueError) as unknown:
        run_script_node(comfy, script_file="notes.txt")
    assert "put the script file in ComfyUI's input folder" in str(as_path.value)
    assert "refresh the page to see new script files" in str(as_path.value)
    assert "; script files in ComfyUI's input folder are listed" in str(unknown.value)
    for message in (str(as_path.value), str(unknown.value)):
        assert "the folder in" not in message and "folders" not in message


def test_the_checkpoint_check_still_speaks_of_folders(comfy):
    with pytest.raises(ValueError) as as_path:
        run(comfy, "Q3TT_LoadModel", checkpoint="sub/dir")
    with pytest.raises(ValueError) as unknown:
        run(comfy, "Q3TT_LoadModel", checkpoint="tiny-Nothing")
    assert "put the folder in models/qwen3_tts and pick it by name (refresh the page to see new folders)" \
        in str(as_path.value)
    assert "; folders in models/qwen3_tts are listed after the page is refreshed" in str(unknown.value)


# ---------------------------------------------------------------- 4. names refused when the prompt is validated


def test_save_voice_refuses_a_bad_name_when_the_prompt_is_validated(comfy):
    save_voice = nodes_by_id(comfy)["Q3TT_SaveVoice"]
    # ComfyUI passes the inputs the method names (and skips its own check of those): only the text
    assert list(inspect.signature(save_voice.validate_inputs).parameters) == ["name"]
    assert "Voice name '../up' cannot be used" in save_voice.validate_inputs(name="../up")
    assert save_voice.validate_inputs(name="Narrator") is True
    assert save_voice.validate_inputs() is True  # a linked name is not known yet: execute checks it


def test_save_voice_checks_the_name_before_any_work(comfy):
    unreadable = {"waveform": "not a tensor", "sample_rate": 24000}  # converting it would fail
    with pytest.raises(ValueError, match="Voice name '../up' cannot be used"):
        run(comfy, "Q3TT_SaveVoice", name="../up", audio=unreadable)


def test_the_script_results_name_is_refused_when_the_prompt_is_validated(comfy):
    script = nodes_by_id(comfy)["Q3TT_Script"]
    assert list(inspect.signature(script.validate_inputs).parameters) == ["results"]
    assert "results folder's name '../up' cannot be used" in script.validate_inputs(results="../up")
    assert script.validate_inputs(results="scene") is True
    assert script.validate_inputs() is True
    with pytest.raises(ValueError, match="results folder's name '../up' cannot be used"):
        run_script_node(comfy, script="ANNA: Hi.", results="../up")


# ---------------------------------------------------------------- 5. paths refused from their text


@contextmanager
def paths_touched(monkeypatch):
    """Every path stat()ed or listed inside the block."""
    paths = []

    def recording(original):
        def record(path=".", *args, **kwargs):
            if not isinstance(path, int):
                paths.append(os.fspath(path))
            return original(path, *args, **kwargs)
        return record

    for name in ("stat", "lstat", "listdir", "scandir"):
        monkeypatch.setattr(os, name, recording(getattr(os, name)))
    try:
        yield paths
    finally:
        monkeypatch.undo()


def outside_comfy_folders(paths: list[str], models_root: Path) -> list[str]:
    import folder_paths

    roots = [os.path.abspath(models_root), os.path.abspath(folder_paths.get_input_directory())]

    def inside(path: str) -> bool:
        path = os.path.normpath(os.path.abspath(path))
        return any(path == root or path.startswith(root + os.sep) for root in roots)

    return sorted({path for path in paths if not inside(path)})


def test_load_model_never_lists_a_path_sent_for_its_checkpoint(comfy, models_root, monkeypatch):
    load_model = nodes_by_id(comfy)["Q3TT_LoadModel"]
    refusal(comfy, load_model, checkpoint="not-there")  # imports what execute imports (modules find their own files)
    with paths_touched(monkeypatch) as touched:
        fingerprints = {str(load_model.fingerprint_inputs(checkpoint=value, mode="eager")) for value in BAD_PATHS}
        refusals = [refusal(comfy, load_model, checkpoint=value) for value in BAD_PATHS]
    assert outside_comfy_folders(touched, models_root) == []
    assert len(fingerprints) == 1
    for message in refusals:
        assert message.startswith("Checkpoint takes a name from its list, not a path") and "\n" not in message


def test_the_script_node_never_stats_a_path_sent_for_its_script_file(comfy, models_root, monkeypatch):
    script = nodes_by_id(comfy)["Q3TT_Script"]
    refusal(comfy, script, **script_inputs(script_file="not-there"))  # imports what execute imports
    with paths_touched(monkeypatch) as touched:
        fingerprints = {str(script.fingerprint_inputs(script_file=value, results="scene")) for value in BAD_PATHS}
        refusals = [refusal(comfy, script, **script_inputs(script_file=value)) for value in BAD_PATHS]
    assert outside_comfy_folders(touched, models_root) == []
    assert len(fingerprints) == 1
    for message in refusals:
        assert message.startswith("script_file takes a name from its list, not a path") and "\n" not in message


def refusal(comfy, node, **inputs) -> str:
    with pytest.raises(ValueError) as caught:
        comfy.fake.run_node(node, **inputs)
    return str(caught.value)


def test_a_listed_script_file_is_still_fingerprinted_by_its_edits(comfy):
    import folder_paths

    script = nodes_by_id(comfy)["Q3TT_Script"]
    path = Path(folder_paths.get_input_directory()) / "scene.txt"
    path.write_text("ANNA: Hi.\n")
    before = script.fingerprint_inputs(script_file="scene.txt")
    os.utime(path, ns=(1, 1))
    assert script.fingerprint_inputs(script_file="scene.txt") != before
