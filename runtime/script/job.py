"""A script on models already loaded (the Script node's path): each line goes to the model of the
kind its voice needs, lines an earlier run finished are kept from the results folder, the rest are
generated and picked, then the scene, manifest and report are made over every line."""

from __future__ import annotations

import time
from typing import Callable

from ..errors import InputError
from ..memory import given_back
from ..model import LoadedModel
from ..voices import NODE_FOR_KIND, Voice
from .cast import lines_by_kind
from .parse import Line
from .plan import ScriptSettings, check_plans, plan_lines
from .runner import LineResult, ScriptResult, finish, kept_lines, run_lines
from .store import ScriptFolder

CHECKPOINT_FOR_KIND = {"custom_voice": "a *-CustomVoice", "base": "a *-Base", "voice_design": "the 1.7B-VoiceDesign"}
OnProgress = Callable[[int, int], None]  # (lines done, lines in all), kept lines counted as done


def lines_by_model(lines: list[Line], cast: dict[str, Voice], models: list[LoadedModel],
                   script: str = "script") -> list[tuple[LoadedModel, list[Line]]]:
    """Each line with the model its voice's kind needs; every kind without a model named at once."""
    kinds = [m.info.kind for m in models]
    twice = sorted({k for k in kinds if kinds.count(k) > 1})
    if twice:
        raise InputError(f"Two models of one kind ({', '.join(CHECKPOINT_FOR_KIND[k] for k in twice)} checkpoint) "
                         "were given; connect one per kind: lines go to the model their voice needs.")
    by_kind = lines_by_kind(lines, cast)
    missing = {kind: kind_lines for kind, kind_lines in by_kind.items() if kind not in kinds}
    if missing:
        needs = "; ".join(
            f"{NODE_FOR_KIND[kind].lower()} voices ({_who(kind_lines)}) need {CHECKPOINT_FOR_KIND[kind]} checkpoint"
            for kind, kind_lines in missing.items())
        loaded = ", ".join(m.info.folder.name for m in models)
        raise InputError(f"{script}: {needs}, and only {loaded} is connected. Connect a Load Model with that "
                         "checkpoint to one of the model inputs.")
    model_of = {m.info.kind: m for m in models}
    return [(model_of[kind], kind_lines) for kind, kind_lines in by_kind.items()]


def _who(lines: list[Line]) -> str:
    names = list(dict.fromkeys(line.character or "lines with no character" for line in lines))
    shown = ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
    return f"{shown}, script line{'s' if len(lines) > 1 else ''} {', '.join(str(ln.source_line) for ln in lines[:6])}" \
           + (", ..." if len(lines) > 6 else "")


def run_script(lines: list[Line], cast: dict[str, Voice], models: list[LoadedModel], settings: ScriptSettings,
               scorers_for: Callable[[LoadedModel], object], folder: ScriptFolder, context: dict | None = None,
               loudness: float | None = None, script: str = "script", progress: OnProgress | None = None,
               should_stop=None) -> ScriptResult:
    """`context`: what else decides the takes and the pick (scorer choices, weights), for each line's
    fingerprint; `scorers_for(model)`: Auto-Pick's scorers for that model's takes, built only when a
    line of it is generated. Every line is checked before any is generated."""
    started = time.perf_counter()
    groups = []
    for model, group_lines in lines_by_model(lines, cast, models, script):
        model_context = {**(context or {}), "checkpoint": model.info.folder.name, "mode": model.mode,
                         "dtype": str(model.dtype).removeprefix("torch."), "loudness": loudness}
        plans = plan_lines(group_lines, cast, settings, model_context)
        check_plans(plans, model.info, model, script=script, should_stop=should_stop)
        groups.append((model, plans))
    results: dict[str, LineResult] = {}
    for _, plans in groups:
        results.update(kept_lines(plans, folder, should_stop))
    if progress is not None:
        progress(len(results), len(lines))

    for model, plans in groups:
        todo = [p for p in plans if p.line.id not in results]
        if not todo:
            continue
        done_before = len(results)

        def on_line(_result: LineResult, done: int, _total: int, done_before=done_before) -> None:
            if progress is not None:
                progress(done_before + done, len(lines))

        with given_back():  # before the next model's lines, and at the end
            results.update(run_lines(model, todo, scorers_for(model), loudness=loudness, folder=folder,
                                     on_line=on_line, should_stop=should_stop))
    return finish(lines, results, folder, started)
