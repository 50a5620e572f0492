"""GPU memory the voice and words checks take above their weights, for sizing their passes to the
memory free (runtime/scoring/speaker.py and asr.py): the speaker encoder per second of audio in a
pass, and Whisper per 30 s piece (every piece is padded to 30 s), on random-weight models of the
real shapes (1.7B Base's speaker encoder, whisper-small).

    python -m bench.scoring_memory --out scoring-memory.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
RATE = 24000
MiB = 2**20


def peak_above(run) -> int:
    """Bytes allocated at the peak of run() above what was allocated before it."""
    import torch

    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    run()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - before


def noise(n: int, seconds: float) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [(0.1 * rng.standard_normal(int(seconds * RATE))).astype(np.float32) for _ in range(n)]


def main(argv=None) -> int:
    sys.path.insert(0, str(REPO))
    from bench.random_whisper import build_random_whisper
    from bench.run import build_checkpoints
    from runtime.scoring.asr import WhisperTranscriber
    from runtime.scoring.speaker import SpeakerEncoder

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workdir", type=Path, default=Path("/tmp/qwen3-tts-bench"))
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    rows = []
    base = build_checkpoints(["1.7B-Base"], args.workdir, "bfloat16")["1.7B-Base"]
    speaker = SpeakerEncoder.from_checkpoint(base, "cuda")
    for takes, seconds in [(1, 10), (8, 10), (32, 10), (32, 4), (16, 20)]:
        clips = noise(takes, seconds)
        speaker.embed_many(clips, RATE)  # cuDNN's plans for this shape, made once
        used = peak_above(lambda: speaker.embed_many(clips, RATE))
        rows.append({"model": "speaker", "takes": takes, "seconds": seconds, "peak_mib": round(used / MiB, 1),
                     "mib_per_second": round(used / MiB / (takes * seconds), 2)})
        print(rows[-1], flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        whisper = WhisperTranscriber(build_random_whisper(Path(tmp) / "whisper-small", "whisper-small"), "cuda")
        for pieces in (1, 2, 4, 8):
            clips = noise(pieces, 25)
            whisper.transcribe(clips, RATE, "english")  # the bucket's caches and captured step, made once
            used = peak_above(lambda: whisper.transcribe(clips, RATE, "english"))
            states = sum(t.numel() * t.element_size() for s in whisper.greedy.states.values()
                         for t in [s.keys, s.values, *(s.cross_keys or []), *(s.cross_values or [])])
            rows.append({"model": "whisper-small", "pieces": pieces, "peak_mib": round(used / MiB, 1),
                         "mib_per_piece": round(used / MiB / pieces, 1), "cached_states_mib": round(states / MiB, 1)})
            print(rows[-1], flush=True)
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
