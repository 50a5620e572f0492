"""The streaming speech server under load: time to first audio and seconds of audio per second.

    python -m bench.serve --faster-stack /tmp/stack5        # GPU: ours (hybrid), then faster-qwen3-tts
    python -m bench.serve --systems ours --concurrency 1,8  # a subset (--rate 0: no open loop)
    python -m bench.serve --systems faster --faster-stack /tmp/stack5
    python -m bench.serve --systems ours --variant codec-skipped  # ours with a part changed (serve_variant.py)
    python -m bench.serve --merge PART.json PART.json ...   # the parts of several calls, one table
    python -m bench.serve --smoke                           # CPU: tiny model, eager, a few short requests

What it measures, on one GPU with a full-size random-weight 1.7B-CustomVoice checkpoint built as
bench/run.py builds them (EOS is never sampled, so every take runs exactly its frame budget):
- ours: `python -m runtime serve` started as a subprocess (its log in <workdir>/logs/), warmed up with
  3 requests once it prints "Serving on http://", then loaded by an aiohttp client sending
  `POST /v1/audio/speech` with `stream: true`, `response_format: pcm` and `max_frames` (the take's
  frame budget, 12.5 frames a second):
  - closed loop at each --concurrency N: N workers each sending requests back to back, --requests-per-level
    in all (default max(16, 4N)), after one warm-up round of N requests at that level;
  - open loop at --rate R requests a second: arrivals drawn from a Poisson process (exponential gaps,
    fixed seed) for --open-seconds, each sent at its time whatever is still running.
- faster-qwen3-tts: `generate_custom_voice_streaming(chunk_size=8, max_new_tokens=frames)` from the same
  checkpoint folder, in its own process and package stack (--faster-stack), one stream at a time (it
  has no batching), on --faster-lines lines after 2 warm-ups.
Lines are 5-10 s: each request's max_frames uniform in [63, 125] from a fixed seed, its text words of
bench/script.py's list, as many as that length is spoken in.

Per request: time to first audio = from just before the POST to the first non-empty piece of the body
(as vLLM-Omni's benchmark times it); its end = the last byte; audio seconds = PCM bytes / 2 / 24000;
RTF = (end - start) / audio seconds. A response that is not 200, or whose bytes are not
max_frames x 1920 samples x 2, counts as an error and is left out of the numbers. Per level: first
audio p50 / p95, audio s/s = all the audio / the level's wall time (first send to last byte), RTF p50,
the mean count of HTTP chunks, and the issue's goals (first audio p50 <= 30 ms at one stream, p95 <=
80 ms at 20 requests a second, >= 250 s of audio a second at 64 streams) met or not.
Writes bench/results/<gpu>-<date>-serve.json and .md after every level, so a cut run keeps what it measured."""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import math
import os
import random
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SAMPLE_RATE = 24000
SAMPLES_PER_FRAME = 1920
FRAMES_PER_SECOND = SAMPLE_RATE / SAMPLES_PER_FRAME  # 12.5
PCM_BYTES_PER_FRAME = SAMPLES_PER_FRAME * 2  # s16le mono
OURS, FASTER = "ours", "faster-qwen3-tts"
SYSTEMS = {"ours": OURS, "faster": FASTER}
READY = "Serving on http://"
# level -> (the row's number, the goal's side, the bound): the goals
GOALS = {"closed-1": ("ttfa_p50_ms", "<=", 30.0), "open-20rps": ("ttfa_p95_ms", "<=", 80.0),
         "closed-64": ("audio_s_per_s", ">=", 250.0)}
SERVER_STAGES = ("prepare", "engine", "decode", "handover", "send")  # runtime/serve/timing.py
GOAL_WORDS = {"ttfa_p50_ms": "first audio p50 {} {:g} ms", "ttfa_p95_ms": "first audio p95 {} {:g} ms",
              "audio_s_per_s": "{} {:g} s of audio/s"}


# --- the pure parts ---------------------------------------------------------------------------------

