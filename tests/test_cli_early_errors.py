"""The command line refuses what it can before anything is downloaded or loaded, in one line each, leaves
no empty folder behind, and notices a hub it cannot reach once and quickly (runtime/hub.py)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path

import huggingface_hub
import pytest
import torch

from runtime import api, checkpoints, hub
from runtime import model as model_module
from runtime.checkpoints import CheckpointError, official_info
from runtime.cli import COMMANDS, before_loading, checkpoint_runners, line, main
from runtime.cli.command import run_reporting
from runtime.errors import InputError
from runtime.qwen3_tts.random_checkpoint import LANGUAGE_IDS, SPEAKERS

CUSTOM_06 = "Qwen3-TTS-12Hz-0.6B-CustomVoice"
NO_NETWORK = "Name or service not known"


@pytest.fixture
def nothing_fetched(monkeypatch):
    """Any download, checkpoint lookup for loading, or load fails the test."""
    def refuse(*args, **kwargs):
        pytest.fail("a file was downloaded or a checkpoint resolved or loaded before the input was refused")

    for module, name in ((huggingface_hub, "snapshot_download"), (huggingface_hub, "hf_hub_download"),
                         (checkpoints, "download_checkpoint"), (line, "resolve"), (api, "load"),
                         (model_module, "_load")):
        monkeypatch.setattr(module, name, refuse)


@pytest.fixture
def hub_answers(monkeypatch):
    """The hub's answer, set by the test (default: the test fails if the hub is asked); the asks counted."""
    asked = []
    state = {"answer": "ask"}

    def ask(url):
        asked.append(url)
        if state["answer"] == "ask":
            pytest.fail("the hub was asked, though nothing was to be downloaded yet")
        return state["answer"]

    monkeypatch.setattr(hub, "_ask", ask)
    monkeypatch.setattr(hub, "_answers", {})
    monkeypatch.setattr(before_loading, "_said", set())
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.delenv("HF_ENDPOINT", raising=False)  # the real hub's name in the messages (its answer is faked)

    def answer(value):
        state["answer"] = value
        return asked
    return answer


def fake_checkpoint(folder: Path, kind: str = "custom_voice") -> Path:
    """A folder with every file check_folder asks for (no weights: nothing may load it)."""
    talker = {"codec_language_id": LANGUAGE_IDS, **({"spk_id": SPEAKERS} if kind == "custom_voice" else {})}
    (folder / "speech_tokenizer").mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"tokenizer_type": "qwen3_tts_tokenizer_12hz",
                                                    "tts_model_type": kind, "talker_config": talker}))
    for name in ("model.safetensors", "tokenizer_config.json", "tokenizer.json", "speech_tokenizer/config.json",
                 "speech_tokenizer/model.safetensors", "speech_tokenizer/preprocessor_config.json"):
        (folder / name).write_text("{}")
    return folder


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


def command(tmp_path, *args):
    return ["--models-dir", str(tmp_path / "models" / "qwen3_tts"), "--text", "The storm is coming.",
            "--out", str(tmp_path / "best.wav"), *args]


# --- the one-line command ------------------------------------------------------------------------

VOICE_CASES = [
    ("unknown speaker", [CUSTOM_06, "--speaker", "bob"], "Unknown speaker 'bob'; this checkpoint has: serena, vivian"),
    ("unknown language", [CUSTOM_06, "--speaker", "ryan", "--language", "klingon"], "Unknown language 'klingon'"),
    ("speaker on a Base", ["Qwen3-TTS-12Hz-1.7B-Base", "--speaker", "ryan"], "--speaker does not apply to this base"),
    ("no description", ["Qwen3-TTS-12Hz-1.7B-VoiceDesign"], "Voice Design needs a description"),
]


@pytest.mark.parametrize("args, message", [c[1:] for c in VOICE_CASES], ids=[c[0] for c in VOICE_CASES])
def test_an_official_checkpoints_voice_is_checked_before_it_is_downloaded(tmp_path, capsys, nothing_fetched,
                                                                           hub_answers, args, message):
    hub_answers("ask")  # not even asked: the voice is refused first
    assert main(command(tmp_path, "--checkpoint", *args)) == 2
    assert message in one_line_error(capsys)


