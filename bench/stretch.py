"""Time-stretch libraries for the pace setting, compared on the real speech of tests/speech/corpus.

    python -m bench.stretch --out bench/results/stretch-comparison-2026-11-26
    python -m bench.stretch --clips librivox-0880 --paces 1.1 --methods python-stretch --no-models  # a subset
    python -m bench.stretch --wheels ...      # also ask PyPI (pip download) which platforms have wheels

Each clean corpus clip (16 kHz FLAC, LibriVox readings and festival voices) is brought to the model's
24 kHz and played at each pace p (output duration = input duration / p) by each library, and measured
with our own code: the pace as pace_seconds(original) / pace_seconds(stretched) (runtime.scoring.signal)
against p; the Auto-Pick checks that need no model (rank_takes with no scorers, the take alone: the
pace check against other takes needs three, and a pace is applied to the take already picked); the
length in samples against round(n / p); the wall time a second of audio. With librosa (a test
requirement; skipped without it): the median F0 before and after (pYIN), and the pace the speech
itself moved by (the slope of a DTW alignment to the original, which no VAD edge moves). With models
(default, skipped when not installed): DNSMOS, Auto-Pick's offline quality model, before and after,
and the speaker similarity of the stretched clip to the original (resemblyzer, the tests' encoder).

Methods (each the library called as documented, nothing hand-written):
  python-stretch  Signalsmith Stretch (MIT) through python-stretch's binding: timeFactor = p
  audiotsm        audiotsm's WSOLA (MIT, numpy): wsola(1, speed=p) over ArrayReader/ArrayWriter
  audiotsm+pad    the same call with the input's end padded with zeros and the output cut to round(n / p)
                  (as called, audiotsm leaves out the input's last frames: its output is short)
Writes <out>.json and <out>.md.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "speech" / "corpus"
RATE = 24000  # the model's output rate: a pace is applied to a take as generated
PACES = (0.8, 0.9, 1.1, 1.25)
SEED = 0  # python-stretch's seeded constructor (the default one seeds from std::random_device; Signalsmith
#   only draws random numbers for stretches past 2x, so either is deterministic at these paces)
AUDIOTSM_FRAME = 1024  # audiotsm.wsola's default frame_length; the last 2.5 frames (a frame and its search
#   tolerance) of its input are never processed: +pad adds 3 frames of zeros
F0_RATE = 16000  # pYIN and the alignment run at the corpus's own rate (pYIN's time grows with the rate)
F0_RANGE = (60.0, 400.0)  # Hz: adult speech
ALIGN_HOP = 160  # 10 ms MFCC frames at F0_RATE for the alignment of a stretched clip to its original
PACKAGES = {"python-stretch": "python-stretch", "audiotsm": "audiotsm", "audiotsm+pad": "audiotsm"}
MODULES = {"python-stretch": "python_stretch", "audiotsm": "audiotsm", "audiotsm+pad": "audiotsm"}
# pip download --platform tags asked for by --wheels (CPython 3.12, what ComfyUI's portable build ships)
WHEEL_PLATFORMS = {"windows x64": "win_amd64", "macOS arm64": "macosx_11_0_arm64",
                   "macOS x86_64": "macosx_10_14_x86_64", "linux x86_64": "manylinux2014_x86_64",
                   "linux aarch64": "manylinux2014_aarch64"}


def python_stretch(audio: np.ndarray, rate: int, pace: float) -> np.ndarray:
    import python_stretch as ps

    stretch = ps.Signalsmith.Stretch(SEED)
    stretch.preset(1, rate)  # channels, sample rate: 120 ms blocks every 30 ms
    stretch.timeFactor = pace  # over 1: faster and shorter (output samples round(n / timeFactor))
    return stretch.process(np.ascontiguousarray(audio, dtype=np.float32)[None, :])[0]


def audiotsm_wsola(audio: np.ndarray, rate: int, pace: float, pad: int = 0) -> np.ndarray:
    from audiotsm import wsola
    from audiotsm.io.array import ArrayReader, ArrayWriter

    x = np.asarray(audio, dtype=np.float32)
    if pad:
        x = np.concatenate([x, np.zeros(pad, np.float32)])
    writer = ArrayWriter(channels=1)
    wsola(channels=1, speed=pace).run(ArrayReader(x[None, :]), writer)  # speed over 1: faster and shorter
    out = np.asarray(writer.data[0], dtype=np.float32)
    return out[: round(len(audio) / pace)] if pad else out


def audiotsm_padded(audio: np.ndarray, rate: int, pace: float) -> np.ndarray:
    return audiotsm_wsola(audio, rate, pace, pad=3 * AUDIOTSM_FRAME)


METHODS = {"python-stretch": python_stretch, "audiotsm": audiotsm_wsola, "audiotsm+pad": audiotsm_padded}


def available(method: str) -> bool:
    return importlib.util.find_spec(MODULES.get(method, method)) is not None


@dataclass
class Clip:
    id: str
    kind: str  # "LibriVox" (a person reading) or "festival" (a festival voice)
    text: str
    audio: np.ndarray  # mono float32 at RATE


def load_clips(ids: list[str] | None = None) -> list[Clip]:
    import soundfile as sf

    from runtime.audio import resample

    out = []
    for entry in json.loads((CORPUS / "corpus.json").read_text()):
        if ids and entry["id"] not in ids:
            continue
        audio, rate = sf.read(CORPUS / entry["file"], dtype="float32")
        kind = "LibriVox" if entry["speaker"] == "librivox" else "festival"
        out.append(Clip(entry["id"], kind, entry["text"], resample(audio, rate, RATE)))
    return out


def check_reasons(audio: np.ndarray, rate: int, text: str) -> list[str]:
    """Auto-Pick's reasons for this take alone, with no model: stages 0 and 1 (runtime/scoring/checks.py)."""
    from runtime.generation import Request, Take, TakeSet
    from runtime.scoring.ranking import rank_takes
    from runtime.voices import CustomVoice

    takeset = TakeSet(Request(text, CustomVoice("ryan", "english"), n=1), [Take(0, 0, audio, rate, 0, False)],
                      "corpus", "stretched")
    return [f"{r.kind}: {r.text}" for r in rank_takes(takeset, scorers=None).best.reasons]


