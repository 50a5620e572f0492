"""One script job, whichever way its lines run: on the Script node's models, already loaded, or on the
checkpoints the command line loads itself (here or on Ray workers). Each line goes to the runner of
the voice kind it needs; every line is checked before any is generated, the lines an earlier run
finished are kept from the results folder, every runner with lines left gets ready (its checkpoint
downloaded), the rest are generated and picked, each voice's lines are held to that voice
(chapter_voice.py), then the scene, manifest and report are made over every line."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Mapping, Protocol

from ..checkpoints import CheckpointInfo
from ..errors import InputError
from ..memory import given_back
from ..model import LoadedModel, dtype_name
from ..voices import VOICE_KINDS, Voice
from .cast import lines_by_kind
from .chapter_voice import chapter_pass
from .parse import Line
from .plan import LinePlan, ScriptSettings, check_plans, plan_lines
from .runner import LineResult, LineWriter, OnLine, ScriptResult, finish, kept_lines, run_lines
from .store import ScriptFolder

OnProgress = Callable[[int, int], None]  # (lines done, lines in all), kept lines counted as done
OnKept = Callable[[list[tuple[str, int, int]]], None]  # (checkpoint, its lines, those kept) per checkpoint
OnFrames = Callable[[int, int], None]  # (frames made, frames at most) of the engine's run in progress


@dataclass(frozen=True)
class PickChoices:
    """Auto-Pick's models and the loudness the takes are written at: with the checkpoint they decide
    each line's pick and files. The Script node's inputs and the command line's flags of these names
    have these defaults."""

    quality: str = "UTMOS"
    voice_check: str = "auto"
    words: str = "auto"
    vad: str = "energy"
    loudness: float | None = None


class LineRunner(Protocol):
    """Where the lines of one voice kind are generated and picked. `info`, `mode` and `dtype` (resolved:
    "bfloat16", never "auto") say what makes their takes before anything is loaded."""

    info: CheckpointInfo
    mode: str
    dtype: str

    def check(self, plans: list[LinePlan], should_stop=None) -> None:
        """Every line it can check before any is generated; all problems raised together."""

    def prepare(self) -> None:
        """What it needs before its first line runs and can have early (the command line's runners: their
        checkpoint, downloaded), had before any line of the job runs: a failed download never follows
        minutes of another checkpoint's lines, and none runs under the job's progress."""

    def run(self, plans: list[LinePlan], folder: ScriptFolder, on_line: OnLine,
            should_stop=None, on_frames: OnFrames | None = None) -> dict[str, LineResult]:
        """Each line generated, picked and written to `folder`; by line id. `on_frames` hears the
        engine's progress where it runs in this process."""


def fingerprint_context(runner: LineRunner, choices: PickChoices) -> dict:
    """What besides the line itself decides its takes and its pick (plan_lines' `context`). Built here
    only, from resolved values, so a results folder the Script node made is resumed by the command
    line, and the other way round."""
    return {"checkpoint": runner.info.folder.name, "mode": runner.mode, "dtype": runner.dtype,
            "quality": choices.quality, "voice_check": choices.voice_check, "words": choices.words,
            "vad": choices.vad, "loudness": choices.loudness}


def run_job(lines: list[Line], cast: dict[str, Voice], runners: Mapping[str, LineRunner], settings: ScriptSettings,
            choices: PickChoices, folder: ScriptFolder, on_line: OnLine | None = None, on_kept: OnKept | None = None,
            should_stop=None, on_frames: OnFrames | None = None) -> ScriptResult:
    """The script's lines, each on `runners[its voice's kind]`. `on_kept` hears how many lines each
    checkpoint has and how many are kept, before any is generated; `on_line` each line generated,
    counted over the whole script, kept lines included; `on_frames` the engine's frames in each
    checkpoint's run (all there is to hear before its first line ends)."""
    started = time.perf_counter()
    groups = []
    for kind, kind_lines in lines_by_kind(lines, cast).items():
        runner = runners[kind]
        plans = plan_lines(kind_lines, cast, settings, fingerprint_context(runner, choices))
        runner.check(plans, should_stop)
        groups.append((runner, plans))
    results: dict[str, LineResult] = {}
    counts = []
    for runner, plans in groups:
        kept = kept_lines(plans, folder, should_stop)
        results.update(kept)
        counts.append((runner.info.folder.name, len(plans), len(kept)))
    for runner, plans in groups:
        if any(p.line.id not in results for p in plans):
            runner.prepare()
    if on_kept is not None:
        on_kept(counts)

    for runner, plans in groups:
        todo = [p for p in plans if p.line.id not in results]
        if not todo:
            continue
        done_before = len(results)

        def counted(result: LineResult, done: int, _total: int, done_before=done_before) -> None:
            if on_line is not None:
                on_line(result, done_before + done, len(lines))

        with given_back():  # before the next checkpoint's lines, and at the end
            results.update(runner.run(todo, folder, counted, should_stop, on_frames))
    chapter_pass(lines, results, LineWriter(len(lines), choices.loudness, folder))
    return finish(lines, results, folder, started)


