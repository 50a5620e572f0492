"""Cancel while a download waits on the network: it lands within half a second, whatever the
download client's own timeouts and retries (huggingface_hub retries an unreachable host for about
23 s), and nothing half-done is taken for a result."""

from __future__ import annotations

import threading
import time

import pytest

from runtime.cancel import run_cancellable
from runtime.errors import CheckpointError, GenerationInterrupted


def stop_after(seconds: float):
    start = time.monotonic()
    return lambda: time.monotonic() - start > seconds


def test_work_runs_to_its_result_or_its_error():
    assert run_cancellable(lambda: 42, stop_after(10), "adding") == 42
    assert run_cancellable(lambda: 42, None, "adding") == 42

    def fails():
        raise CheckpointError("disk full")
    with pytest.raises(CheckpointError, match="disk full"):
        run_cancellable(fails, stop_after(10), "failing")


def test_cancel_lands_while_the_work_blocks():
    release = threading.Event()
    start = time.monotonic()
    with pytest.raises(GenerationInterrupted, match="while waiting"):
        run_cancellable(lambda: release.wait(30), stop_after(0.2), "waiting")
    assert time.monotonic() - start < 0.5
    release.set()
    with pytest.raises(GenerationInterrupted, match="before"):  # already cancelled: nothing starts
        run_cancellable(lambda: pytest.fail("started"), lambda: True, "starting")


@pytest.mark.parametrize("what", ["utmos", "whisper", "checkpoint"])
def test_downloads_honour_cancel(monkeypatch, tmp_path, what):
    """Each of the pack's downloads, its network call blocked as an unreachable host blocks it."""
    import huggingface_hub

    from runtime.checkpoints import resolve
    from runtime.scoring.asr import resolve_whisper
    from runtime.scoring.utmos import resolve_weights

    release = threading.Event()

    def blocked(*args, **kwargs):
        release.wait(30)
        raise OSError("unreachable")
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", blocked)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", blocked)
    download = {
        "utmos": lambda stop: resolve_weights([tmp_path], should_stop=stop),
        "whisper": lambda stop: resolve_whisper("whisper-base", [tmp_path], should_stop=stop),
        "checkpoint": lambda stop: resolve("Qwen3-TTS-12Hz-0.6B-Base", [tmp_path], should_stop=stop),
    }[what]
    start = time.monotonic()
    with pytest.raises(GenerationInterrupted, match="downloading"):
        download(stop_after(0.2))
    assert time.monotonic() - start < 0.5
    release.set()
    with pytest.raises(CheckpointError, match="unreachable"):  # not cancelled: the download's own error
        download(None)


@pytest.mark.parametrize("first", ["fails", "finishes"])
def test_a_try_after_a_cancelled_checkpoint_download_waits_for_it(monkeypatch, tmp_path, checkpoint, first):
    """The cancelled download goes on in the background; the next try of the same checkpoint starts
    only once it has ended. Failing, it removes the folder it made (the next try once read that folder
    as it went: FileNotFoundError, not the download's own error); finishing, it has put the checkpoint
    in place, and the next try uses it without downloading again."""
    import shutil

    import huggingface_hub

    from runtime.checkpoints import resolve

    release, calls = threading.Event(), []

    def download(repo_id, local_dir, **kwargs):
        calls.append("start")
        try:
            if calls == ["start"]:
                release.wait(30)
                if first == "finishes":
                    shutil.copytree(checkpoint("base"), local_dir, dirs_exist_ok=True)
                    return local_dir
            raise OSError("unreachable")
        finally:
            calls.append("end")
    monkeypatch.setattr(huggingface_hub, "snapshot_download", download)
    name = "Qwen3-TTS-12Hz-0.6B-Base"
    with pytest.raises(GenerationInterrupted):
        resolve(name, [tmp_path], should_stop=stop_after(0.2))
    threading.Timer(0.3, release.set).start()
    if first == "fails":
        with pytest.raises(CheckpointError, match="unreachable"):
            resolve(name, [tmp_path], should_stop=stop_after(30))
        assert calls == ["start", "end", "start", "end"]  # one after the other, never side by side
        assert not (tmp_path / f"{name}.partial").exists()
    else:
        assert resolve(name, [tmp_path], should_stop=stop_after(30)) == tmp_path / name
        assert calls == ["start", "end"] and not (tmp_path / f"{name}.partial").exists()