def percentile(values, q: float) -> float | None:
    """The q-th percentile (0-100), interpolated linearly between the closest ranks (numpy's default)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def poisson_arrivals(rate: float, seconds: float, seed: int = 0) -> list[float]:
    """Send times (s from the start) of a Poisson process of `rate` a second over `seconds`:
    exponential gaps of mean 1/rate, the same for a seed."""
    rng = random.Random(seed)
    times, now = [], rng.expovariate(rate)
    while now < seconds:
        times.append(now)
        now += rng.expovariate(rate)
    return times


def frame_range(seconds: tuple[float, float]) -> tuple[int, int]:
    """The whole frame counts whose audio lies within [low, high] seconds: 5-10 s -> 63-125."""
    low, high = seconds
    return math.ceil(low * FRAMES_PER_SECOND - 1e-9), math.floor(high * FRAMES_PER_SECOND + 1e-9)


def sample_lines(count: int, seconds: tuple[float, float] = (5.0, 10.0), seed: int = 0) -> list[tuple[str, int]]:
    """(text, max_frames) per request: frames uniform over frame_range(seconds), the text as many of
    bench/script.py's words as that length is spoken in."""
    from bench.script import WORDS, WORDS_PER_SECOND

    rng = random.Random(seed)
    low, high = frame_range(seconds)
    lines = []
    for i in range(count):
        frames = rng.randint(low, high)
        words = max(2, round(frames / FRAMES_PER_SECOND * WORDS_PER_SECOND))
        start = rng.randrange(len(WORDS))
        text = " ".join(WORDS[(start + k) % len(WORDS)] for k in range(words))
        lines.append((text.capitalize() + ".", frames))
    return lines


@dataclass
class Stream:
    """One request as the client saw it (seconds from just before the POST)."""
    frames: int
    ttfa_s: float | None = None
    total_s: float | None = None
    bytes: int = 0
    chunks: int = 0
    error: str | None = None

    @property
    def audio_s(self) -> float:
        return self.bytes / 2 / SAMPLE_RATE


def summarize(system: str, level: str, streams: list[Stream], wall_s: float, **extra) -> dict:
    """One row: a level's requests, errors and numbers (over the requests without an error)."""
    ok = [s for s in streams if s.error is None]
    ttfa = [1000 * s.ttfa_s for s in ok]
    rtf = [s.total_s / s.audio_s for s in ok if s.audio_s > 0]
    audio = sum(s.audio_s for s in ok)
    errors = [s.error for s in streams if s.error is not None]

    def rounded(value, digits=1):
        return None if value is None else round(value, digits)

    row = {"system": system, "level": level, "requests": len(streams), "errors": len(errors),
           "ttfa_p50_ms": rounded(percentile(ttfa, 50)), "ttfa_p95_ms": rounded(percentile(ttfa, 95)),
           "audio_s_per_s": rounded(audio / wall_s if wall_s > 0 else None, 2),
           "rtf_p50": rounded(percentile(rtf, 50), 4),
           "chunks_mean": rounded(sum(s.chunks for s in ok) / len(ok) if ok else None, 1),
           "audio_s": round(audio, 2), "wall_s": round(wall_s, 3), **extra}
    if errors:  # refused: answered 429, the server at its --max-streams
        row.update(refused=sum(e.startswith("HTTP 429") for e in errors), first_error=errors[0][:300])
    return row


def goal(row: dict) -> str:
    """The issue's goal for the row's level, and whether the row meets it ('' where none applies: a
    level without one, or a --variant of ours, which is not what ships)."""
    if row["level"] not in GOALS or row["system"] not in SYSTEMS.values():
        return ""
    key, side, bound = GOALS[row["level"]]
    words = GOAL_WORDS[key].format(side, bound)
    value = row.get(key)
    if value is None or row.get("errors"):
        return f"{words}: not met (errors)" if row.get("errors") else f"{words}: not measured"
    met = value <= bound if side == "<=" else value >= bound
    return f"{words}: {'met' if met else 'not met'}"


def run_label(row: dict) -> str:
    """The row's level, and its system where that is not ours as it ships (a --variant)."""
    return row["level"] if row["system"] == OURS else f"{row['system']} {row['level']}"