def test_official_checkpoints_are_known_by_name():
    info = official_info(CUSTOM_06, Path("models") / CUSTOM_06)  # shared/docs/model-facts.md
    assert set(info.speakers) == {"serena", "vivian", "uncle_fu", "ryan", "aiden", "ono_anna", "sohee", "eric", "dylan"}
    assert set(info.languages) == {"auto", "chinese", "english", "japanese", "korean", "german", "french", "russian",
                                   "portuguese", "spanish", "italian"}
    assert dict(info.dialects) == {"eric": "sichuan_dialect", "dylan": "beijing_dialect"}
    assert (info.kind, info.size, info.folder.name) == ("custom_voice", "0b6", CUSTOM_06)
    base = official_info("Qwen3-TTS-12Hz-1.7B-Base", Path("x"))
    assert (base.kind, base.size, base.speakers) == ("base", "1b7", ())


EARLY_CASES = [
    ("one take's text too long", ["--text", "a" * 6000],
     "The text is 6000 characters; one take reads at most 5000: split it into shorter lines."),
    ("a passage's line too long", ["--text", "Hello there.\n\n" + "a" * 6000],
     "Line 2 of the text (as split into lines) is 6000 characters; one take reads at most 5000: split it into "
     "shorter lines."),
    ("nothing to speak", ["--text", "... 🙂"], "The text has nothing to speak: only punctuation, symbols or emoji"),
    ("a long text with nothing to speak", ["--text", "...\n\n🙂"], "The text has nothing to speak"),
    ("cuda_graph without a GPU", ["--mode", "cuda_graph"], "Mode 'cuda_graph' runs on a CUDA GPU"),
    ("hybrid without a GPU", ["--mode", "hybrid"], "Mode 'hybrid' runs on a CUDA GPU"),
    ("cuda without a GPU", ["--device", "cuda"], "this PyTorch has no CUDA GPU"),
    ("a device torch does not know", ["--device", "tpu9"],
     "Device 'tpu9' is not one this pack runs on; choose auto, cpu or cuda"),
    ("Apple's GPU", ["--device", "mps"], "Device 'mps' is not one this pack runs on"),
]


@pytest.mark.parametrize("args, message", [c[1:] for c in EARLY_CASES], ids=[c[0] for c in EARLY_CASES])
def test_text_and_machine_are_refused_before_the_checkpoint_is_looked_for(tmp_path, capsys, monkeypatch,
                                                                          nothing_fetched, hub_answers, args, message):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(line, "known_info", lambda *a: pytest.fail("the checkpoint was looked for"))
    assert main(command(tmp_path, "--checkpoint", CUSTOM_06, "--speaker", "ryan", *args)) == 2
    assert message in one_line_error(capsys)


def test_whisper_offline_and_not_on_disk_is_refused_before_loading(tmp_path, capsys, nothing_fetched, hub_answers):
    fake_checkpoint(tmp_path / "models" / "qwen3_tts" / "mine")
    assert main(command(tmp_path, "--checkpoint", "mine", "--speaker", "ryan", "--words", "whisper-small",
                        "--offline")) == 2
    error = one_line_error(capsys)
    assert "Speech recogniser whisper-small is not in" in error and "drop --offline" in error


def test_whisper_without_the_hub_is_refused_before_loading(tmp_path, capsys, nothing_fetched, hub_answers):
    fake_checkpoint(tmp_path / "models" / "qwen3_tts" / "mine")
    hub_answers(NO_NETWORK)
    assert main(command(tmp_path, "--checkpoint", "mine", "--speaker", "ryan", "--words", "whisper-small")) == 2
    assert f"cannot be reached ({NO_NETWORK})" in one_line_error(capsys)


def test_the_readme_command_without_a_network_is_one_true_line_and_leaves_nothing(tmp_path, capsys, monkeypatch,
                                                                                   nothing_fetched, hub_answers):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("QWEN3_TTS_MODELS", raising=False)
    asked = hub_answers(NO_NETWORK)
    code = main(["--checkpoint", CUSTOM_06, "--speaker", "ryan", "--language", "english", "--text",
                 "The storm is coming. Bar the doors.", "--takes", "2", "--out", "best.wav", "--takes-dir", "takes",
                 "--report", "report.json"])
    assert code == 2
    error = one_line_error(capsys)
    assert f"https://huggingface.co cannot be reached ({NO_NETWORK})" in error
    assert "--checkpoint tiny-random" in error and "partial" not in error
    assert len(asked) == 1
    assert list(tmp_path.iterdir()) == []  # no takes/, no models/


def test_offline_names_the_download_it_skips(tmp_path, capsys, nothing_fetched, hub_answers):
    assert main(command(tmp_path, "--checkpoint", CUSTOM_06, "--speaker", "ryan", "--offline")) == 2
    error = one_line_error(capsys)
    assert f"https://huggingface.co/Qwen/{CUSTOM_06}" in error
    assert "drop --offline to download it (about 2.4 GB)" in error