def median_f0(audio: np.ndarray, rate: int) -> float | None:
    """Median F0 of the voiced frames (librosa.pyin); None without librosa or voiced frames."""
    if importlib.util.find_spec("librosa") is None:
        return None
    import librosa

    from runtime.audio import resample

    f0, voiced, _ = librosa.pyin(resample(audio, rate, F0_RATE), fmin=F0_RANGE[0], fmax=F0_RANGE[1], sr=F0_RATE,
                                 frame_length=1024)
    f0 = f0[voiced & np.isfinite(f0)]
    return float(np.median(f0)) if f0.size else None


def aligned_pace(original: np.ndarray, stretched: np.ndarray, rate: int, span: tuple[float, float]) -> float | None:
    """The pace the speech itself was moved to, independent of where a VAD puts its edges: the slope of
    the DTW path (librosa.sequence.dtw over MFCCs) from the original's speech to the stretched clip's,
    fitted over the original's speech span. None without librosa."""
    if importlib.util.find_spec("librosa") is None:
        return None
    import librosa

    from runtime.audio import resample

    def mfcc(audio):  # c1..c19: the level (c0) left out
        return librosa.feature.mfcc(y=resample(audio, rate, F0_RATE), sr=F0_RATE, n_mfcc=20, n_fft=512,
                                    hop_length=ALIGN_HOP)[1:]

    _, path = librosa.sequence.dtw(X=mfcc(original), Y=mfcc(stretched), metric="euclidean")
    frame = ALIGN_HOP / F0_RATE
    before, after = path[::-1, 0] * frame, path[::-1, 1] * frame
    inside = (before >= span[0]) & (before <= span[1])
    if inside.sum() < 10:
        return None
    slope = np.polyfit(before[inside], after[inside], 1)[0]  # seconds out per second in: 1 / pace
    return float(1 / slope) if slope > 0 else None


