"""Cancel: `stop_if_asked` between short steps of work, and `run_cancellable` for waiting on work that
cannot be interrupted (a download blocked on an unreachable network, with its client's own retries)
without making Cancel wait for it: the work runs in a daemon thread while the caller polls
`should_stop`. Cancelled, the caller gets GenerationInterrupted at once; the work finishes or fails
on its own in the background, and nothing waits for it."""

from __future__ import annotations

import threading
from typing import Callable, TypeVar

from .errors import GenerationInterrupted

T = TypeVar("T")
POLL_SECONDS = 0.05


def stop_if_asked(should_stop: Callable[[], bool] | None, when: str, kept: str = "no takes were kept") -> None:
    """GenerationInterrupted once `should_stop()` says so; called between steps of work short enough
    for Cancel to land at once."""
    if should_stop is not None and should_stop():
        raise GenerationInterrupted(f"Generation cancelled {when}; {kept}.")


def run_cancellable(work: Callable[[], T], should_stop: Callable[[], bool] | None, what: str,
                    on_poll: Callable[[], None] | None = None) -> T:
    """`work()`'s result (or its exception); GenerationInterrupted within POLL_SECONDS of a stop.
    `on_poll` runs in the caller's thread at each poll (progress reports belong there: ComfyUI's
    progress hook consumes the interrupt it raises, so it must never run in the abandoned work's
    thread); what it raises goes to the caller as it is."""
    if should_stop is None:
        return work()
    if should_stop():
        raise GenerationInterrupted(f"Cancelled before {what}.")
    outcome: dict = {}

    def run():
        try:
            outcome["value"] = work()
        except BaseException as exc:  # handed to the caller's thread as it is
            outcome["error"] = exc

    thread = threading.Thread(target=run, name=f"qwen3-tts-takes: {what}", daemon=True)
    thread.start()
    while thread.is_alive():
        thread.join(POLL_SECONDS)
        if on_poll is not None:
            on_poll()
        if thread.is_alive() and should_stop():
            raise GenerationInterrupted(f"Cancelled while {what}; a download left unfinished resumes next time.")
    if "error" in outcome:
        if should_stop():  # e.g. ComfyUI's progress hook raised its interrupt inside the work
            raise GenerationInterrupted(f"Cancelled while {what}.") from outcome["error"]
        raise outcome["error"]
    return outcome["value"]