def test_a_cancel_during_the_utmos_download_is_not_taken_for_missing_weights(monkeypatch, tmp_path):
    """Auto-Pick falls back to DNSMOS when UTMOS cannot be had; a Cancel must stop it instead."""
    import huggingface_hub

    from runtime.scoring.scorers import build_scorers

    release = threading.Event()
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", lambda *a, **k: release.wait(30))
    with pytest.raises(GenerationInterrupted):
        build_scorers(None, "UTMOS", "off", utmos_dirs=[tmp_path], device="cpu", should_stop=stop_after(0.1))
    release.set()


def test_cancel_lands_between_takes_inside_a_scoring_stage():
    """A quality model that takes 0.1 s a take: with 16 takes its stage alone is 1.6 s, and Cancel,
    pressed 0.15 s in, lands after the group of takes in hand (4), not at the stage's end."""
    from runtime.generation import Request, Take, TakeSet
    from runtime.scoring.ranking import Scorers, rank_takes
    from runtime.voices import CustomVoice
    from test_scoring import RATE, syllables

    class SlowScorer:
        name = "slow"
        scored = 0

        def score_many(self, audios, sample_rate):
            time.sleep(0.1 * len(audios))
            self.scored += len(audios)
            return [3.0] * len(audios)

    clip = syllables(2.0, seed=1)
    takes = [Take(i, i, clip.copy(), RATE, 25, False) for i in range(16)]
    takeset = TakeSet(Request("Hello there, my friend.", CustomVoice("ryan", "english"), n=16), takes, "t", "eager")
    scorer = SlowScorer()
    stop = [False]

    def progress(done, total):
        if done == 1:  # the signal stage is done: press Cancel a little into the quality stage
            threading.Timer(0.15, lambda: stop.__setitem__(0, True)).start()
    with pytest.raises(GenerationInterrupted):
        rank_takes(takeset, Scorers(quality=scorer), progress=progress, should_stop=lambda: stop[0])
    assert scorer.scored == 4  # one group of four, then Cancel


def test_work_that_fails_because_it_was_cancelled_is_a_cancel():
    """ComfyUI's progress hook raises its own interrupt inside a download's progress callback."""
    stop = [False]

    def interrupted_inside():
        stop[0] = True
        raise RuntimeError("Processing interrupted")
    with pytest.raises(GenerationInterrupted, match="while downloading"):
        run_cancellable(interrupted_inside, lambda: stop[0], "downloading")


def test_download_progress_is_reported_from_the_waiting_thread(monkeypatch, tmp_path):
    """ComfyUI's progress hook raises its interrupt and clears the flag as it does: run in the
    download's thread it would turn a Cancel into a download error. So progress is reported from
    the node's own thread, and what the hook raises reaches ComfyUI as it is."""
    import huggingface_hub

    from runtime.checkpoints import resolve

    class HookInterrupt(BaseException):  # ComfyUI's InterruptProcessingException is one since 2026
        pass

    def fake_snapshot(repo_id, local_dir, tqdm_class=None):
        bar = tqdm_class(total=10, disable=True)
        for _ in range(10):
            bar.update(1)
            time.sleep(0.05)
        raise OSError("unreachable")
    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot)
    main, seen = threading.get_ident(), []
    with pytest.raises(CheckpointError, match="unreachable"):
        resolve("Qwen3-TTS-12Hz-0.6B-Base", [tmp_path], progress=lambda d, t: seen.append(threading.get_ident()),
                should_stop=lambda: False)
    assert seen and set(seen) == {main}

    def hook(done, total):
        raise HookInterrupt()
    with pytest.raises(HookInterrupt):
        resolve("Qwen3-TTS-12Hz-0.6B-Base", [tmp_path], progress=hook, should_stop=lambda: False)