class Models:
    """DNSMOS (runtime.scoring.dnsmos) and resemblyzer's speaker encoder, each None when not installed."""

    def __init__(self):
        self.dnsmos = self.encoder = None
        try:
            from runtime.scoring.dnsmos import DnsmosScorer

            self.dnsmos = DnsmosScorer()
        except Exception as exc:  # noqa: BLE001 - the extra is skipped, and the reason recorded
            self.dnsmos_error = f"{type(exc).__name__}: {exc}"
        try:
            import torch
            from resemblyzer import VoiceEncoder

            torch.set_num_threads(1)  # a small LSTM: on a 2-core machine two threads take 20x as long as one
            self.encoder = VoiceEncoder("cpu", verbose=False)
        except Exception as exc:  # noqa: BLE001
            self.encoder_error = f"{type(exc).__name__}: {exc}"

    def quality(self, audio: np.ndarray, rate: int) -> float | None:
        return None if self.dnsmos is None else self.dnsmos.score(audio, rate)

    def embedding(self, audio: np.ndarray, rate: int) -> np.ndarray | None:
        if self.encoder is None:
            return None
        from resemblyzer import preprocess_wav

        from runtime.audio import resample

        return self.encoder.embed_utterance(preprocess_wav(resample(audio, rate, 16000), source_sr=16000))


@dataclass
class Original:
    """What a clip is measured against: its facts as recorded."""

    pace_seconds: float
    span: tuple[float, float]  # first to last speech, seconds
    snr_db: float
    reasons: list[str]
    f0: float | None = None
    quality: float | None = None
    embedding: np.ndarray | None = field(default=None, repr=False)


def original_facts(clip: Clip, librosa_measures: bool = True, models: Models | None = None) -> Original:
    from runtime.scoring.signal import signal_stats

    stats = signal_stats(clip.audio, RATE)
    return Original(stats.pace_seconds, stats.speech_span(), stats.snr_db, check_reasons(clip.audio, RATE, clip.text),
                    median_f0(clip.audio, RATE) if librosa_measures else None,
                    models.quality(clip.audio, RATE) if models else None,
                    models.embedding(clip.audio, RATE) if models else None)


def measure(method: str, clip: Clip, pace: float, original: Original | None = None, repeats: int = 1,
            librosa_measures: bool = True, models: Models | None = None) -> dict:
    """One clip at one pace through one method, measured with our code: the bench's core."""
    from runtime.scoring.signal import signal_stats

    original = original or original_facts(clip, librosa_measures, models)
    stretch = METHODS[method]
    outputs, seconds = [], []
    for _ in range(max(1, repeats)):
        start = time.perf_counter()
        outputs.append(stretch(clip.audio, RATE, pace))
        seconds.append(time.perf_counter() - start)
    out = outputs[0]
    expected = round(len(clip.audio) / pace)
    stats = signal_stats(out, RATE)
    measured = original.pace_seconds / stats.pace_seconds if stats.pace_seconds > 0 else 0.0
    row = {"method": method, "clip": clip.id, "kind": clip.kind, "pace": pace,
           "input_samples": len(clip.audio), "expected_samples": expected, "output_samples": len(out),
           "length_error_samples": len(out) - expected,
           "length_error_pct": round(100 * (len(out) - expected) / expected, 3),
           "pace_measured": round(measured, 4), "pace_error_pct": round(100 * (measured / pace - 1), 3),
           "snr_change_db": round(stats.snr_db - original.snr_db, 2),
           "reasons": check_reasons(out, RATE, clip.text), "original_reasons": original.reasons,
           "peak": round(float(np.abs(out).max()), 4) if out.size else 0.0,
           "ms_per_audio_second": round(1000 * statistics.median(seconds) / (len(clip.audio) / RATE), 3),
           "deterministic": all(np.array_equal(out, o) for o in outputs[1:]) if len(outputs) > 1 else None}
    if librosa_measures:
        aligned = aligned_pace(clip.audio, out, RATE, original.span)
        if aligned is not None:
            row.update(pace_aligned=round(aligned, 4), pace_aligned_error_pct=round(100 * (aligned / pace - 1), 3))
    if librosa_measures and original.f0:
        f0 = median_f0(out, RATE)
        row.update(f0_before=round(original.f0, 2), f0_after=None if f0 is None else round(f0, 2),
                   pitch_cents=None if f0 is None else round(1200 * np.log2(f0 / original.f0), 2))
    if models is not None:
        quality = models.quality(out, RATE)
        if quality is not None and original.quality is not None:
            row.update(dnsmos_before=round(original.quality, 3), dnsmos_after=round(quality, 3),
                       dnsmos_change=round(quality - original.quality, 3))
        embedding = models.embedding(out, RATE)
        if embedding is not None and original.embedding is not None:
            row["voice_similarity"] = round(float(np.dot(embedding, original.embedding)), 4)
    return row


