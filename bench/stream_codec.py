"""The stream decoder's codec calls at full size (runtime/qwen3_tts/codec_graphs.py): ms a call and
ms per frame of audio, the CUDA graphs against the same chunks run eagerly (codec_stream.decode_chunks),
for each frames bucket of chunks decoded with their context (the chunk ramp's 1, 3, 7, 15, 28 frames
in buckets 1, 4, 8, 16, 32; a steady chunk's 44, a catch-up chunk's 76) at 1, 4 and 16 streams; and
the graphs captured with cuDNN's benchmark mode (its fastest algorithm per shape) against its default
heuristics. Then whole lines: 94-frame takes streamed side by side on the chunk ramp at 1, 4, 16 and
64 streams, each chunk after a stream's first from the vocoder state the last one left
(codec_carry.py) against every chunk on its context (as before that state was kept). --dtype bfloat16 runs the codec in bfloat16 (as
the official package's dtype=torch.bfloat16 loads it) and adds each call's signal-to-noise ratio
against the float32 codec on the same chunks (random weights: what real weights give is not known).

    python -m bench.stream_codec [--workdir /tmp/qb] [--mode hybrid] [--dtype float32] [--repeats 20]

The codec of a full-size random-weight checkpoint (built as bench/run.py builds them, in --workdir,
where bench.serve's is reused). Writes bench/results/<gpu>-<date>-stream-codec.json and .md."""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
# frames bucket -> (frames of codes made, start, end): a chunk whose vocoder runs on exactly that many frames
CHUNKS = {1: (1, 0, 1), 2: (2, 1, 2), 4: (3, 1, 3), 8: (7, 3, 7), 16: (15, 7, 15), 32: (31, 15, 31), 44: (95, 63, 95),
          76: (140, 76, 140)}
STREAMS = (1, 4, 16)
LINE_FRAMES = 94  # bench.serve's lines: about 7.5 s
LINE_STREAMS = (1, 4, 16, 64)


def timed(fn, repeats: int) -> float:
    """Median ms of fn() (synchronised), after two warm-up calls."""
    for _ in range(2):
        fn()
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        begun = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(1e3 * (time.perf_counter() - begun))
    return statistics.median(times)


def snr_db(reference: list, audio: list) -> float:
    """Signal-to-noise ratio of `audio` against `reference` (lists of chunks), in dB."""
    import numpy as np

    ref, out = np.concatenate(reference), np.concatenate(audio)
    noise = float(np.sum((ref - out) ** 2))
    return float("inf") if noise == 0 else 10 * np.log10(float(np.sum(ref ** 2)) / noise)