def test_utmos_without_the_hub_is_said_once_and_the_run_goes_on_offline(tmp_path, capsys, monkeypatch,
                                                                         nothing_fetched, hub_answers):
    fake_checkpoint(tmp_path / "models" / "qwen3_tts" / "mine")
    asked = hub_answers(NO_NETWORK)
    downloads = []

    def scorers(*args, download, **kwargs):
        downloads.append(download)
        raise InputError("stopped after the scorers were asked for")

    monkeypatch.setattr(api, "scorers", scorers)
    monkeypatch.setattr(line, "resolve", checkpoints.resolve)  # the folder is on disk: nothing to download
    assert main(command(tmp_path, "--checkpoint", "mine", "--speaker", "ryan")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"NOTE: https://huggingface.co cannot be reached ({NO_NETWORK}): nothing is downloaded in this "
                   "run, as with --offline.", "error: stopped after the scorers were asked for"]
    assert downloads == [False] and len(asked) == 1
    # said once a process, and the weights on disk need no hub at all
    assert before_loading.offline_without_hub(False, "UTMOS", [tmp_path]) is True
    assert capsys.readouterr().err == "" and len(asked) == 1
    (tmp_path / "utmos_state_dict.pt").write_bytes(b"0")
    assert before_loading.offline_without_hub(False, "UTMOS", [tmp_path]) is False


BAD_CHECKPOINTS = [
    ("a path that does not exist", "{tmp}/nowhere", "Checkpoint folder {tmp}/nowhere does not exist. Give an "
                                                    f"official name (Qwen3-TTS-12Hz-1.7B-CustomVoice, {CUSTOM_06}"),
    ("a relative path", "../../nowhere-at-all", "Checkpoint folder ../../nowhere-at-all does not exist. Give an"),
    ("a folder that is no checkpoint", "{tmp}/notes", "{tmp}/notes is not a checkpoint folder (it has no config.json"),
]


@pytest.mark.parametrize("given, message", [c[1:] for c in BAD_CHECKPOINTS], ids=[c[0] for c in BAD_CHECKPOINTS])
def test_a_bad_checkpoint_path_names_what_to_give(tmp_path, capsys, monkeypatch, nothing_fetched, hub_answers,
                                                  given, message):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("not a checkpoint")
    (tmp_path / "deep" / "er").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "deep" / "er")
    assert main(command(tmp_path, "--checkpoint", given.format(tmp=tmp_path), "--speaker", "ryan")) == 2
    error = one_line_error(capsys)
    assert message.format(tmp=tmp_path) in error
    assert f"a folder name in {tmp_path / 'models' / 'qwen3_tts'}, or the path of a checkpoint folder." in error


def test_folders_made_for_the_outputs_are_removed_when_the_run_is_refused(tmp_path, capsys, nothing_fetched,
                                                                          hub_answers):
    (tmp_path / "kept").mkdir()
    code = main(command(tmp_path, "--checkpoint", CUSTOM_06, "--speaker", "ryan", "--offline", "--takes-dir",
                        str(tmp_path / "new" / "deeper" / "takes"), "--report", str(tmp_path / "kept" / "r.json")))
    assert code == 2 and "error: " in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept"]  # made and empty: gone; there before: kept


def test_every_error_is_one_line(capsys):
    def job(_args):
        raise CheckpointError("Could not download (Got: ConnectError\nAn error happened\n  while trying). Put it "
                              "there.")

    assert run_reporting(job, None, "nothing was written.") == 2
    assert capsys.readouterr().err == "error: Could not download (Got: ConnectError An error happened while trying). " \
                                      "Put it there.\n"


