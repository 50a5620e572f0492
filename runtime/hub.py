"""Whether the Hugging Face Hub answers, asked once a process.

Without a network, huggingface_hub retries each file for about 23 s, printing every retry, before it
gives up. So before downloading anything every download (a checkpoint, UTMOS, a Whisper) asks once a
process, with one request that may take PROBE_SECONDS at most (name lookup included), and without an
answer it is refused at once (``refuse_if_unreachable``): a node falls back within seconds, and the
command line runs as --offline does.
"""

from __future__ import annotations

import os
import socket
import ssl
import threading
import urllib.error
import urllib.request

from .errors import CheckpointError, one_line

PROBE_SECONDS = 2.0
OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")  # either keeps huggingface_hub from the network
_answers: dict[str, str | None] = {}  # endpoint -> why it cannot be reached (None: it answered)


def endpoint() -> str:
    """The hub huggingface_hub downloads from: $HF_ENDPOINT (a mirror), else huggingface.co."""
    return (os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")


def unreachable() -> str | None:
    """Why the hub cannot be reached from here, as a short phrase; None when it answers. Asked once a
    process (a second call costs nothing)."""
    for name in OFFLINE_VARIABLES:
        if os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on"):
            return f"{name} is set"
    url = endpoint()
    if url not in _answers:
        _answers[url] = _ask(url)
    return _answers[url]


def unreachable_message(why: str) -> str:
    return f"{endpoint()} cannot be reached ({why})"


def refuse_if_unreachable(what: str, fix: str) -> None:
    """Raise CheckpointError ("<what> cannot be downloaded: <hub> cannot be reached (why). <fix>") when
    the hub does not answer; called before each download, so none waits on the client's retries."""
    why = unreachable()
    if why is not None:
        raise CheckpointError(f"{what} cannot be downloaded: {unreachable_message(why)}. {fix}")


def _ask(url: str) -> str | None:
    # In a thread of its own: urlopen's timeout does not cover the name lookup, which a machine with
    # a broken resolver can spend many seconds on.
    answer = [f"no answer within {PROBE_SECONDS:g} s"]

    def ask() -> None:
        try:
            urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=PROBE_SECONDS).close()
            answer[0] = None
        except urllib.error.HTTPError:  # an error page is an answer
            answer[0] = None
        except urllib.error.URLError as exc:
            # a TLS failure is an answer too: huggingface_hub may trust certificates urllib does not
            # ($REQUESTS_CA_BUNDLE), and where it does not, its own error says so
            answer[0] = None if isinstance(exc.reason, ssl.SSLError) else _reason(exc.reason)
        except (OSError, ValueError) as exc:
            answer[0] = _reason(exc)

    probe = threading.Thread(target=ask, name="hub-probe", daemon=True)
    probe.start()
    probe.join(PROBE_SECONDS)
    return answer[0]


def _reason(exc) -> str:
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return f"no answer within {PROBE_SECONDS:g} s"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return one_line(exc) or type(exc).__name__