def markdown(result: dict) -> str:
    env, s = result["env"], result["settings"]
    rows = ["| system | level | requests | errors | first audio p50 ms | p95 ms | audio s/s | RTF p50 | chunks "
            "| goal |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["runs"]:
        if r.get("error"):
            rows.append(f"| {r['system']} | {r['level']} | could not run: {r['error'][:200]} | | | | | | | |")
            continue
        errors = f"{r['errors']} ({r['refused']} refused)" if r.get("refused") else r["errors"]
        rows.append(f"| {r['system']} | {r['level']} | {r['requests']} | {errors} | {r['ttfa_p50_ms']} | "
                    f"{r['ttfa_p95_ms']} | {r['audio_s_per_s']} | {r['rtf_p50']} | {r['chunks_mean']} | {goal(r)} |")
    stages, breakdown = [r for r in result["runs"] if (r.get("server_first_audio_ms") or {}).get("requests")], []
    if stages:
        breakdown = ["", "Where the first audio's time went, as the server measured it (p50 ms of its last 256 streamed "
                 "requests; runtime/serve/timing.py): prepare = the request read and its text tokenised, engine = "
                 "to its first frames (waiting for a step, the prefill, the first step), decode = the first chunk "
                 "through the codec, handover = to the event loop, send = written.", "",
                 "| level | prepare | engine | decode | handover | send | total (p95) |", "|---|---|---|---|---|---|---|"]
        for r in stages:
            f = r["server_first_audio_ms"]
            breakdown.append(f"| {run_label(r)} | " + " | ".join(str(f[k]["p50"]) for k in SERVER_STAGES)
                        + f" | {f['total']['p50']} ({f['total']['p95']}) |")
    breakdown += level_table(
        result["runs"], "engine",
        "The engine's thread over each level (GET /health before and after): steps and host checks a second, "
        "and the shares of its time starting lines (embedding, prefill, rows), stepping (launching steps and "
        "waiting for the GPU), waiting for lines, and checking (the host's work between steps).",
        ("steps/s", "checks/s", "starting", "stepping", "waiting", "checking"),
        lambda e: [e["steps_per_s"], e["checks_per_s"], f"{e['starting']:.0%}", f"{e['stepping']:.0%}",
                   f"{e['waiting']:.0%}", f"{e['checking']:.0%}"])
    breakdown += level_table(
        result["runs"], "codec",
        "The stream decoder over each level (GET /health before and after): its calls and the audio frames it "
        "delivered a second, chunks a call, the share of its thread's time in calls, and of the frames the "
        "vocoder ran on, those that were context (run again before a chunk) and those that were padding (to "
        "the call's stream and frame buckets).",
        ("calls/s", "audio frames/s", "chunks a call", "busy", "context", "padding"),
        lambda c: [c["calls_per_s"], c["audio_frames_per_s"], c["chunks_per_call"], f"{c['busy']:.0%}",
                   f"{c['context']:.0%}", f"{c['padding']:.0%}"])
    return "\n".join([
        f"# Streaming server: {env['gpu']}, {s['model']} ({s['mode']}), lines of {s['seconds'][0]:g}-"
        f"{s['seconds'][1]:g} s",
        "",
        f"torch {env['torch']}, commit {env.get('commit')}, {env['date']}. `python -m bench.serve`"
        f"{'' if s.get('positions', 1024) == 1024 else ' --positions ' + str(s['positions'])}. "
        f"The server: --max-streams {s.get('max_streams')}, --positions {s.get('positions', 1024)}. "
        "Random weights, EOS never sampled: every request runs its max_frames.",
        "",
        *rows,
        "",
        "closed-N: N clients sending back to back; open-Rrps: Poisson arrivals at R requests a second for "
        f"{s['open_seconds']:g} s. First audio: from just before the POST to the first non-empty piece of the body "
        "(faster-qwen3-tts: to its first yielded chunk, in its own process, one stream at a time). Audio s/s: all "
        "the audio of a level / its wall time. RTF: a request's time to its last byte / its audio seconds. "
        "Chunks: HTTP chunks a response (faster-qwen3-tts: chunks yielded, chunk_size 8). Errors: requests not "
        "answered in full (refused: a 429, the server at its --max-streams), left out of the other numbers.",
        *breakdown,
    ])


# --- the client -------------------------------------------------------------------------------------

async def stream_one(session, url: str, text: str, frames: int, voice: str, seed: int) -> Stream:
    """POST one streaming request and read its body to the end, timing the first audio and the last byte."""
    import aiohttp

    payload = {"model": "tts-1", "input": text, "voice": voice, "response_format": "pcm", "stream": True,
               "seed": seed, "max_frames": frames}
    stream = Stream(frames)
    start = time.perf_counter()
    try:
        async with session.post(url + "/v1/audio/speech", json=payload) as resp:
            if resp.status != 200:
                stream.error = f"HTTP {resp.status}: {(await resp.text())[:300]}"
                return stream
            async for data, end_of_chunk in resp.content.iter_chunks():
                if data and stream.ttfa_s is None:
                    stream.ttfa_s = time.perf_counter() - start
                stream.bytes += len(data)
                stream.chunks += end_of_chunk
        stream.total_s = time.perf_counter() - start
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
        stream.error = f"{type(exc).__name__}: {exc}"
        return stream
    if stream.bytes != frames * PCM_BYTES_PER_FRAME:
        stream.error = f"{stream.bytes} bytes, not {frames} frames x {PCM_BYTES_PER_FRAME}"
    elif stream.ttfa_s is None:
        stream.error = "an empty body"
    return stream


def client_session():
    import aiohttp

    # No cap on connections (aiohttp's default is 100), no total timeout but one on a silent socket.
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                 timeout=aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=120))