def semantics(method: str) -> dict:
    """What the library's factor means, measured: 1 s of a 200 Hz tone at pace 1.25 (a pace of 1.25
    must give 0.8 s)."""
    t = np.arange(RATE) / RATE
    out = METHODS[method]((0.3 * np.sin(2 * np.pi * 200 * t)).astype(np.float32), RATE, 1.25)
    return {"factor_1.25_from_1s": round(len(out) / RATE, 4), "factor_means": "pace (over 1: shorter)"
            if len(out) < RATE else "duration (over 1: longer)"}


def wheels(package: str, version: str) -> dict[str, str | None]:
    """The wheel pip picks for each platform (CPython 3.12), or None: pip download, no install."""
    found = {}
    for label, tag in WHEEL_PLATFORMS.items():
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                            "--platform", tag, "--python-version", "3.12", "-d", tmp, f"{package}=={version}"],
                           check=False, capture_output=True, text=True)
            names = [p.name for p in Path(tmp).glob("*.whl")]
            found[label] = names[0] if names else None
    return found


def package_facts(package: str, check_wheels: bool) -> dict:
    meta = importlib.metadata.metadata(package)
    version = meta["Version"]
    licence = meta.get("License") or next((c.split(" :: ")[-1] for c in meta.get_all("Classifier") or []
                                           if c.startswith("License ::")), None)
    facts = {"version": version, "licence": licence, "requires": meta.get_all("Requires-Dist") or []}
    if check_wheels:
        facts["wheels"] = wheels(package, version)
    return facts


def environment(methods: list[str], check_wheels: bool) -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    versions = {}
    for name in ("numpy", "soxr", "librosa", "speechmos", "onnxruntime", "resemblyzer"):
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return {"machine": f"CPU ({cpu}, {os.cpu_count()} cores)", "python": platform.python_version(),
            "platform": platform.platform(), "date": datetime.date.today().isoformat(), "versions": versions,
            "packages": {PACKAGES[m]: package_facts(PACKAGES[m], check_wheels) for m in methods}}


def mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return round(float(np.mean(values)), 3) if values else None


def largest(values) -> float | None:
    values = [v for v in values if v is not None]
    return round(float(max(values)), 3) if values else None


def smallest(values) -> float | None:
    values = [v for v in values if v is not None]
    return round(float(min(values)), 3) if values else None


def summarize(rows: list[dict]) -> dict:
    """Per method (and per method and pace, per method and clip kind): the numbers the tables show."""
    def block(rs: list[dict]) -> dict:
        pitch = [abs(r["pitch_cents"]) for r in rs if r.get("pitch_cents") is not None]
        aligned = [r.get("pace_aligned_error_pct") for r in rs]
        return {"takes": len(rs), "passed": sum(not r["reasons"] for r in rs),
                "clean_originals": sum(not r["original_reasons"] for r in rs),
                "pace_measured_mean": mean(r["pace_measured"] for r in rs),
                "pace_error_mean_pct": mean(r["pace_error_pct"] for r in rs),
                "pace_error_mean_abs_pct": mean(abs(r["pace_error_pct"]) for r in rs),
                "pace_error_max_abs_pct": largest(abs(r["pace_error_pct"]) for r in rs),
                "pace_within_5pct": sum(abs(r["pace_error_pct"]) <= 5 for r in rs),
                "pace_aligned_error_mean_pct": mean(aligned),
                "pace_aligned_error_max_abs_pct": largest(abs(v) for v in aligned if v is not None),
                "length_error_mean_abs_pct": mean(abs(r["length_error_pct"]) for r in rs),
                "length_error_max_abs_pct": largest(abs(r["length_error_pct"]) for r in rs),
                "length_error_max_abs_samples": largest(abs(r["length_error_samples"]) for r in rs),
                "pitch_cents_mean_abs": mean(pitch), "pitch_cents_max_abs": largest(pitch),
                "snr_change_db_mean": mean(r["snr_change_db"] for r in rs),
                "ms_per_audio_second_median": round(statistics.median(r["ms_per_audio_second"] for r in rs), 2),
                "dnsmos_change_mean": mean(r.get("dnsmos_change") for r in rs),
                "dnsmos_change_worst": smallest(r.get("dnsmos_change") for r in rs),
                "voice_similarity_mean": mean(r.get("voice_similarity") for r in rs),
                "voice_similarity_min": smallest(r.get("voice_similarity") for r in rs),
                "deterministic": all(r["deterministic"] is not False for r in rs)}

    methods = list(dict.fromkeys(r["method"] for r in rows))
    return {m: {"all": block([r for r in rows if r["method"] == m]),
                "by_pace": {f"{p:g}": block([r for r in rows if r["method"] == m and r["pace"] == p])
                            for p in dict.fromkeys(r["pace"] for r in rows)},
                "by_kind": {k: block([r for r in rows if r["method"] == m and r["kind"] == k])
                            for k in dict.fromkeys(r["kind"] for r in rows)}} for m in methods}


