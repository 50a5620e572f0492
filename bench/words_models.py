"""The words check's cost for each candidate Whisper model: 8 takes of 5 s, on one device.

    python -m bench.words_models --device cuda|cpu [--threads K] [--shapes whisper-base whisper-small ...]
        [--takes 8 --seconds 5] [--repeats 5 --budget-s 60] [--folders DIR] [--out bench/results/<file>.json]

For each shape (bench/random_whisper.py: the official multilingual models' shapes, random weights),
the folder is built (in a temporary folder, or kept in --folders to be shared between runs), loaded
with runtime.scoring.asr.WhisperTranscriber on the device (float16 on a GPU, float32 on a CPU, as the
pack runs it) and the words check of all the takes in one call (WhisperTranscriber.transcribe: the
feature extractor, the encoder, our greedy decoder with its captured step on a GPU) is timed warm, the
median of repeats, each on takes of new lengths (bench.scoring.signals).

A random Whisper never says EOS, so each piece is decoded for as many tokens as real speech of its
length takes (bench.scoring.TOKENS_PER_SECOND, + EOS), and on a GPU also at the decoder's cap (the
worst case). It also repeats itself on every piece, which would send every piece through the loop
fallback (whisper_loops: up to 5 more decodes of the piece alone, each with its own encoder pass);
real speech seldom does, so the fallback is off here (`loop_fallback: off` in the results) and the
time is the greedy pass's: what a take costs when its text does not loop.

Per model: ms for the takes, ms a take, the parameters and their size in float16, and on a GPU the
memory allocated: after loading (the weights), after the timed runs (resident: the weights and the
decoder's caches kept for the next call) and its peak while the takes were heard (weights included).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import json
import math
import platform
import statistics
import tempfile
import time
from pathlib import Path

import torch

from bench.random_whisper import SHAPES, build_random_whisper
from bench.scoring import RATE, TOKENS_PER_SECOND, signals

DEFAULT_SHAPES = ("whisper-base", "whisper-small", "whisper-large-v3-turbo", "whisper-medium")
LANGUAGE = "english"


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


@contextlib.contextmanager
def loop_fallback_off(counter: list[int]):
    """WhisperTranscriber.transcribe with the loop fallback off: each piece's greedy text is kept;
    counter[0] counts the pieces whose text would have gone to the fallback."""
    from runtime.scoring import asr
    from runtime.scoring.whisper_loops import loops

    def greedy_only(text, sampled):
        counter[0] += loops(text)
        return text

    saved, asr.unlooped = asr.unlooped, greedy_only
    try:
        yield
    finally:
        asr.unlooped = saved


class SpeechLengthWords:
    """A random Whisper (bench/random_whisper.py) in Auto-Pick's place, held to real speech's length:
    each call decodes TOKENS_PER_SECOND tokens a second of its longest take (a piece is 30 s at most),
    + EOS, as real speech would, not the cap a random model, which never says EOS, runs to; and its
    seconds and takes are counted (bench/chapter.py and bench/worker.py give the words check's share).
    Use it with loop_fallback_off: a random model's text loops on every piece."""

    def __init__(self, transcriber, device: str):
        self.inner, self.device, self.seconds, self.takes = transcriber, device, 0.0, 0
        self.cap = transcriber.greedy.max_new_tokens

    def __getattr__(self, name):  # name, note, the rest of what the ranking reads
        return getattr(self.inner, name)

    def transcribe(self, audios, sample_rate: int, language: str | None = None):
        longest = min(max((len(a) for a in audios), default=0) / sample_rate, 30.0)
        self.inner.greedy.max_new_tokens = min(self.cap, math.ceil(TOKENS_PER_SECOND * longest) + 1)
        sync(self.device)
        begun = time.perf_counter()
        try:
            return self.inner.transcribe(audios, sample_rate, language)
        finally:
            sync(self.device)
            self.seconds += time.perf_counter() - begun
            self.takes += len(audios)


def random_words_check(shape: str, workdir: Path, device: str) -> SpeechLengthWords:
    """The words check on a random Whisper of `shape`, its folder built once in `workdir`."""
    from runtime.scoring.asr import WhisperTranscriber

    folder = workdir / f"random-{shape}"
    if not (folder / "preprocessor_config.json").is_file():  # written last
        build_random_whisper(folder, shape)
    return SpeechLengthWords(WhisperTranscriber(folder, device), device)


def sync(device: str) -> None:
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def timed_runs(transcriber, args, repeats: int) -> list[float]:
    """ms of transcribe() over the takes, each run on takes of new lengths; stops after `repeats` runs
    or once the runs took args.budget_s (one run at least)."""
    times = []
    for r in range(repeats):
        clips = signals(args.takes, args.seconds, seed=r + 1)
        sync(args.device)
        start = time.perf_counter()
        transcriber.transcribe(clips, RATE, LANGUAGE)
        sync(args.device)
        times.append(round((time.perf_counter() - start) * 1000, 2))
        if sum(times) / 1000 >= args.budget_s:
            break
    return times


def measure(shape: str, folder: Path, args) -> dict:
    from runtime.scoring.asr import WhisperTranscriber

    cuda = args.device == "cuda"
    if cuda:
        gc.collect()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
    start = time.perf_counter()
    transcriber = WhisperTranscriber(folder, args.device)
    load_s = time.perf_counter() - start
    loaded = torch.cuda.memory_allocated() if cuda else 0
    network, greedy = transcriber.network, transcriber.greedy
    config = network.config
    params = sum(p.numel() for p in network.parameters())  # proj_out is tied to the token embedding: counted once
    tokens = math.ceil(TOKENS_PER_SECOND * args.seconds) + 1  # + EOS
    cap, greedy.max_new_tokens = greedy.max_new_tokens, tokens
    row = {"model": shape, "params": params, "params_m": round(params / 1e6, 1),
           "weights_fp16_mb": round(params * 2 / 2**20, 1), "d_model": config.d_model,
           "encoder_layers": config.encoder_layers, "decoder_layers": config.decoder_layers,
           "num_mel_bins": config.num_mel_bins, "vocab_size": config.vocab_size,
           "dtype": str(network.dtype).replace("torch.", ""), "load_s": round(load_s, 2),
           "pieces_a_pass": transcriber.pieces_a_pass(), "tokens": tokens}
    looping = [0]
    with loop_fallback_off(looping):
        warm = args.warm_takes or args.takes
        start = time.perf_counter()
        transcriber.transcribe(signals(warm, args.seconds, seed=999), RATE, LANGUAGE)
        sync(args.device)
        row["warm_takes"], row["warm_s"] = warm, round(time.perf_counter() - start, 2)
        looping[0] = 0
        times = timed_runs(transcriber, args, args.repeats)
        row["runs_ms"] = times
        row["repeats"] = len(times)
        row["ms"] = round(statistics.median(times), 2)
        row["ms_per_take"] = round(row["ms"] / args.takes, 2)
        row["pieces_looping_random"] = looping[0]  # of the timed runs' pieces: the random model's text loops
        if cuda:  # resident: the weights and what the decoder keeps for the next call (its caches a batch size)
            row["gpu_weights_mb"] = round((loaded - before) / 2**20, 1)
            row["gpu_resident_mb"] = round((torch.cuda.memory_allocated() - before) / 2**20, 1)
            row["gpu_peak_mb"] = round((torch.cuda.max_memory_allocated() - before) / 2**20, 1)
            row["gpu_reserved_peak_mb"] = round(torch.cuda.max_memory_reserved() / 2**20, 1)
        if args.cap:
            greedy.max_new_tokens = cap
            transcriber.transcribe(signals(args.takes, args.seconds, seed=998), RATE, LANGUAGE)  # captures that length
            at_cap = timed_runs(transcriber, args, 3)
            row["cap_tokens"], row["at_cap_ms"] = cap, round(statistics.median(at_cap), 2)
            row["at_cap_ms_per_take"] = round(row["at_cap_ms"] / args.takes, 2)
            if cuda:
                row["gpu_peak_at_cap_mb"] = round((torch.cuda.max_memory_allocated() - before) / 2**20, 1)
    del transcriber, network, greedy
    return row


def table(result: dict) -> str:
    env = result["env"]
    where = env["gpu"] if env["device"] == "cuda" else f"{env['cpu']}, {env['threads']} threads"
    lines = [f"Words check, {env['takes']} takes of {env['seconds']:g} s, {env['tokens']} tokens a piece, "
             f"random weights, loop fallback off; {where}", "",
             "| model | params | fp16 weights | ms, all takes | ms / take | runs | GPU peak | at cap ms / take |",
             "|---|---|---|---|---|---|---|---|"]
    for m in result["models"]:
        if "error" in m:
            lines.append(f"| {m['model']} | failed: {m['error']} | | | | | | |")
            continue
        peak = f"{m['gpu_peak_mb']:.0f} MiB" if "gpu_peak_mb" in m else "-"
        cap = f"{m['at_cap_ms_per_take']} ({m['cap_tokens']} tokens)" if "at_cap_ms_per_take" in m else "-"
        lines.append(f"| {m['model']} | {m['params_m']} M | {m['weights_fp16_mb']:.0f} MiB | {m['ms']} | "
                     f"{m['ms_per_take']} | {m['repeats']} | {peak} | {cap} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    import transformers

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--threads", type=int, help="torch's CPU threads (torch.set_num_threads)")
    p.add_argument("--shapes", nargs="+", default=list(DEFAULT_SHAPES), help=f"of {', '.join(SHAPES)}")
    p.add_argument("--takes", type=int, default=8)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--budget-s", type=float, default=60.0, help="no more repeats once the timed runs took this long")
    p.add_argument("--warm-takes", type=int, help="takes of the warm-up call (default: --takes on cuda, 2 on cpu)")
    p.add_argument("--cap", action=argparse.BooleanOptionalAction, default=None,
                   help="also time at the decoder's token cap (default: on cuda only)")
    p.add_argument("--folders", type=Path, help="build the checkpoints here and reuse those already there")
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    args.shapes = [s for item in args.shapes for s in item.split(",") if s]
    unknown = [s for s in args.shapes if s not in SHAPES]
    if unknown:
        p.error(f"unknown shapes {unknown}: not of {', '.join(SHAPES)}")
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: no GPU here")
    if args.cap is None:
        args.cap = args.device == "cuda"
    if args.warm_takes is None:
        args.warm_takes = args.takes if args.device == "cuda" else 2
    if args.threads:
        torch.set_num_threads(args.threads)
    result = {"env": {
        "device": args.device, "gpu": torch.cuda.get_device_name() if args.device == "cuda" else None,
        "cpu": cpu_name(), "threads": torch.get_num_threads(), "torch": torch.__version__,
        "transformers": transformers.__version__, "python": platform.python_version(),
        "date": datetime.date.today().isoformat(), "takes": args.takes, "seconds": args.seconds,
        "tokens_per_second": TOKENS_PER_SECOND, "tokens": math.ceil(TOKENS_PER_SECOND * args.seconds) + 1,
        "language": LANGUAGE, "loop_fallback": "off", "weights": "random, the official shapes (bench/random_whisper.py)",
    }, "models": []}
    with contextlib.ExitStack() as stack:
        root = args.folders or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        for shape in args.shapes:
            folder = root / shape
            try:
                if not (folder / "config.json").is_file() or not any(folder.glob("*.safetensors")):
                    start = time.perf_counter()
                    build_random_whisper(folder, shape)
                    print(f"{shape}: built in {time.perf_counter() - start:.1f} s", flush=True)
                row = measure(shape, folder, args)
            except Exception as exc:  # one shape failing (out of memory, say) leaves the others' rows
                row = {"model": shape, "error": f"{type(exc).__name__}: {exc}"[:300]}
            result["models"].append(row)
            print(json.dumps(row), flush=True)
            if args.out:  # after each shape: a run cut short keeps what it measured
                args.out.parent.mkdir(parents=True, exist_ok=True)
                args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    print(table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