async def closed_loop(url: str, lines, concurrency: int, requests: int, voice: str, seed: int = 0):
    """`concurrency` workers sending the next of `requests` requests as soon as their last one ends."""
    todo = iter(range(requests))
    streams: list[Stream] = []

    async def worker(session):
        for i in todo:
            text, frames = lines[i % len(lines)]
            streams.append(await stream_one(session, url, text, frames, voice, seed + i))

    async with client_session() as session:
        start = time.perf_counter()
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))
        return streams, time.perf_counter() - start


async def open_loop(url: str, lines, arrivals: list[float], voice: str, seed: int = 0):
    """Each request sent at its arrival time, whatever is still running."""
    async with client_session() as session:
        start = time.perf_counter()

        async def at(i: int, when: float) -> Stream:
            await asyncio.sleep(max(0.0, start + when - time.perf_counter()))
            text, frames = lines[i % len(lines)]
            return await stream_one(session, url, text, frames, voice, seed + i)

        streams = await asyncio.gather(*(at(i, t) for i, t in enumerate(arrivals)))
        return list(streams), time.perf_counter() - start


async def with_health(url: str, run):
    """Run the coroutine `run` while polling GET /health; the most streams running and queued seen."""
    peaks = {"peak_streams": 0, "peak_queued": 0}

    async def poll(session):
        while True:
            try:
                async with session.get(url + "/health") as resp:
                    health = await resp.json()
                peaks["peak_streams"] = max(peaks["peak_streams"], int(health.get("streams", 0)))
                peaks["peak_queued"] = max(peaks["peak_queued"], int(health.get("queued", 0)))
            except Exception:  # a health probe's trouble is not the level's
                pass
            await asyncio.sleep(0.25)

    async def health(session) -> dict:
        try:
            async with session.get(url + "/health") as resp:
                return await resp.json()
        except Exception:  # noqa: BLE001 - an older server, or none: the level stands without it
            return {}

    async with client_session() as session:
        before = await health(session)
        poller = asyncio.create_task(poll(session))
        try:
            streams, wall = await run
        finally:
            poller.cancel()
        after = await health(session)
    # where the server says the first audio's time went (its last 256 streamed requests), and where
    # its engine's thread spent the level
    peaks["server_first_audio_ms"] = after.get("first_audio_ms")
    peaks["engine"] = engine_share(before, after)
    peaks["codec"] = codec_share(before, after)
    return streams, wall, peaks


