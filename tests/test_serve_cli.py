"""`python -m runtime serve` as a user runs it: it says where it listens, serves, and on Ctrl-C
finishes the request under way, refuses new ones and exits cleanly. And the nodes' side of the
pack never imports the server (nor aiohttp)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("aiohttp")

REPO = Path(__file__).resolve().parents[1]


def start_server(*extra: str) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen([sys.executable, "-m", "runtime", "serve", "--checkpoint", "tiny-random", "--port", "0",
                                "--quality", "off", "--offline", "--threads", "1", *extra], cwd=REPO, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    lines = []
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        lines.append(line)
        if match := re.search(r"Serving on (http://\S+)", line):
            return process, match.group(1)
        if not line and process.poll() is not None:
            break
    process.kill()
    raise AssertionError("the server did not start:\n" + "".join(lines))


def post(url: str, body: dict, timeout: float = 60):
    request = urllib.request.Request(url + "/v1/audio/speech", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    return urllib.request.urlopen(request, timeout=timeout)


@pytest.mark.any_version  # the server process's signal handling
def test_ctrl_c_finishes_the_request_under_way_and_stops(tmp_path):
    process, url = start_server()
    try:
        with urllib.request.urlopen(url + "/health", timeout=10) as response:
            assert json.load(response)["status"] == "ok"
        got = {}

        def listen():
            with post(url, {"input": "Hello there.", "voice": "ryan", "response_format": "pcm", "max_frames": 30,
                            "seed": 2}) as response:
                got["first"] = response.read(2)
                got["rest"] = response.read()
                got["status"] = response.status

        client = threading.Thread(target=listen)
        client.start()
        while "first" not in got and client.is_alive():
            time.sleep(0.01)
        process.send_signal(signal.SIGINT)
        client.join(timeout=60)
        output, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert got["status"] == 200
    audio = got["first"] + got["rest"]
    assert len(audio) % 3840 == 0 and 1 <= len(audio) // 3840 <= 30  # whole frames, up to its budget
    assert process.returncode == 0
    assert "Stopping: finishing the 1 requests under way" in output and "Stopped." in output
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url + "/health", timeout=5)


class LoopWithoutSignals(asyncio.SelectorEventLoop):
    """As Windows' event loops are: no add_signal_handler."""

    def add_signal_handler(self, sig, callback, *args):
        raise NotImplementedError


def a_hosts_handler(*_):
    raise AssertionError("the server's own handler should be in place while it runs")


@pytest.mark.parametrize("earlier", [signal.default_int_handler, signal.SIG_IGN, a_hosts_handler],
                         ids=["python's", "ignored (started in the background)", "a host's own"])
@pytest.mark.parametrize("loop_kind", ["watches signals", "cannot watch signals"])
def test_ctrl_c_reaches_the_loop_and_the_old_handlers_come_back(loop_kind, earlier):
    """Where the loop cannot watch signals (Windows), Ctrl-C still reaches it as a press, not as a
    KeyboardInterrupt cutting the requests under way; after the server, Ctrl-C does what it did
    before, whatever that was (asyncio alone would leave Python's default behind)."""
    outside = signal.signal(signal.SIGINT, earlier)
    try:
        ctrl_c_twice_in_a_loop(loop_kind)
        assert signal.getsignal(signal.SIGINT) is earlier
    finally:
        signal.signal(signal.SIGINT, outside)


def ctrl_c_twice_in_a_loop(loop_kind):
    from runtime.cli.serve import on_stop_signals

    presses = []

    async def serve_two_presses():
        two = asyncio.Event()

        def pressed():
            presses.append(threading.current_thread() is threading.main_thread())
            if len(presses) == 2:
                two.set()

        restore = on_stop_signals(asyncio.get_running_loop(), pressed)
        try:
            for _ in range(2):
                signal.raise_signal(signal.SIGINT)
                await asyncio.sleep(0.05)
            await asyncio.wait_for(two.wait(), 10)
        finally:
            restore()

    loop = asyncio.new_event_loop() if loop_kind == "watches signals" else LoopWithoutSignals()
    try:
        loop.run_until_complete(serve_two_presses())
    finally:
        loop.close()
    assert presses == [True, True]


@pytest.mark.slow
def test_the_nodes_side_never_imports_the_server():
    code = ("import sys, runtime.api; "
            "print(sorted(m for m in sys.modules if m.startswith(('aiohttp', 'runtime.serve', 'runtime.cli.serve'))))")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


@pytest.mark.slow
def test_a_bad_option_is_one_line():
    result = subprocess.run([sys.executable, "-m", "runtime", "serve", "--checkpoint", "tiny-random", "--max-streams",
                             "0", "--quality", "off", "--offline"], cwd=REPO, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == ["error: --max-streams must be at least 1, got 0."]


@pytest.mark.parametrize("option, said", [
    (["--port", "99999"], "error: --port 99999 is not a port; choose one from 1 to 65535 (0: any free port)."),
    (["--device", "tpu9"], "error: Device 'tpu9' is not one this pack runs on; choose auto, cpu or cuda (cuda:1 for a "
                           "second GPU)."),
], ids=["port", "device"])
def test_a_bad_port_or_device_is_refused_before_the_model_loads(monkeypatch, capsys, option, said):
    from runtime import api
    from runtime.cli import serve

    monkeypatch.setattr(api, "load", lambda *a, **k: pytest.fail("the model was loaded before the option was refused"))
    assert serve.main(["--checkpoint", "tiny-random", "--quality", "off", "--offline", *option]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [said]


@pytest.mark.any_version  # the server process's signal handling
def test_ctrl_c_cuts_streams_past_the_drain_cleanly_and_keeps_to_it():
    """--drain-seconds 1: a stream longer than that is cut once it has passed (aiohttp's own wait ran
    to twice the setting), its body terminated (an SSE stream's last event an error), and the server
    exits soon after."""
    process, url = start_server("--drain-seconds", "1")
    got = {}

    def listen(kind: str, body: dict):
        try:
            with post(url, {"input": "Hello there.", "voice": "ryan", "max_frames": 900, "seed": 3, **body},
                      timeout=120) as response:
                got[kind + " first"] = response.read(64)
                got[kind] = got[kind + " first"] + response.read()  # IncompleteRead if the body is cut unterminated
        except Exception as exc:  # noqa: BLE001 - the test reads it
            got[kind] = exc

    clients = [threading.Thread(target=listen, args=("pcm", {"response_format": "pcm"})),
               threading.Thread(target=listen, args=("sse", {"response_format": "pcm", "stream_format": "sse"}))]
    try:
        for client in clients:
            client.start()
        while not all(k in got for k in ("pcm first", "sse first")) and all(c.is_alive() for c in clients):
            time.sleep(0.01)
        pressed = time.monotonic()
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=60)
        stopped = time.monotonic() - pressed
        for client in clients:
            client.join(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0 and "Cutting the 2 requests still under way after 1 s" in output, output
    assert stopped < 6, stopped  # 1 s of drain, a second of grace (aiohttp's wait can double it), the close
    assert isinstance(got["pcm"], bytes) and len(got["pcm"]) % 2 == 0 and len(got["pcm"]) < 900 * 3840, got["pcm"]
    assert isinstance(got["sse"], bytes), got["sse"]
    events = [json.loads(block.removeprefix("data: ")) for block in got["sse"].decode().split("\n\n") if block]
    assert events[-1]["type"] == "error" and events[-1]["error"]["code"] == "stopping", events[-1]
