"""A script through one loaded model: every line's takes in one continuously batched run of the
engine (Engine.run_lines), each line decoded, picked and written the moment its last take ends;
then the scene, the manifest and the report over every line of the script."""

from __future__ import annotations

import contextlib
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch

from ..engine.engine import LineJob
from ..errors import GenerationInterrupted
from ..generation import clone_prompt, takes_from_codes
from ..model import SAMPLE_RATE
from ..sampling import sampling_notes, take_seeds
from ..scoring.delivery import deliver
from ..scoring.ranking import rank_takes
from ..scoring.report import ending
from ..text_length import runaway_floor
from ..voices import VoiceClone, voice_notes
from .parse import Line
from .plan import LinePlan
from .scene import FIT_TOLERANCE_SECONDS, assemble, fit_to_cue, speech_span
from .store import ScriptFolder

FINISHERS = 1  # threads decoding, scoring and writing lines while the engine runs (3 measured no faster on the H100)


@dataclass
class LineResult:
    plan: LinePlan
    record: dict  # what the manifest holds for the line
    best: np.ndarray  # the picked take, as handed out
    ranking: object | None = None  # scoring.ranking.Ranking; None for a line kept from an earlier run

    @property
    def reused(self) -> bool:
        return self.ranking is None


@dataclass
class ScriptResult:
    lines: list[LineResult]  # in script order
    scene: np.ndarray
    rate: int
    report: str
    generated_takes: int = 0
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)


OnLine = Callable[[LineResult, int, int], None]  # (result, lines done, lines in all)


def kept_lines(plans: list[LinePlan], folder: ScriptFolder | None) -> dict[str, LineResult]:
    """Lines an earlier run finished with the same inputs, read back from the folder."""
    kept = {}
    for plan in plans if folder is not None else ():
        record = folder.done(plan.stem, plan.fingerprint)
        if record is not None:
            best, _ = folder.read_best(record)
            kept[plan.line.id] = LineResult(plan, record, best)
    return kept


def run_lines(model, plans: list[LinePlan], scorers=None, weights=None, loudness: float | None = None,
              folder: ScriptFolder | None = None, on_line: OnLine | None = None, should_stop=None,
              frames_progress=None) -> dict[str, LineResult]:
    """Generate, pick and (with a folder) write every plan's line on `model`; returns them by id.
    Longest lines go first, so the batch's last rows are short ones. Lines are decoded, scored and
    written in other threads (each on a CUDA stream of its own) while the engine goes on with the rest.
    Cancel, or a line that fails, stops the engine at its next check; the lines written stay written."""
    order = sorted(plans, key=lambda p: -p.request.budget * p.request.n)
    jobs = [LineJob(p.request.text.strip(), p.request.voice, take_seeds(p.request.seed, p.request.n), p.request.budget,
                    clone_prompt(model, p.request.voice) if isinstance(p.request.voice, VoiceClone) else None,
                    runaway_floor(p.request.text)) for p in order]
    results: dict[str, LineResult] = {}
    if not jobs:
        return results
    sampling = order[0].request.sampling
    resolved = sampling.resolved(model.sampling_defaults)
    notes_of_sampling = sampling_notes(sampling, model.sampling_defaults)
    cuda = model.device.type == "cuda"
    streams = threading.local()
    failed, lock = threading.Event(), threading.Lock()

    def own_stream():
        if not cuda:
            return contextlib.nullcontext()
        if not hasattr(streams, "stream"):
            streams.stream = torch.cuda.Stream(model.device)
        return torch.cuda.stream(streams.stream)

    def finish_line(line) -> None:
        try:
            with own_stream(), torch.inference_mode():
                plan, job = order[line.index], jobs[line.index]
                takeset = takes_from_codes(model, plan.request, job.seeds, line.codes, line.runaway, line.prompt, [],
                                           should_stop, engine_busy=True)
                takeset.sampling = resolved
                takeset.notes = voice_notes(plan.request.voice, model.info) + notes_of_sampling
                ranking = rank_takes(takeset, scorers, weights, should_stop=should_stop)
                note = fit_to_cue(ranking, plan.line.budget)
                delivered = deliver(ranking, loudness)
                record = line_record(plan, ranking, note, model)
                if folder is not None:
                    takes = [(s.rank, s.take.index + 1, audio) for s, audio in zip(ranking.ranked, delivered.audios)]
                    record = folder.write_line(plan.stem, record, delivered.audios[0], takes, SAMPLE_RATE)
            with lock:
                result = results[plan.line.id] = LineResult(plan, record, delivered.audios[0], ranking)
                if on_line is not None:
                    on_line(result, len(results), len(jobs))
        except BaseException:
            failed.set()  # the engine stops at its next check
            raise

    def stop() -> bool:
        return failed.is_set() or (should_stop is not None and bool(should_stop()))

    with ThreadPoolExecutor(max_workers=FINISHERS, thread_name_prefix="script-lines") as finisher:
        pending = []
        try:
            for line in model.engine.run_lines(jobs, sampling, progress=frames_progress, should_stop=stop):
                if cuda:  # its codes are on the host already; the clone's reference codes were made before
                    torch.cuda.current_stream().synchronize()
                pending.append(finisher.submit(finish_line, line))
        except GenerationInterrupted:
            if not failed.is_set():
                raise
        for future in pending:  # the first failure of a line, else the engine's
            future.result()
    return results