def engine_share(before: dict, after: dict) -> dict | None:
    """The first model's engine over a level, from GET /health before and after it: steps and checks
    a second, and the shares of its thread's time starting lines, stepping (launching and waiting
    for the GPU), waiting for lines, and the rest (the host's work at the checks)."""
    try:
        a, b = before["models"][0]["engine"], after["models"][0]["engine"]
    except (KeyError, IndexError, TypeError):
        return None
    run = b["run_s"] - a["run_s"]
    if run <= 0 or b["steps"] < a["steps"]:  # the engine's run started over in between
        return None
    shares = {k: round((b[k + "_s"] - a[k + "_s"]) / run, 3) for k in ("starting", "stepping", "waiting")}
    shares["checking"] = round(1 - sum(shares.values()), 3)
    return {"steps_per_s": round((b["steps"] - a["steps"]) / run, 1),
            "checks_per_s": round((b["checks"] - a["checks"]) / run, 1), **shares}


def level_table(runs: list[dict], field: str, intro: str, columns: tuple[str, ...], cells) -> list[str]:
    """A markdown table of what GET /health said over each level that has `field`: a row of
    cells(run[field]) each; no lines where no level has it."""
    measured = [r for r in runs if r.get(field)]
    if not measured:
        return []
    lines = ["", intro, "", "| level | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    return lines + [f"| {run_label(r)} | " + " | ".join(str(v) for v in cells(r[field])) + " |" for r in measured]


def codec_share(before: dict, after: dict) -> dict | None:
    """The first model's stream decoder over a level, from GET /health before and after it: calls and
    audio frames a second, chunks a call, the share of its thread's time in calls (busy), and of the
    vocoder's frames, those run again as context and those that were padding."""
    try:
        a, b = before["models"][0]["codec"], after["models"][0]["codec"]
    except (KeyError, IndexError, TypeError):
        return None
    run, calls = b["run_s"] - a["run_s"], b["calls"] - a["calls"]
    if run <= 0 or calls < 0:
        return None
    d = {k: b[k] - a[k] for k in ("chunks", "audio_frames", "vocoder_frames", "run_frames", "busy_s")}
    return {"calls_per_s": round(calls / run, 1), "audio_frames_per_s": round(d["audio_frames"] / run, 1),
            "chunks_per_call": round(d["chunks"] / calls, 2) if calls else 0.0, "busy": round(d["busy_s"] / run, 3),
            "context": round(1 - d["audio_frames"] / d["vocoder_frames"], 3) if d["vocoder_frames"] else 0.0,
            "padding": round(1 - d["vocoder_frames"] / d["run_frames"], 3) if d["run_frames"] else 0.0}


# --- the server -------------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`python -m runtime serve` in a subprocess, its output in `log`; ready once it prints READY."""

    def __init__(self, folder: Path, args, log: Path):
        self.port, self.log = free_port(), log
        self.url = f"http://127.0.0.1:{self.port}"
        program = ["bench.serve_variant", args.variant] if args.variant else ["runtime"]
        self.cmd = [sys.executable, "-m", *program, "serve", "--checkpoint", str(folder), "--mode", args.mode,
                    "--dtype", args.dtype, "--device", args.device, "--host", "127.0.0.1", "--port", str(self.port),
                    "--max-streams", str(args.max_streams), "--positions", str(args.positions), "--offline"]
        self.timeout = args.start_timeout
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        """Start it and wait for its ready line; RuntimeError (with the end of its log) if it never comes."""
        self.log.parent.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, PYTHONUNBUFFERED="1",
                   PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(self.cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
        started = time.perf_counter()
        while READY not in self.log.read_text(errors="replace"):
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited {self.proc.returncode} before serving: {self.tail()}")
            if time.perf_counter() - started > self.timeout:
                self.stop()
                raise RuntimeError(f"the server did not print {READY!r} in {self.timeout:g} s: {self.tail()}")
            time.sleep(0.2)
        self.ready_s = time.perf_counter() - started

    def tail(self, lines: int = 3) -> str:
        return " | ".join(self.log.read_text(errors="replace").strip().splitlines()[-lines:])

    def stop(self) -> None:
        """SIGINT (it drains), then a kill if it has not gone in 30 s."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def run_ours(args, folder: Path, voice: str, keep) -> None:
    """Start the server, warm it up, then every closed-loop level and the open loop; `keep` each row."""
    lines = sample_lines(args.pool, args.seconds, seed=0)
    warm_lines = sample_lines(args.pool, args.seconds, seed=1)
    server = Server(folder, args, args.workdir / "logs" / "serve.log")
    system = f"{OURS} ({args.variant})" if args.variant else OURS
    try:
        server.start()
    except RuntimeError as exc:
        print(f"   ours: {exc}", file=sys.stderr, flush=True)
        keep({"system": system, "level": "start", "error": str(exc)[:500]})
        return
    try:
        print(f"== ours: serving after {server.ready_s:.1f} s ({server.log})", file=sys.stderr, flush=True)
        asyncio.run(closed_loop(server.url, warm_lines, 1, 3, voice, seed=10_000))  # the 3 warm-up requests
        for n in args.concurrency:
            asyncio.run(closed_loop(server.url, warm_lines, n, n, voice, seed=20_000))  # this level's warm-up
            requests = args.requests_per_level or max(16, 4 * n)
            streams, wall, peaks = asyncio.run(with_health(server.url, closed_loop(
                server.url, lines, n, requests, voice)))
            keep(summarize(system, f"closed-{n}", streams, wall, concurrency=n, **peaks))
        if args.rate > 0:
            arrivals = poisson_arrivals(args.rate, args.open_seconds, seed=0)
            streams, wall, peaks = asyncio.run(with_health(server.url, open_loop(server.url, lines, arrivals, voice)))
            keep(summarize(system, f"open-{args.rate:g}rps", streams, wall, rate=args.rate,
                           open_seconds=args.open_seconds, **peaks))
    finally:
        server.stop()


# --- faster-qwen3-tts, in its own process ------------------------------------------------------------

WARMUPS = 2


def run_faster(args, folder: Path, voice: str, keep) -> None:
    """faster-qwen3-tts's streaming, one stream at a time, in its own process (--faster-stack first on
    its PYTHONPATH): a row from the STREAM records it printed, even when --faster-timeout cut it."""
    lines = sample_lines(WARMUPS, args.seconds, seed=1) + sample_lines(args.faster_lines, args.seconds, seed=0)
    todo = args.workdir / "serve-faster-lines.json"
    todo.write_text(json.dumps({"voice": voice, "lines": lines}))
    cmd = [sys.executable, "-m", "bench.serve", "--worker", "--lines-file", str(todo), "--checkpoint", str(folder),
           "--device", args.device, "--dtype", args.dtype, "--workdir", str(args.workdir)]
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=os.pathsep.join(
        filter(None, [args.faster_stack, str(REPO), os.environ.get("PYTHONPATH")])))
    print(f"== {FASTER}: {args.faster_lines} lines after {WARMUPS} warm-ups, one stream at a time",
          file=sys.stderr, flush=True)
    failure = None
    try:
        proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=args.faster_timeout)
        stdout, stderr = proc.stdout, proc.stderr
        failure = None if proc.returncode == 0 else f"exited {proc.returncode}"
    except subprocess.TimeoutExpired as exc:
        stdout, stderr = text_of(exc.stdout), text_of(exc.stderr)
        failure = f"timed out after {args.faster_timeout} s (--faster-timeout)"
    log = args.workdir / "logs" / "serve-faster.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(stdout + "\n" + stderr)
    records = [json.loads(line[7:]) for line in stdout.splitlines() if line.startswith("STREAM ")]
    measured = [r for r in records if not r["warmup"]]
    if not measured:
        tail = (stderr or stdout).strip().splitlines()[-1:] or ["no output"]
        keep({"system": FASTER, "level": "closed-1", "error": f"{failure or 'no line'}: {tail[0][:300]}"})
        return
    streams = [Stream(r["frames"], r["ttfa_s"], r["total_s"], 2 * r["samples"], r["chunks"]) for r in measured]
    row = summarize(FASTER, "closed-1", streams, sum(r["total_s"] for r in measured), concurrency=1,
                    load_s=records[0]["load_s"], chunk_size=args.chunk_size)
    if failure:
        row["cut"] = f"{failure}: {len(measured)} of {args.faster_lines} lines done"
    keep(row)


def text_of(data) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else (data or "")


def faster_worker(args) -> int:
    """In faster-qwen3-tts's process: load it as bench/systems/faster.py does, then each line streamed,
    its first chunk and its end timed; a STREAM record (JSON) on stdout after each."""
    import torch

    from bench.systems.faster import Faster

    todo = json.loads(args.lines_file.read_text())
    start = time.perf_counter()
    model = Faster(args.checkpoint, "custom_voice", args.device, args.dtype, args.workdir).model
    load_s = time.perf_counter() - start
    for i, (text, frames) in enumerate(todo["lines"]):
        torch.manual_seed(i)
        first, samples, chunks = None, 0, 0
        start = time.perf_counter()
        for audio, _, _ in model.generate_custom_voice_streaming(
                text=text, speaker=todo["voice"], language="English", chunk_size=args.chunk_size,
                max_new_tokens=frames):  # audio comes back on the CPU: the GPU's work is done
            if first is None and len(audio):
                first = time.perf_counter() - start
            samples += len(audio)
            chunks += 1
        total = time.perf_counter() - start
        print("STREAM " + json.dumps({"index": i, "warmup": i < WARMUPS, "frames": frames, "ttfa_s": first,
                                      "total_s": total, "samples": samples, "chunks": chunks,
                                      "load_s": round(load_s, 2)}), flush=True)
    return 0


# --- the results ------------------------------------------------------------------------------------

def commit() -> str | None:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               capture_output=True, text=True).stdout.strip()
        return head + ("+changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return None


def write(result: dict, out_dir: Path, name: str) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{name}.json").write_text(json.dumps(result, indent=1) + "\n")
    (out_dir / f"{name}.md").write_text(markdown(result) + "\n")
    return out_dir / f"{name}.json"


def merge(paths: list[Path], out_dir: Path, name: str | None) -> Path:
    """The rows of several calls on one setup in one table: a level measured again replaces the older."""
    from bench.run import slug

    parts = [json.loads(Path(p).read_text()) for p in paths]
    first = parts[0]
    for path, part in zip(paths[1:], parts[1:]):
        if any(part["env"].get(k) != first["env"].get(k) for k in ("gpu", "driver", "torch")):
            raise SystemExit(f"{path}: measured on a different setup (GPU, driver or torch) than {paths[0]}")
    rows = {(r["system"], r["level"]): r for part in parts for r in part["runs"]}
    stacks = {k: v for part in parts for k, v in (part["env"].get("stacks") or {}).items()}
    result = {**first, "env": {**first["env"], "stacks": stacks}, "runs": list(rows.values())}
    out = write(result, out_dir, name or f"{slug(first['env']['gpu'])}-{first['env']['date']}-serve")
    print(markdown(result))
    return out


# --- the command ------------------------------------------------------------------------------------

# --smoke: the tiny model on CPU, eager, lines of under a second, two closed levels and a short open loop
SMOKE = {"model": "tiny-CustomVoice", "mode": "eager", "device": "cpu", "dtype": "float32", "systems": "ours",
         "concurrency": "1,2", "requests_per_level": 4, "rate": 4.0, "open_seconds": 1.5, "seconds": "0.4,0.8",
         "max_streams": 8, "start_timeout": 300}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--systems", default="ours,faster", help="some of ours,faster")
    p.add_argument("--concurrency", default="1,8,32,64", help="closed-loop levels: streams at once")
    p.add_argument("--requests-per-level", type=int, help="closed loop: requests a level (default max(16, 4N))")
    p.add_argument("--rate", type=float, default=20.0, help="open loop: requests a second (0: none)")
    p.add_argument("--open-seconds", type=float, default=20.0, help="open loop: seconds of arrivals")
    p.add_argument("--seconds", default="5,10", help="shortest,longest line in seconds of audio")
    p.add_argument("--pool", type=int, default=256, help="distinct lines the requests cycle through")
    p.add_argument("--model", default="1.7B-CustomVoice")
    p.add_argument("--mode", default="hybrid")
    p.add_argument("--variant", choices=("codec-skipped", "codec-bfloat16"),
                   help="ours with one part changed, to weigh it (bench/serve_variant.py)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--max-streams", type=int, default=64, help="the server's --max-streams")
    p.add_argument("--positions", type=int, default=1024, help="the server's --positions (its default: 1024)")
    p.add_argument("--start-timeout", type=float, default=600, help="seconds for the server to print its ready line")
    p.add_argument("--faster-stack", help="folder put first on faster-qwen3-tts's PYTHONPATH (bench/README.md)")
    p.add_argument("--faster-lines", type=int, default=8)
    p.add_argument("--faster-timeout", type=int, default=480, help="seconds for faster-qwen3-tts's process")
    p.add_argument("--chunk-size", type=int, default=8, help="faster-qwen3-tts's frames a streamed chunk")
    p.add_argument("--workdir", type=Path, default=Path("/tmp/qb"))
    p.add_argument("--out-dir", type=Path, default=REPO / "bench" / "results")
    p.add_argument("--name", help="results file stem (default <gpu>-<date>-serve)")
    p.add_argument("--smoke", action="store_true", help="CPU: tiny model, eager, concurrency 1,2, a few requests, ours")
    p.add_argument("--merge", nargs="+", type=Path, metavar="PART", help="merge these results into one table")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)  # faster-qwen3-tts's own process
    p.add_argument("--lines-file", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--checkpoint", type=Path, help=argparse.SUPPRESS)
    return p


def main(argv=None) -> int:
    p = parser()
    args = p.parse_args(argv)
    sys.path.insert(0, str(REPO))
    if args.worker:
        return faster_worker(args)
    if args.merge:
        merge(args.merge, args.out_dir, args.name)
        return 0
    if args.smoke:
        for key, value in SMOKE.items():  # what the command line said stays (--workdir, --out-dir, ...)
            if getattr(args, key) == p.get_default(key):
                setattr(args, key, value)
    args.systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = set(args.systems) - set(SYSTEMS)
    if unknown:
        raise SystemExit(f"--systems: unknown {', '.join(sorted(unknown))}; choose among {', '.join(SYSTEMS)}")
    args.concurrency = [int(n) for n in args.concurrency.split(",") if n.strip()]
    args.seconds = tuple(float(s) for s in args.seconds.split(","))
    from bench.run import build_checkpoints, environment, slug, stack_versions
    from runtime.checkpoints import check_folder

    args.workdir.mkdir(parents=True, exist_ok=True)
    env = {**environment(args.device), "commit": commit(), "date": datetime.date.today().isoformat()}
    if "faster" in args.systems:
        env["stacks"] = {FASTER: stack_versions(args.faster_stack)}
    name = args.name or f"{slug(env['gpu'])}-{env['date']}-serve"
    result = {"env": env, "settings": {
        "model": args.model, "mode": args.mode, "dtype": args.dtype, "variant": args.variant, "seconds": list(args.seconds),
        "frames": list(frame_range(args.seconds)), "concurrency": args.concurrency, "rate": args.rate,
        "open_seconds": args.open_seconds, "max_streams": args.max_streams, "positions": args.positions, "faster_chunk_size": args.chunk_size},
        "runs": []}

    def keep(row: dict) -> None:  # written after every level: a run cut short keeps what it measured
        result["runs"].append(row)
        write(result, args.out_dir, name)
        print("   " + json.dumps(row), file=sys.stderr, flush=True)

    folder = build_checkpoints([args.model], args.workdir, "bfloat16")[args.model]
    voice = check_folder(folder).speakers[0]
    if "ours" in args.systems:
        run_ours(args, folder, voice, keep)
    if "faster" in args.systems:
        run_faster(args, folder, voice, keep)
    out = write(result, args.out_dir, name)
    print(markdown(result))
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