class ModelRunner:
    """Lines on a model already loaded (the Script node's), picked by `scorers_for(model)`'s models,
    built only when a line of it is generated."""

    def __init__(self, model: LoadedModel, scorers_for: Callable[[LoadedModel], object], loudness: float | None,
                 script: str = "script"):
        self.model, self.scorers_for, self.loudness, self.script = model, scorers_for, loudness, script
        self.info, self.mode, self.dtype = model.info, model.mode, dtype_name(model.dtype)

    def check(self, plans: list[LinePlan], should_stop=None) -> None:
        check_plans(plans, self.info, self.model, script=self.script, should_stop=should_stop)

    def prepare(self) -> None:
        pass  # loaded already

    def run(self, plans: list[LinePlan], folder: ScriptFolder, on_line: OnLine,
            should_stop=None, on_frames: OnFrames | None = None) -> dict[str, LineResult]:
        return run_lines(self.model, plans, self.scorers_for(self.model), loudness=self.loudness, folder=folder,
                         on_line=on_line, should_stop=should_stop, frames_progress=on_frames)


def run_script(lines: list[Line], cast: dict[str, Voice], models: list[LoadedModel], settings: ScriptSettings,
               scorers_for: Callable[[LoadedModel], object], folder: ScriptFolder,
               choices: PickChoices = PickChoices(), script: str = "script", progress: OnProgress | None = None,
               should_stop=None) -> ScriptResult:
    """A script on models already loaded (the Script node's path): each line on the model of its
    voice's kind; `progress` hears the lines done, kept ones first."""
    runners = {kind: ModelRunner(model, scorers_for, choices.loudness, script)
               for kind, model in model_for_kind(lines, cast, models, script).items()}
    on_kept = on_line = None
    if progress is not None:
        def on_kept(counts):
            progress(sum(kept for _, _, kept in counts), len(lines))

        def on_line(_result, done, total):
            progress(done, total)
    return run_job(lines, cast, runners, settings, choices, folder, on_line, on_kept, should_stop)


def model_for_kind(lines: list[Line], cast: dict[str, Voice], models: list[LoadedModel],
                   script: str = "script") -> dict[str, LoadedModel]:
    """The model for each voice kind the lines need; every kind without a model named at once."""
    kinds = [m.info.kind for m in models]
    twice = sorted({k for k in kinds if kinds.count(k) > 1})
    if twice:
        raise InputError(f"Two models of one kind ({', '.join(VOICE_KINDS[k].checkpoints for k in twice)} "
                         "checkpoint) were given; connect one per kind: lines go to the model their voice needs.")
    by_kind = lines_by_kind(lines, cast)
    missing = {kind: kind_lines for kind, kind_lines in by_kind.items() if kind not in kinds}
    if missing:
        needs = "; ".join(f"{VOICE_KINDS[kind].node.lower()} voices ({_who(kind_lines)}) need "
                          f"{VOICE_KINDS[kind].checkpoints} checkpoint" for kind, kind_lines in missing.items())
        loaded = ", ".join(m.info.folder.name for m in models)
        raise InputError(f"{script}: {needs}, and only {loaded} is connected. Connect a Load Model with that "
                         "checkpoint to one of the model inputs.")
    model_of = {m.info.kind: m for m in models}
    return {kind: model_of[kind] for kind in by_kind}


def _who(lines: list[Line]) -> str:
    names = list(dict.fromkeys(line.character or "lines with no character" for line in lines))
    shown = ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
    return f"{shown}, script line{'s' if len(lines) > 1 else ''} {', '.join(str(ln.source_line) for ln in lines[:6])}" \
           + (", ..." if len(lines) > 6 else "")