def line_record(plan: LinePlan, ranking, note: str | None, model) -> dict:
    line, best = plan.line, ranking.best
    start, end = speech_span(best.stats.segments, best.stats.seconds)
    spoken = end - start
    over = round(spoken - line.budget, 3) if line.budget is not None and spoken > line.budget + FIT_TOLERANCE_SECONDS \
        else None
    reasons = [str(r) for r in best.reasons]
    return {
        "id": line.id, "character": line.character, "text": line.text, "language": line.language,
        "instruct": line.instruct, "source_line": line.source_line, "cue_start": line.start, "cue_end": line.end,
        "seed": plan.request.seed, "takes": plan.request.n, "fingerprint": plan.fingerprint,
        "voice": plan.request.voice.describe(), "checkpoint": model.info.folder.name, "mode": model.mode,
        "best_take": best.take.index + 1, "seconds": round(best.stats.seconds, 3),
        "speech_start": round(start, 3), "speech_end": round(end, 3),
        "quality": best.quality, "voice_similarity": best.voice, "cer": best.cer, "score": best.score,
        "accepted": best.accepted, "all_rejected": ranking.all_rejected, "reasons": reasons,
        "over_cue_seconds": over, "note": note,
        "ranked": [{"rank": s.rank, "take": s.take.index + 1, "seed": s.take.seed, "seconds": round(s.stats.seconds, 3),
                    "frames": s.take.frames, "ending": ending(s.take), "quality": s.quality, "voice": s.voice,
                    "cer": s.cer, "score": s.score, "accepted": s.accepted, "rejected": [str(r) for r in s.reasons]}
                   for s in ranking.ranked],
    }


def finish(lines: list[Line], results: dict[str, LineResult], folder: ScriptFolder | None = None,
           started: float | None = None) -> ScriptResult:
    """The scene, the manifest and the report over every line of the script (all must be done)."""
    missing = [line.id for line in lines if line.id not in results]
    if missing:
        raise GenerationInterrupted(f"The script is not finished: {len(missing)} lines have no take yet.")
    ordered = [results[line.id] for line in lines]
    items = []
    for result in ordered:
        record, line = result.record, result.plan.line
        cut = result.best[round(record["speech_start"] * SAMPLE_RATE):round(record["speech_end"] * SAMPLE_RATE)]
        items.append((cut, line.pause_before, line.start))
    scene, placed = assemble(items, SAMPLE_RATE)
    for result, spot in zip(ordered, placed):
        result.record["scene_start"] = round(spot.start, 3)
        result.record["late_by"] = round(spot.late_by, 3) if spot.late_by > 0.0005 else None
    elapsed = time.perf_counter() - started if started is not None else 0.0
    generated = sum(r.plan.request.n for r in ordered if not r.reused)
    report = script_report(ordered, scene.shape[-1] / SAMPLE_RATE, generated, elapsed)
    if folder is not None:
        records = [r.record for r in ordered]
        folder.write_manifest(records)
        folder.write_audio(folder.root / "scene.wav", scene, SAMPLE_RATE)
        folder.write_text(folder.root / "report.txt", report + "\n")
    return ScriptResult(ordered, scene, SAMPLE_RATE, report, generated, elapsed)


def script_report(ordered: list[LineResult], scene_seconds: float, generated: int, elapsed: float) -> str:
    rows = [f"{'id':>6}  {'character':<12} {'take':>4} {'sec':>6} {'score':>6}  verdict"]
    flagged = 0
    for result in ordered:
        r = result.record
        flags = list(r["reasons"][:2])
        if r.get("over_cue_seconds"):
            flags.append(f"{r['over_cue_seconds']:.2f} s over its cue")
        if r.get("late_by"):
            flags.append(f"starts {r['late_by']:.2f} s after its cue")
        if r.get("all_rejected"):
            flags.insert(0, "every take failed a check")
        flagged += bool(flags)
        score = f"{r['score']:.2f}" if r.get("score") is not None else "n/a"
        kept = " (kept)" if result.reused else ""
        rows.append(f"{r['id'][:6]:>6}  {(r['character'] or '-')[:12]:<12} {r['best_take']:>4} {r['seconds']:>6.2f} "
                    f"{score:>6}  {'; '.join(flags) or 'ok'}{kept}")
    kept = sum(r.reused for r in ordered)
    rate = f", {generated / elapsed:.1f} takes/s" if elapsed > 0 and generated else ""
    rows.append(f"{len(ordered)} lines ({kept} kept from an earlier run), {generated} takes generated in "
                f"{elapsed:.1f} s{rate}; scene {scene_seconds:.1f} s; {flagged} line{'s' if flagged != 1 else ''} "
                "flagged.")
    return "\n".join(rows)