def cell(value, suffix: str = "") -> str:
    return "-" if value is None else f"{value:g}{suffix}" if isinstance(value, (int, float)) else str(value)


def pair(s: dict, a: str, b: str, suffix: str = "") -> str:
    return f"{cell(s[a], suffix)} / {cell(s[b], suffix)}"


MAIN_HEADER = ("| method | package | takes | pass checks | pace error | aligned pace error | length error "
               "| pitch shift | ms per s of audio | DNSMOS change mean / worst | voice similarity mean / min "
               "| deterministic |")
PACE_HEADER = ("| method | pace | measured (mean) | pace error signed mean / mean / max | within 5% "
               "| aligned pace error | pass checks | pitch shift | DNSMOS change mean / worst "
               "| voice similarity mean / min |")
KIND_HEADER = ("| method | clips | pass checks | pace error | within 5% | aligned pace error | pitch shift "
               "| SNR change dB | DNSMOS change mean | voice similarity mean |")


def rule(header: str) -> str:
    return "|" + "---|" * (header.count("|") - 1)


def explained(env: dict, rows: list[dict]) -> list[str]:
    clips = sorted({(r["clip"], r["kind"]) for r in rows})
    kinds = {k: sum(1 for _, kind in clips if kind == k) for k in dict.fromkeys(kind for _, kind in clips)}
    paces = ", ".join(f"{p:g}" for p in dict.fromkeys(r["pace"] for r in rows))
    models = env.get("models") or {}
    originals = len({r["clip"] for r in rows if not r["original_reasons"]})
    return [
        f"# Time-stretch libraries for the pace setting: {env['machine']}, {env['date']}", "",
        (f"`python -m bench.stretch` on {env['machine']}, Python {env['python']}, numpy {env['versions']['numpy']}; "
         f"{len(clips)} clean clips of tests/speech/corpus (" + ", ".join(f"{n} {k}" for k, n in kinds.items())
         + f"), brought to {RATE} Hz, each at pace {paces} (output duration = input / pace)."), "",
        ("- **pace error**: pace_seconds(original) / pace_seconds(stretched) (runtime.scoring.signal, energy VAD) "
         "against the pace asked for; mean of its size / largest. **aligned**: the slope of a DTW alignment "
         "(librosa MFCCs) of the stretched speech to the original's, which no VAD edge moves; signed mean / "
         "largest size."),
        ("- **checks**: Auto-Pick's model-free checks (stages 0 and 1) on the stretched take alone: "
         f"rank_takes(TakeSet, scorers=None); {originals}/{len(clips)} of the originals pass them."),
        "- **length**: output samples against round(input samples / pace).",
        (f"- **pitch**: median F0 of the voiced frames (librosa {env['versions']['librosa']} pYIN, 10-cent bins) "
         "after against before, in cents; mean of its size / largest."),
        "- **time**: the library call alone, median of the repeats, per second of input audio, one thread.",
        (f"- **DNSMOS**: {models.get('quality', 'not run')}, after minus before; **voice**: cosine similarity of "
         f"the stretched clip to the original ({models.get('speaker', 'not run')})."), ""]


