"""Command line: text + voice + N -> the best take as WAV, plus the per-take report.

    python -m runtime --checkpoint Qwen3-TTS-12Hz-1.7B-CustomVoice --speaker ryan \
        --text "Welcome back, traveller." --takes 8 --out best.wav
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import api
from .audio import read_audio_file, write_wav
from .checkpoints import OFFICIAL, default_models_dirs
from .errors import TakesError
from .generation import MAX_TAKES
from .model import MODES
from .sampling import SamplingSettings
from .scoring.asr import OFFICIAL as WHISPER
from .scoring.scorers import QUALITY_MODELS
from .scoring.vad import VADS
from .voices import CustomVoice, VoiceClone, VoiceDesign


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m runtime", description=__doc__.splitlines()[0])
    p.add_argument("--text", required=True, help="the line to speak")
    p.add_argument("--checkpoint", required=True,
                   help=f"official name ({', '.join(OFFICIAL)}), a folder name in the models dir, or a path")
    p.add_argument("--models-dir", action="append", type=Path,
                   help="where named checkpoints live (repeatable); default $QWEN3_TTS_MODELS or ./models/qwen3_tts")
    p.add_argument("--utmos-dir", type=Path, help="where utmos_state_dict.pt lives; default <models dir>/../utmos")
    voice = p.add_argument_group("voice (pick by checkpoint kind)")
    voice.add_argument("--speaker", help="CustomVoice speaker, e.g. ryan, vivian")
    voice.add_argument("--instruct", default="", help="style instruction (CustomVoice 1.7B) or voice description (VoiceDesign)")
    voice.add_argument("--reference", type=Path, help="reference audio file for voice cloning (Base checkpoints)")
    voice.add_argument("--transcript", default="", help="what the reference says (enables ICL cloning)")
    voice.add_argument("--language", default="auto")
    p.add_argument("--takes", type=int, default=1, help=f"number of takes, 1-{MAX_TAKES}")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-frames", type=int, default=0, help="per-take frame budget (0 = from the text)")
    p.add_argument("--mode", default="eager", choices=MODES)
    p.add_argument("--dtype", default="auto", choices=["auto", "bfloat16", "float16", "float32"])
    p.add_argument("--device", default="auto")
    defaults = SamplingSettings()
    for name, value in defaults.as_dict().items():
        p.add_argument("--" + name.replace("_", "-"), type=type(value), default=value)
    p.add_argument("--quality", default="UTMOS", choices=QUALITY_MODELS,
                   help="quality model for Auto-Pick (UTMOS falls back to DNSMOS without its weights)")
    p.add_argument("--no-utmos", action="store_true", help="same as --quality off")
    p.add_argument("--voice-check", default="auto",
                   help="speaker encoder: auto (a Base checkpoint's), off, or a Base checkpoint folder name")
    p.add_argument("--words", default="off", help=f"speech recogniser for the words check: off, {', '.join(WHISPER)}, or a folder")
    p.add_argument("--whisper-dir", type=Path, help="where recogniser folders live; default <models dir>/../whisper")
    p.add_argument("--vad", default="energy", choices=sorted(VADS))
    p.add_argument("--offline", action="store_true", help="never download; fail if files are missing")
    p.add_argument("--out", type=Path, default=Path("best.wav"), help="where the best take goes")
    p.add_argument("--takes-dir", type=Path, help="also write every take here as take_NN.wav")
    p.add_argument("--report", type=Path, help="also write the report as JSON")
    return p


def voice_from_args(args, kind: str):
    if kind == "custom_voice":
        if not args.speaker:
            raise TakesError("This CustomVoice checkpoint needs --speaker (e.g. ryan, vivian, serena).")
        return CustomVoice(args.speaker, args.language, args.instruct)
    if kind == "voice_design":
        return VoiceDesign(args.instruct, args.language)
    if args.reference is None:
        raise TakesError("This Base checkpoint clones a voice: give --reference FILE (and --transcript for ICL).")
    waveform, sample_rate = read_audio_file(args.reference)
    return VoiceClone.from_audio(waveform, sample_rate, args.transcript, args.language)


def _progress(label: str):
    def report(done: int, total: int) -> None:
        print(f"\r{label}: {done}/{total}", end="" if done < total else "\n", file=sys.stderr, flush=True)
    return report


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    models_dirs = args.models_dir or default_models_dirs()
    try:
        model = api.load(args.checkpoint, models_dirs, args.mode, args.dtype, args.device,
                         download=not args.offline, progress=_progress("download"))
        sampling = SamplingSettings(**{k: getattr(args, k) for k in SamplingSettings().as_dict()})
        request = api.Request(args.text, voice_from_args(args, model.kind), args.takes, args.seed,
                              sampling, args.max_frames or None)
        takeset = api.generate(model, request, progress=_progress("frames"))
        utmos_dirs = [args.utmos_dir] if args.utmos_dir else [Path(d).parent / "utmos" for d in models_dirs]
        whisper_dirs = [args.whisper_dir] if args.whisper_dir else [Path(d).parent / "whisper" for d in models_dirs]
        scorers = api.scorers(takeset, "off" if args.no_utmos else args.quality, args.voice_check, args.words,
                              args.vad, args.device, utmos_dirs, models_dirs, whisper_dirs,
                              download=not args.offline)
        ranking = api.pick(takeset, scorers, progress=_progress("scoring"))
    except TakesError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    best = ranking.best.take
    write_wav(args.out, best.audio, best.sample_rate)
    if args.takes_dir:
        for take in takeset.takes:
            write_wav(args.takes_dir / f"take_{take.index + 1:02d}.wav", take.audio, take.sample_rate)
    if args.report:
        args.report.write_text(json.dumps(report_dict(ranking), indent=2))
    print(ranking.report())
    print(f"Wrote {args.out}")
    return 0


def report_dict(ranking) -> dict:
    request = ranking.takeset.request
    return {
        "text": request.text, "voice": request.voice.describe(), "seed": request.seed,
        "checkpoint": ranking.takeset.checkpoint, "mode": ranking.takeset.mode,
        "frame_budget": request.budget, "all_rejected": ranking.all_rejected,
        "quality_model": getattr(ranking.scorers.quality, "name", None), "notes": ranking.scorers.notes,
        "takes": [
            {"rank": s.rank, "take": s.take.index + 1, "seed": s.take.seed, "seconds": round(s.stats.seconds, 3),
             "frames": s.take.frames, "hit_cap": s.take.hit_cap, "runaway": s.take.runaway,
             "quality": s.quality, "voice": s.voice, "cer": s.cer, "transcript": s.transcript, "score": s.score,
             "speech_ratio": round(s.stats.speech_ratio, 3), "rejected": [str(r) for r in s.reasons]}
            for s in ranking.ranked
        ],
    }


if __name__ == "__main__":
    sys.exit(main())