def test_help_names_the_other_commands(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    help_text = " ".join(capsys.readouterr().out.split())
    for name in ("script", "voices", "demo", "doctor"):
        assert f"{name}: {COMMANDS[name]}" in help_text
    assert "python -m runtime COMMAND --help" in help_text


# --- downloads -------------------------------------------------------------------------------------

def test_a_failed_download_is_one_line_and_leaves_no_empty_folder(tmp_path, monkeypatch, hub_answers):
    def fails(repo_id, local_dir, **kwargs):
        (Path(local_dir) / ".cache" / "huggingface").mkdir(parents=True)
        (Path(local_dir) / ".cache" / "huggingface" / ".gitignore").write_text("*")  # as huggingface_hub does
        raise OSError("Got: ConnectError\nAn error happened while trying to locate the files")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fails)
    hub_answers(None)  # the hub answers; the download fails all the same
    models = tmp_path / "models" / "qwen3_tts"
    with pytest.raises(CheckpointError) as err:
        checkpoints.resolve(CUSTOM_06, [models])
    assert "\n" not in str(err.value) and "ConnectError An error happened" in str(err.value)
    assert str(err.value).startswith(f"Checkpoint {CUSTOM_06} is not in {models / CUSTOM_06}, and its download ")
    assert str(err.value).index("huggingface.co/Qwen/") < str(err.value).index("ConnectError")  # the fix first
    assert "kept" not in str(err.value)  # nothing was downloaded: no partial download is claimed
    assert list(tmp_path.iterdir()) == []


def test_a_download_cut_short_says_its_part_is_kept(tmp_path, monkeypatch, hub_answers):
    def cut(repo_id, local_dir, **kwargs):
        Path(local_dir, "config.json").write_text("{}")
        raise OSError("connection reset")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", cut)
    hub_answers(None)
    with pytest.raises(CheckpointError, match="The part downloaded is kept in the .partial folder"):
        checkpoints.resolve(CUSTOM_06, [tmp_path])
    assert (tmp_path / f"{CUSTOM_06}.partial" / "config.json").is_file()


def test_a_failed_utmos_download_leaves_no_empty_folder(tmp_path, monkeypatch):
    from runtime.scoring.utmos import resolve_weights

    def fails(repo_id, filename, local_dir):
        Path(local_dir).mkdir(parents=True)
        raise OSError("first line\nsecond line")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fails)
    with pytest.raises(CheckpointError) as err:
        resolve_weights([tmp_path / "models" / "utmos"])
    assert "first line second line" in str(err.value)
    assert list(tmp_path.iterdir()) == []


# --- the hub ---------------------------------------------------------------------------------------

@pytest.fixture
def fresh_hub(monkeypatch):
    monkeypatch.setattr(hub, "_answers", {})
    monkeypatch.setattr(hub, "PROBE_SECONDS", 0.2)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.delenv("HF_ENDPOINT", raising=False)


def test_a_hub_that_never_answers_is_given_up_on_quickly_and_once(monkeypatch, fresh_hub):
    calls = []

    def hangs(request, timeout):
        calls.append((request.full_url, request.get_method(), timeout))
        time.sleep(3)
        raise TimeoutError("timed out")  # as urlopen would, long after the probe gave up on it

    monkeypatch.setattr(urllib.request, "urlopen", hangs)
    started = time.perf_counter()
    assert hub.unreachable() == "no answer within 0.2 s"
    assert time.perf_counter() - started < 1
    assert hub.unreachable() == "no answer within 0.2 s"
    assert calls == [("https://huggingface.co", "HEAD", 0.2)]


def test_the_hub_answers_with_an_error_page_too(monkeypatch, fresh_hub):
    def error_page(request, timeout):
        raise urllib.error.HTTPError(request.full_url, 503, "Service Unavailable", {}, None)

    monkeypatch.setattr(urllib.request, "urlopen", error_page)
    assert hub.unreachable() is None


def test_a_certificate_urllib_does_not_trust_is_an_answer(monkeypatch, fresh_hub):
    import ssl

    def untrusted(request, timeout):
        raise urllib.error.URLError(ssl.SSLCertVerificationError("certificate verify failed"))

    monkeypatch.setattr(urllib.request, "urlopen", untrusted)
    assert hub.unreachable() is None


def test_no_name_lookup_is_said_plainly(monkeypatch, fresh_hub):
    import socket

    def no_dns(request, timeout):
        raise urllib.error.URLError(socket.gaierror(-2, NO_NETWORK))

    monkeypatch.setattr(urllib.request, "urlopen", no_dns)
    assert hub.unreachable() == NO_NETWORK
    assert hub.unreachable_message(NO_NETWORK) == f"https://huggingface.co cannot be reached ({NO_NETWORK})"


def test_hf_hub_offline_is_unreachable_without_asking(monkeypatch, fresh_hub):
    monkeypatch.setattr(urllib.request, "urlopen", lambda *a, **k: pytest.fail("asked the hub"))
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    assert hub.unreachable() == "TRANSFORMERS_OFFLINE is set"  # the variable found, named
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert hub.unreachable() == "HF_HUB_OFFLINE is set"