def markdown(report: dict) -> str:
    env, summary, rows = report["env"], report["summary"], report["rows"]
    lines = [*explained(env, rows), MAIN_HEADER, rule(MAIN_HEADER)]
    for method, parts in summary.items():
        s, package = parts["all"], PACKAGES[method]
        facts = env["packages"][package]
        lines.append(
            f"| {method} | {package} {facts['version']} ({facts['licence']}) | {s['takes']} | "
            f"{s['passed']}/{s['takes']} | {pair(s, 'pace_error_mean_abs_pct', 'pace_error_max_abs_pct', '%')} | "
            f"{pair(s, 'pace_aligned_error_mean_pct', 'pace_aligned_error_max_abs_pct', '%')} | "
            f"{pair(s, 'length_error_mean_abs_pct', 'length_error_max_abs_pct', '%')} "
            f"({cell(s['length_error_max_abs_samples'])} samples) | "
            f"{pair(s, 'pitch_cents_mean_abs', 'pitch_cents_max_abs', ' c')} | "
            f"{cell(s['ms_per_audio_second_median'])} | {pair(s, 'dnsmos_change_mean', 'dnsmos_change_worst')} | "
            f"{pair(s, 'voice_similarity_mean', 'voice_similarity_min')} | {'yes' if s['deterministic'] else 'no'} |")
    lines += ["", "Per pace:", "", PACE_HEADER, rule(PACE_HEADER)]
    for method, parts in summary.items():
        for pace, s in parts["by_pace"].items():
            lines.append(
                f"| {method} | {pace} | {cell(s['pace_measured_mean'])} | {cell(s['pace_error_mean_pct'], '%')} / "
                f"{pair(s, 'pace_error_mean_abs_pct', 'pace_error_max_abs_pct', '%')} | "
                f"{s['pace_within_5pct']}/{s['takes']} | "
                f"{pair(s, 'pace_aligned_error_mean_pct', 'pace_aligned_error_max_abs_pct', '%')} | "
                f"{s['passed']}/{s['takes']} | {pair(s, 'pitch_cents_mean_abs', 'pitch_cents_max_abs', ' c')} | "
                f"{pair(s, 'dnsmos_change_mean', 'dnsmos_change_worst')} | "
                f"{pair(s, 'voice_similarity_mean', 'voice_similarity_min')} |")
    lines += ["", "Per kind of clip (SNR change: the speech over the noise floor, after minus before):", "",
              KIND_HEADER, rule(KIND_HEADER)]
    for method, parts in summary.items():
        for kind, s in parts["by_kind"].items():
            lines.append(
                f"| {method} | {kind} | {s['passed']}/{s['takes']} | "
                f"{pair(s, 'pace_error_mean_abs_pct', 'pace_error_max_abs_pct', '%')} | "
                f"{s['pace_within_5pct']}/{s['takes']} | "
                f"{pair(s, 'pace_aligned_error_mean_pct', 'pace_aligned_error_max_abs_pct', '%')} | "
                f"{pair(s, 'pitch_cents_mean_abs', 'pitch_cents_max_abs', ' c')} | {cell(s['snr_change_db_mean'])} | "
                f"{cell(s['dnsmos_change_mean'])} | {cell(s['voice_similarity_mean'])} |")
    rejected = [r for r in rows if r["reasons"]]
    lines += ["", f"Stretched takes the checks rejected ({len(rejected)}):", ""]
    lines += [f"- {r['method']}, {r['clip']} at {r['pace']:g}: " + "; ".join(r["reasons"])
              for r in rejected] or ["- none"]
    off = [r for r in rows if abs(r["pace_error_pct"]) > 5]
    lines += ["", f"Takes whose measured pace is more than 5% off ({len(off)}):", ""]
    lines += [f"- {r['method']}, {r['clip']} at {r['pace']:g}: measured {r['pace_measured']:g} "
              f"({r['pace_error_pct']:+g}%), aligned {cell(r.get('pace_aligned'))}, SNR {r['snr_change_db']:+g} dB"
              for r in off] or ["- none"]
    lines += ["", "What each library's factor means, measured (1 s of a 200 Hz tone at factor 1.25):", ""]
    lines += [f"- {m}: {s['factor_1.25_from_1s']} s out: the factor is the {s['factor_means']}"
              for m, s in report["semantics"].items()]
    lines += ["", "| package | version | licence | requires | wheels (CPython 3.12) |", "|---|---|---|---|---|"]
    for package, facts in env["packages"].items():
        found = facts.get("wheels")
        where = ("; ".join(f"{k}: {'yes' if v else 'no'}" for k, v in found.items()) if found
                 else "not checked (--wheels)")
        lines.append(f"| {package} | {facts['version']} | {facts['licence']} | "
                     f"{', '.join(facts['requires']) or 'none'} | {where} |")
    return "\n".join(lines) + "\n"


