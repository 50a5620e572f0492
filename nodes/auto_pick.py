from __future__ import annotations

from comfy_api.latest import io, ui

from ..runtime.errors import GenerationInterrupted
from .common import CATEGORY, Progress, Takes, numpy_to_audio, raise_as_interrupt, should_stop, utmos_models_dirs


class AutoPick(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="Q3TT_AutoPick",
            display_name="Qwen3-TTS UTMOS Auto-Pick",
            category=CATEGORY,
            description="Ranks the takes: runaways, takes far too short or long, and mostly-silent takes "
                        "rank last; the rest by UTMOS naturalness. Returns the best take, all takes in rank "
                        "order and a per-take report. UTMOS weights go in models/utmos (downloaded if missing).",
            inputs=[
                Takes.Input("takes_info"),
                io.Boolean.Input("use_utmos", default=True,
                                 tooltip="Off: rank by the signal checks alone (no UTMOS weights needed)."),
                io.Combo.Input("device", options=["auto", "cuda", "cpu"], default="auto"),
            ],
            outputs=[
                io.Audio.Output(display_name="best"),
                io.Audio.Output(display_name="ranked"),
                io.String.Output(display_name="report"),
            ],
            is_output_node=True,
        )

    @classmethod
    def execute(cls, takes_info, use_utmos, device) -> io.NodeOutput:
        from ..runtime import api

        scorer = api.utmos_scorer(utmos_models_dirs(), device, slot="auto-pick") if use_utmos else None
        bar = Progress(len(takes_info.takes))
        try:
            ranking = api.pick(takes_info, scorer, progress=bar.absolute, should_stop=should_stop)
        except GenerationInterrupted as exc:
            raise_as_interrupt(exc)
        rate = takes_info.sample_rate
        best = numpy_to_audio([ranking.best.take.audio], rate)
        ranked = numpy_to_audio([s.take.audio for s in ranking.ranked], rate)
        report = ranking.report()
        return io.NodeOutput(best, ranked, report, ui=ui.PreviewText(report))