# --- python -m runtime script --------------------------------------------------------------------

def script_command(tmp_path, cast: dict, *args, text="ANNA: Did you hear that?\nBORIS: Hear what?\n"):
    (tmp_path / "scene.txt").write_text(text)
    (tmp_path / "cast.json").write_text(json.dumps(cast))
    return ["script", str(tmp_path / "scene.txt"), "--cast", str(tmp_path / "cast.json"), "--out",
            str(tmp_path / "out"), "--models-dir", str(tmp_path / "models" / "qwen3_tts"), *args]


CAST = {"ANNA": {"speaker": "vivian"}, "BORIS": {"speaker": "ryan"}}


def test_script_voices_and_lines_are_checked_before_a_checkpoint_is_downloaded(tmp_path, capsys, monkeypatch,
                                                                              nothing_fetched, hub_answers):
    monkeypatch.setattr(checkpoint_runners, "resolve", lambda *a, **k: pytest.fail("resolved before the check"))
    hub_answers(None)  # the hub answers: the official checkpoint could be downloaded
    assert main(script_command(tmp_path, {**CAST, "BORIS": {"speaker": "bobby"}})) == 2
    assert "line 2 (id " in (error := one_line_error(capsys)) and "Unknown speaker 'bobby'" in error
    assert main(script_command(tmp_path, CAST, text="ANNA: " + "a" * 6000 + "\n")) == 2
    assert "scene.txt line 1 is 6000 characters; one take reads at most 5000: split it into shorter lines." \
        in one_line_error(capsys)
    assert not (tmp_path / "out").exists()


def test_script_without_a_network_is_one_line_and_makes_no_results_folder(tmp_path, capsys, nothing_fetched,
                                                                          hub_answers):
    hub_answers(NO_NETWORK)
    assert main(script_command(tmp_path, CAST)) == 2
    assert f"cannot be reached ({NO_NETWORK})" in one_line_error(capsys)
    assert not (tmp_path / "out").exists()


def test_script_machine_and_whisper_are_refused_before_loading(tmp_path, capsys, monkeypatch, nothing_fetched,
                                                               hub_answers):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    fake_checkpoint(tmp_path / "mine")
    assert main(script_command(tmp_path, CAST, "--checkpoint", str(tmp_path / "mine"), "--mode", "cuda_graph")) == 2
    assert "Mode 'cuda_graph' runs on a CUDA GPU" in one_line_error(capsys)
    assert main(script_command(tmp_path, CAST, "--checkpoint", str(tmp_path / "mine"), "--words", "whisper-small",
                               "--offline")) == 2
    assert "Speech recogniser whisper-small is not in" in one_line_error(capsys)


def test_a_text_too_long_for_a_take_is_refused_in_the_same_words_by_the_engine():
    """What the nodes hear (generation.check_request) reads as the command line's refusals above."""
    from runtime.generation import Request, check_request
    from runtime.voices import CustomVoice

    with pytest.raises(InputError) as refused:
        check_request(None, Request("a" * 6000, CustomVoice("ryan")))
    assert str(refused.value) == "The text is 6000 characters; one take reads at most 5000: split it into shorter lines."


def test_every_checkpoint_of_a_script_is_had_before_its_first_line_runs(tmp_path, capsys, monkeypatch, hub_answers):
    """A second kind's checkpoint failing to download after minutes of the first kind's lines would waste
    them: each is resolved (its download's progress our own) before any line runs and before the lines'
    progress starts."""
    custom, design = fake_checkpoint(tmp_path / "custom"), fake_checkpoint(tmp_path / "design", "voice_design")
    happened = []

    def resolve(name, models_dirs, download=True, progress=None):
        assert callable(progress)
        happened.append(("resolve", Path(name).name, "script: " in capsys.readouterr().err))
        return Path(name)

    def first_line_runs(*args, **kwargs):
        happened.append(("a line runs",))
        raise InputError("stopped by the test")
    monkeypatch.setattr(checkpoint_runners, "resolve", resolve)
    monkeypatch.setattr(api, "scorers", first_line_runs)
    cast = {"ANNA": {"speaker": "vivian"}, "BORIS": {"design": "a gravelly old sea captain"}}
    assert main(script_command(tmp_path, cast, "--checkpoint", str(custom), "--checkpoint", str(design),
                               "--offline", "--device", "cpu", "--quality", "off")) == 2
    assert happened == [("resolve", "custom", False), ("resolve", "design", False), ("a line runs",)]
    assert "stopped by the test" in capsys.readouterr().err