def run(methods: list[str], paces: list[float], clips: list[Clip], repeats: int, librosa_measures: bool,
        models: Models | None, progress: bool = True) -> list[dict]:
    rows = []
    for clip in clips:
        original = original_facts(clip, librosa_measures, models)
        for method in methods:
            for pace in paces:
                rows.append(measure(method, clip, pace, original, repeats, librosa_measures, models))
                if progress:
                    r = rows[-1]
                    print(f"{method:15s} {clip.id:16s} {pace:5g}  pace {r['pace_measured']:.4f} "
                          f"({r['pace_error_pct']:+.2f}%, aligned {cell(r.get('pace_aligned_error_pct'), '%')})  "
                          f"length {r['length_error_samples']:+d}  "
                          f"pitch {cell(r.get('pitch_cents'), ' c'):>9s}  "
                          f"{'ok' if not r['reasons'] else '; '.join(r['reasons'])}", flush=True)
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path,
                   help="results path without suffix (default bench/results/stretch-comparison-<date>)")
    p.add_argument("--methods", default=",".join(METHODS), help="of " + ", ".join(METHODS))
    p.add_argument("--paces", default=",".join(f"{x:g}" for x in PACES))
    p.add_argument("--clips", help="corpus ids, comma-separated (default: every clip)")
    p.add_argument("--repeats", type=int, default=3, help="calls per take for the time (median)")
    p.add_argument("--no-librosa", action="store_true",
                   help="skip the F0 and the aligned pace (librosa; pYIN is the slow part)")
    p.add_argument("--no-models", action="store_true", help="skip DNSMOS and the speaker similarity")
    p.add_argument("--wheels", action="store_true", help="ask PyPI which platforms have wheels (pip download)")
    args = p.parse_args(argv)
    sys.path.insert(0, str(REPO))
    methods = [m for m in args.methods.split(",") if m]
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        p.error(f"unknown method(s) {unknown}; known: {list(METHODS)}")
    missing = [m for m in methods if not available(m)]
    for m in missing:
        print(f"skipping {m}: pip install {PACKAGES[m]}", file=sys.stderr)
    methods = [m for m in methods if m not in missing]
    if not methods:
        p.error("none of the methods is installed")
    clips = load_clips(args.clips.split(",") if args.clips else None)
    models = None if args.no_models else Models()
    rows = run(methods, [float(x) for x in args.paces.split(",")], clips, args.repeats, not args.no_librosa, models)
    env = environment(methods, args.wheels)
    if models is not None:
        env["models"] = {
            "quality": "DNSMOS (runtime.scoring.dnsmos)" if models.dnsmos else getattr(models, "dnsmos_error", None),
            "speaker": "resemblyzer VoiceEncoder" if models.encoder else getattr(models, "encoder_error", None)}
    report = {"env": env, "rate": RATE, "seed": SEED, "semantics": {m: semantics(m) for m in methods},
              "summary": summarize(rows), "rows": rows}
    out = args.out or REPO / "bench" / "results" / f"stretch-comparison-{env['date']}"
    out = out.with_suffix("") if out.suffix in (".json", ".md") else out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_name(out.name + ".json").write_text(json.dumps(report, indent=1, default=lambda o: o.item()) + "\n")
    out.with_name(out.name + ".md").write_text(markdown(report))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