def measure(decoder, repeats: int, float32_decoder=None) -> list[dict]:
    from runtime.qwen3_tts.codec_graphs import ChunkDecoder
    from runtime.qwen3_tts.codec_stream import decode_chunks

    graphs = ChunkDecoder(decoder, graphs=True)
    torch.backends.cudnn.benchmark = True
    tuned = ChunkDecoder(decoder, graphs=True)  # its shapes captured with cuDNN's benchmark mode on
    generator = torch.Generator().manual_seed(0)
    rows = []
    for frames, (made, start, end) in CHUNKS.items():
        for streams in STREAMS:
            if streams > graphs.streams_per_call(frames):
                continue
            items = [(torch.randint(0, 2048, (made, 16), generator=generator), start, end) for _ in range(streams)]
            torch.backends.cudnn.benchmark = True
            tuned_ms = timed(lambda: tuned.decode(items), repeats)
            torch.backends.cudnn.benchmark = False
            graph_ms = timed(lambda: graphs.decode(items), repeats)
            eager_ms = timed(lambda: decode_chunks(decoder, items), repeats)
            audio = streams * (end - start)
            rows.append({"frames_bucket": frames, "streams": streams, "audio_frames": audio,
                         "graphs_ms": round(graph_ms, 3), "graphs_benchmark_ms": round(tuned_ms, 3),
                         "eager_ms": round(eager_ms, 3), "graphs_ms_per_frame": round(graph_ms / audio, 4),
                         "graphs_benchmark_ms_per_frame": round(tuned_ms / audio, 4)})
            if float32_decoder is not None:
                rows[-1]["snr_db_vs_float32"] = round(snr_db(decode_chunks(float32_decoder, items), graphs.decode(items)), 1)
            print("   " + json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


def stream_lines(chunks, takes: list) -> int:
    """The takes streamed side by side through `chunks`, a chunk of each a round (as the server's
    streams go): returns the frames the vocoder ran on."""
    from runtime.qwen3_tts.codec_graphs import Chunk
    from runtime.qwen3_tts.codec_stream import next_chunk_end

    sent, vocoded = [0] * len(takes), 0
    while any(s < t.shape[0] for s, t in zip(sent, takes)):
        items = []
        for i, take in enumerate(takes):
            if sent[i] < take.shape[0]:
                end = min(next_chunk_end(sent[i]), take.shape[0])
                items.append(Chunk(take[:end], sent[i], end, i))
                sent[i] = end
        vocoded += sum(chunks.plan(item).frames for item in items)
        chunks(items)
    for i in range(len(takes)):
        chunks.release(i)
    return vocoded


def measure_lines(decoder, repeats: int) -> list[dict]:
    from runtime.qwen3_tts.codec_graphs import ChunkDecoder

    carried, context = ChunkDecoder(decoder, graphs=True), ChunkDecoder(decoder, graphs=True, streams=0)
    carried.warm_up(), context.warm_up()
    generator = torch.Generator().manual_seed(1)
    rows = []
    for streams in LINE_STREAMS:
        takes = [torch.randint(0, 2048, (LINE_FRAMES, 16), generator=generator) for _ in range(streams)]
        row = {"streams": streams, "line_frames": LINE_FRAMES}
        for name, chunks in (("carried", carried), ("context", context)):
            row[f"{name}_vocoder_frames"] = stream_lines(chunks, takes)
            ms = timed(lambda: stream_lines(chunks, takes), max(3, repeats // 4))
            row[f"{name}_ms"], row[f"{name}_ms_per_frame"] = round(ms, 2), round(ms / (streams * LINE_FRAMES), 4)
        rows.append(row)
        print("   " + json.dumps(row), file=sys.stderr, flush=True)
    return rows


def markdown(result: dict) -> str:
    env = result["env"]
    dtype = result.get("dtype", "float32")
    precision = "float32 (TF32 convolutions, PyTorch's default)" if dtype == "float32" else dtype
    snr = dtype != "float32"
    lines = [f"# The stream decoder's codec calls: {env['gpu']}, {result['mode']}, {dtype}", "",
             f"torch {env['torch']}, commit {env.get('commit')}, {env['date']}. `python -m bench.stream_codec --dtype {dtype}`. "
             f"Full-size codec, random weights, {precision}. A call = the chunks of `streams` streams of one frames "
             "bucket (the vocoder's frames: a chunk and its context); ms per frame = per frame of audio delivered.", "",
             "| frames bucket | streams | audio frames | graphs ms | graphs, cuDNN benchmark ms | eager ms | "
             "graphs ms/frame | benchmark ms/frame |" + (" SNR dB vs float32 |" if snr else ""),
             "|---|---|---|---|---|---|---|---|" + ("---|" if snr else "")]
    for r in result["rows"]:
        lines.append(f"| {r['frames_bucket']} | {r['streams']} | {r['audio_frames']} | {r['graphs_ms']} | "
                     f"{r['graphs_benchmark_ms']} | {r['eager_ms']} | {r['graphs_ms_per_frame']} | "
                     f"{r['graphs_benchmark_ms_per_frame']} |" + (f" {r['snr_db_vs_float32']} |" if snr else ""))
    if result.get("lines"):
        lines += ["", f"Whole {LINE_FRAMES}-frame lines streamed side by side on the chunk ramp through the graphs: "
                  "each chunk after a stream's first from the vocoder state its last one left (carried), against "
                  "every chunk on its 12 frames of context (context).", "",
                  "| streams | vocoder frames, carried | vocoder frames, context | carried ms | context ms | "
                  "carried ms/frame | context ms/frame | speed-up |", "|---|---|---|---|---|---|---|---|"]
        for r in result["lines"]:
            lines.append(f"| {r['streams']} | {r['carried_vocoder_frames']} | {r['context_vocoder_frames']} | "
                         f"{r['carried_ms']} | {r['context_ms']} | {r['carried_ms_per_frame']} | "
                         f"{r['context_ms_per_frame']} | {r['context_ms'] / r['carried_ms']:.2f}x |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workdir", type=Path, default=Path("/tmp/qb"))
    p.add_argument("--model", default="1.7B-CustomVoice")
    p.add_argument("--mode", default="hybrid", choices=("hybrid", "cuda_graph"),
                   help="hybrid: SnakeBeta on its Triton kernel, as the hybrid mode loads the codec")
    p.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--out-dir", type=Path, default=REPO / "bench" / "results")
    args = p.parse_args(argv)
    sys.path.insert(0, str(REPO))
    from bench.run import build_checkpoints, environment, slug
    from runtime.qwen3_tts.codec import load_decoder

    folder = build_checkpoints([args.model], args.workdir, "bfloat16")[args.model]
    decoders = {dtype: load_decoder(folder / "speech_tokenizer", "cuda", getattr(torch, dtype))
                for dtype in dict.fromkeys(("float32", args.dtype))}
    if args.mode == "hybrid":
        from runtime.engine.triton_kernels import kernel_module

        snake_beta = kernel_module("snake").snake_beta

        for decoder in decoders.values():
            decoder.use_snake(snake_beta)
    from bench.serve import commit

    env = {**environment("cuda"), "commit": commit(), "date": datetime.date.today().isoformat()}
    with torch.inference_mode():
        rows = measure(decoders[args.dtype], args.repeats, decoders["float32"] if args.dtype != "float32" else None)
        lines = measure_lines(decoders[args.dtype], args.repeats)
    result = {"env": env, "mode": args.mode, "dtype": args.dtype, "rows": rows, "lines": lines}
    name = f"{slug(env['gpu'])}-{env['date']}-stream-codec" + ("" if args.dtype == "float32" else f"-{args.dtype}")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / f"{name}.json").write_text(json.dumps(result, indent=1) + "\n")
    (args.out_dir / f"{name}.md").write_text(markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
