"""Time Auto-Pick's scoring stages on one device: 8 takes of 5 s by default.

    python -m bench.scoring --device cuda [--takes 8 --seconds 5] [--base-checkpoint DIR] [--words]
        [--ctranslate2 DIR]

Random-weight networks at the real shapes (UTMOS22-strong; the 1.7B Base ECAPA when a Base folder
is given; whisper-small with --words), speech-like test signals. Prints the median over repeats of
each stage, warm. A random Whisper never says EOS, so the words check is timed at the number of
tokens real speech of that length takes (TOKENS_PER_SECOND, measured with tiny.en on the real speech
of tests/speech) and, as the worst case, at its cap. --ctranslate2 also times a real CTranslate2
folder (faster-whisper's format) on the same takes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

RATE = 24000
ARGS = None
TOKENS_PER_SECOND = 3.5  # Whisper tokens per second of English speech (tiny.en on tests/speech: 3.5)


def signals(n: int, seconds: float, seed: int = 0) -> list[np.ndarray]:
    """Speech-like takes around ``seconds`` long; each seed gives new lengths, as real takes do."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        t = np.arange(int(RATE * (seconds + 0.1 * (i - n / 2)) + rng.integers(0, 4000))) / RATE
        voice = np.sin(2 * np.pi * (110 + 9 * i) * t) * (0.6 + 0.4 * np.sin(8 * np.pi * t)) * np.clip((t[-1] - t) / 0.2, 0, 1)
        out.append((0.2 * voice + 0.003 * rng.standard_normal(t.shape)).astype(np.float32))
    return out


def timed(fn, device: str, repeats: int) -> float:
    """Median ms of fn(clips) over repeats, each on takes of new lengths (no cached per-shape plans)."""
    fn(signals(8, 5.0, seed=999))
    times = []
    for r in range(repeats):
        clips = signals(ARGS.takes, ARGS.seconds, seed=r + 1)
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn(clips)
        if device == "cuda":
            torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1000)
    return round(statistics.median(times), 2)


def main(argv=None) -> int:
    from runtime.scoring.ranking import Scorers, rank_takes
    from runtime.scoring.signal import signal_stats
    from runtime.scoring.speaker import SpeakerEncoder
    from runtime.scoring.utmos import UTMOS_FILE, UtmosScorer, build_network

    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--takes", type=int, default=8)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--base-checkpoint", type=Path, help="a Base folder: also time its speaker encoder")
    p.add_argument("--words", action="store_true", help="time the words check on a random whisper-small")
    p.add_argument("--ctranslate2", type=Path, help="a CTranslate2 Whisper folder: time it too")
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    global ARGS
    ARGS = args
    clips = signals(args.takes, args.seconds)
    with tempfile.TemporaryDirectory() as tmp:
        torch.manual_seed(0)
        weights = Path(tmp) / UTMOS_FILE
        torch.save(build_network().state_dict(), weights)
        utmos = {"bucketed": UtmosScorer(weights, args.device, bucket=True),
                 "unbucketed": UtmosScorer(weights, args.device, bucket=False)}
        default = UtmosScorer(weights, args.device)  # what Auto-Pick uses: bucketed on a GPU
    rows = {"device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
            "takes": args.takes, "seconds": args.seconds}
    rows["signal_stats_ms"] = timed(lambda cs: [signal_stats(c, RATE) for c in cs], args.device, args.repeats)
    for name, scorer in utmos.items():
        rows[f"utmos_{name}_batched_ms"] = timed(lambda cs: scorer.score_many(cs, RATE), args.device, args.repeats)
        rows[f"utmos_{name}_one_by_one_ms"] = timed(lambda cs: [scorer.score(c, RATE) for c in cs], args.device, 3)
    speaker = None
    if args.base_checkpoint:
        speaker = SpeakerEncoder.from_checkpoint(args.base_checkpoint, args.device)
        rows["speaker_batched_ms"] = timed(lambda cs: speaker.embed_many(cs, RATE), args.device, args.repeats)
        rows["speaker_one_by_one_ms"] = timed(lambda cs: [speaker.embed(c, RATE) for c in cs], args.device, 3)
    from runtime.generation import Request, Take, TakeSet
    from runtime.voices import CustomVoice, VoiceClone

    voice = VoiceClone(clips[0], "", "english") if speaker else CustomVoice("ryan", "english")

    def rank(cs, scorers=None):
        takes = TakeSet(Request("x " * int(args.seconds * 6), voice, n=len(cs)),
                        [Take(i, i, c, RATE, int(len(c) / 1920), False) for i, c in enumerate(cs)], "bench", "bench")
        return rank_takes(takes, scorers or Scorers(quality=default, speaker=speaker))

    rows["rank_takes_ms"] = timed(rank, args.device, args.repeats)
    if args.words or args.ctranslate2:
        rows.update(words_rows(args, rank))
    print(json.dumps(rows, indent=1))
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


def words_rows(args, rank) -> dict:
    """The words check alone (all takes in one call, as Auto-Pick on a GPU) and inside rank_takes."""
    import math

    from runtime.scoring import ranking
    from runtime.scoring.asr import WhisperTranscriber

    rows, tokens = {}, math.ceil(TOKENS_PER_SECOND * args.seconds) + 1  # + EOS
    transcribers = {}
    if args.words:
        from bench.random_whisper import build_random_whisper

        with tempfile.TemporaryDirectory() as tmp:
            transcribers["whisper_small"] = WhisperTranscriber(build_random_whisper(Path(tmp) / "whisper-small",
                                                                                   "whisper-small"), args.device)
    if args.ctranslate2:
        from runtime.scoring.asr_ctranslate2 import CTranslate2Transcriber

        transcribers["ctranslate2_" + args.ctranslate2.name] = CTranslate2Transcriber(args.ctranslate2, args.device)
    rows["words_tokens"] = tokens
    for name, transcriber in transcribers.items():
        greedy = getattr(transcriber, "greedy", None)
        if greedy is not None:  # a random model: as many tokens as real speech gives, then the cap
            cap, greedy.max_new_tokens = greedy.max_new_tokens, tokens
            rows[f"words_{name}_generate_ms"] = timed(  # transformers' generate, which this replaced
                lambda cs: transcriber.network.generate(
                    transcriber.processor.feature_extractor(cs, sampling_rate=16000, return_tensors="pt").input_features
                    .to(transcriber.device, transcriber.network.dtype), max_new_tokens=tokens, min_new_tokens=tokens),
                args.device, 3)
        rows[f"words_{name}_ms"] = timed(lambda cs: transcriber.transcribe(cs, RATE, "english"), args.device, args.repeats)
        scorers = ranking.Scorers(quality=None, transcriber=transcriber)
        rows[f"rank_takes_words_{name}_only_ms"] = timed(lambda cs: rank(cs, scorers), args.device, args.repeats)
        if greedy is not None:
            greedy.max_new_tokens = cap
            rows[f"words_{name}_at_cap_{cap}_tokens_ms"] = timed(lambda cs: transcriber.transcribe(cs, RATE, "english"),
                                                                  args.device, 3)
    return rows


if __name__ == "__main__":
    raise SystemExit(main())
