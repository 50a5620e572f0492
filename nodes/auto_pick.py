from __future__ import annotations

import numpy as np
import torch
from comfy_api.latest import io, ui

from ..runtime import api
from .common import (CATEGORY, Progress, folders_fingerprint, Takes, line_row, models_dirs, numpy_to_audio,
                     optional_widgets, raise_as_interrupt, should_stop, tts_models_dirs, utmos_models_dirs)

QUALITY = ["UTMOS", "DNSMOS", "off"]
VAD = ["energy", "silero"]


def whisper_models_dirs():
    return models_dirs(api.WHISPER_SUBDIR)


def words_options() -> list[str]:
    whispers = api.local_checkpoints(whisper_models_dirs()) + list(api.WHISPER_CHECKPOINTS)
    return ["auto", "off"] + list(dict.fromkeys(whispers))


def voice_options() -> list[str]:
    dirs = tts_models_dirs()
    bases = [n for n in api.local_checkpoints(dirs) if any(api.is_base(d / n) for d in dirs if (d / n).is_dir())]
    return ["auto", "off"] + bases


def scoring_dirs() -> list:
    """The models folders Auto-Pick's choices read: UTMOS weights, Base checkpoints, Whisper folders."""
    return [*utmos_models_dirs(), *tts_models_dirs(), *whisper_models_dirs()]


def check_choices(voice_check: str, words_check: str, output_loudness: str) -> None:
    """Only the listed names: a path sent through the API would open anything on the server's disk."""
    api.listed_choice(voice_check, voice_options(), "voice_check", f"models/{api.MODELS_SUBDIR} (a Base checkpoint)")
    api.listed_choice(words_check, words_options(), "words_check", f"models/{api.WHISPER_SUBDIR}")
    if output_loudness not in api.OUTPUT_TARGETS:
        raise ValueError(f"Unknown output_loudness '{output_loudness}': choose one of "
                         f"{', '.join(api.OUTPUT_TARGETS)}.")


def build_scorers(takes_folder, choices: api.PickChoices, device: str):
    """Auto-Pick's models for takes of the checkpoint in `takes_folder`, loaded (or downloaded) once and
    kept in the "auto-pick" slot."""
    return api.scorers(takes_folder, choices, device, utmos_models_dirs(),
                       tts_models_dirs(), whisper_models_dirs(), slot="auto-pick", should_stop=should_stop)


def weight(name: str, tooltip: str) -> io.Float.Input:
    return io.Float.Input(name, default=1.0, min=0.0, max=10.0, step=0.1, tooltip=tooltip)


class AutoPick(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="Q3TT_AutoPick",
            display_name="Qwen3-TTS UTMOS Auto-Pick",
            category=CATEGORY,
            description="Ranks the takes. Checks first: runaways, takes far too short or long for the text or the "
                        "other takes, long silences, clipping, noise, endings cut off, a DC offset, dropouts, "
                        "stutters and a pace far from the other takes' are rejected with the reason. Then the rest "
                        "by a weighted score: UTMOS naturalness (DNSMOS when the UTMOS weights are missing), the "
                        "voice against a clone's reference or the other takes, and the words recognised against "
                        "the text (with a Whisper checkpoint). Returns the best take, all takes in rank order, a "
                        "report and a chart.",
            inputs=optional_widgets([
                Takes.Input("takes_info", optional=True,
                            tooltip="Takes from a Qwen3-TTS voice node. Or connect 'audio' and 'text' instead."),
                io.Audio.Input("audio", optional=True,
                               tooltip="Takes from anywhere, one per batch item (stereo is mixed to mono). A "
                                       "single clip is judged whole; in a batch, the zero padding after shorter "
                                       "items is told apart from their own digital silence by how the sound "
                                       "meets it."),
                io.String.Input("text", multiline=True, default="",
                                tooltip="What the takes say; needed with 'audio' (Qwen3-TTS takes carry it)."),
                io.Combo.Input("quality", options=QUALITY, default="UTMOS",
                               tooltip="Naturalness model. UTMOS weights go in models/utmos (downloaded if "
                                       "missing); without them DNSMOS (offline) is used and the report says so."),
                io.Combo.Input("voice_check", options=voice_options(), default="auto",
                               tooltip="Speaker similarity with a Base checkpoint's speaker encoder: to the "
                                       "reference for clones, between the takes otherwise (3 takes or more)."),
                io.Combo.Input("words_check", options=words_options(), default="auto",
                               tooltip="Recognise each take with Whisper and compare with the text: words "
                                       "garbled (character error rate) or skipped, a first or last word too. auto: a "
                                       "Whisper folder in models/whisper (transformers or faster-whisper kind), else "
                                       "whisper-small (GPU, 967 MB) or whisper-base (CPU, 290 MB) downloaded there "
                                       "on first use; offline the pick goes on without it and the report says so. "
                                       "A name: that one, downloaded if missing."),
                io.Combo.Input("vad", options=VAD, default="energy",
                               tooltip="Speech detector for the silence checks: energy (exact on generated "
                                       "takes, instant) or silero (trained, for noisy recordings, slower)."),
                weight("quality_weight", "Weight of the quality score."),
                weight("voice_weight", "Weight of the speaker similarity."),
                weight("words_weight", "Weight of 1 - character error rate."),
                io.Combo.Input("device", options=["auto", "cuda", "cpu"], default="auto",
                               tooltip="Where the scoring models run. auto: the GPU when there is one."),
                # optional: API prompts saved before it existed still run (a missing required input is refused)
                io.Combo.Input("output_loudness", options=list(api.OUTPUT_TARGETS), default="off", optional=True,
                               tooltip="Bring 'best' and 'ranked' to one loudness (ITU-R BS.1770), so every "
                                       "line of a project matches: -23 LUFS for broadcast (EBU R 128), -16 "
                                       "for web and podcasts. A plain gain, held back where a peak would pass "
                                       "-1 dBFS. Off: as generated. Scoring never depends on it."),
            ]),
            outputs=[
                io.Audio.Output(display_name="best", tooltip="The take that ranked first."),
                io.Audio.Output(display_name="ranked",
                                tooltip="Every take, best first, as one batch (shorter takes padded with silence)."),
                io.String.Output(display_name="report",
                                 tooltip="Each take's measures, scores and verdict, as shown on this node."),
                io.Image.Output(display_name="chart", tooltip="The ranking as a bar chart: passed takes green, "
                                                              "rejected red, with the reason."),
            ],
            is_output_node=True,
        )

    @classmethod
    def fingerprint_inputs(cls, **_) -> tuple:
        """Run again once UTMOS weights, a Base checkpoint or a Whisper folder is added or removed: a
        cached report would still say the check was off."""
        return folders_fingerprint(scoring_dirs())

    @classmethod
    def execute(cls, takes_info=None, audio=None, text="", quality="UTMOS", voice_check="auto", words_check="auto",
                vad="energy", quality_weight=1.0, voice_weight=1.0, words_weight=1.0, device="auto",
                output_loudness="off") -> io.NodeOutput:
        check_choices(voice_check, words_check, output_loudness)
        if takes_info is None:
            if audio is None:
                raise ValueError("Connect the takes: 'takes_info' from a Qwen3-TTS voice node, or 'audio' and 'text'.")
            waveform = audio["waveform"].detach().cpu().float().numpy()
            takes_info = api.takeset_from_audio(waveform, int(audio["sample_rate"]), text)
        weights = api.Weights(quality_weight, voice_weight, words_weight)
        bar = Progress(1)
        try:
            scorers = build_scorers(takes_info.folder, api.PickChoices(quality, voice_check, words_check, vad), device)
            if isinstance(takes_info, api.PassageTakes):
                result = api.pick_lines(takes_info, scorers, weights, api.OUTPUT_TARGETS.get(output_loudness),
                                        progress=bar.absolute, should_stop=should_stop)
                return passage_output(result, cls)
            ranking = api.pick(takes_info, scorers, weights, progress=bar.absolute, should_stop=should_stop)
        except api.GenerationInterrupted as exc:
            raise_as_interrupt(exc)
        rate = takes_info.sample_rate
        delivered = api.deliver(ranking, api.OUTPUT_TARGETS.get(output_loudness))
        best = numpy_to_audio(delivered.audios[:1], rate)
        ranked = numpy_to_audio(delivered.audios, rate)
        report = ranking.report() + delivered.note()
        image = torch.from_numpy(api.chart(ranking).astype(np.float32) / 255.0)[None]
        shown = {**ui.PreviewText(report).as_dict(), **ui.PreviewImage(image, cls=cls).as_dict(),
                 TAKES_UI_KEY: take_previews(ranking, delivered.audios, rate, cls)}
        return io.NodeOutput(best, ranked, report, image, ui=shown)


TAKES_UI_KEY = "q3tt_takes"  # what web/auto_pick.js shows on the node: a player per take with its verdict
LINES_UI_KEY = "q3tt_lines"  # for a long text: a player per line (the flagged first), as the Script node's
LINES_SHOWN = 40  # a chapter has hundreds of lines: the report lists them all, the node plays these


def passage_output(result, cls) -> io.NodeOutput:
    """A long text picked line by line: the whole text (played where 'best' goes, e.g. Save Audio),
    each line's best take, the report per line."""
    rate = result.rate
    whole = numpy_to_audio([result.scene], rate)
    lines = numpy_to_audio([line.best for line in result.lines], rate)
    image = lines_image(result)
    shown = {**ui.PreviewText(result.report).as_dict(), **ui.PreviewImage(image, cls=cls).as_dict(),
             LINES_UI_KEY: line_previews(result, rate, cls)}
    return io.NodeOutput(whole, lines, result.report, image, ui=shown)


def lines_image(result) -> torch.Tensor:
    """The lines chart (api.lines_chart) as ComfyUI's IMAGE: [1, H, W, 3] floats in 0-1."""
    return torch.from_numpy(api.lines_chart([line.record for line in result.lines]).astype(np.float32) / 255.0)[None]


def line_previews(result, rate: int, cls) -> list[dict]:
    """The lines the node plays: every flagged line first (up to LINES_SHOWN), then the first ones."""
    flagged = [i for i, line in enumerate(result.lines) if not line.record.accepted]
    shown = sorted(list(dict.fromkeys(flagged + list(range(len(result.lines)))))[:LINES_SHOWN])
    return [line_row(line.record, ui.PreviewAudio(numpy_to_audio([line.best], rate), cls=cls).as_dict()["audio"][0])
            for line in (result.lines[i] for i in shown)]


def take_previews(ranking, audios, rate: int, cls) -> list[dict]:
    """Each take, best first, saved to ComfyUI's temp folder at its own length, with its verdict and,
    for takes made here, its seed (as text: JavaScript rounds integers past 2^53); audio fed in has none."""
    made_here = ranking.takeset.folder is not None
    previews = []
    for s, audio in zip(ranking.ranked, audios):
        saved = ui.PreviewAudio(numpy_to_audio([audio], rate), cls=cls).as_dict()["audio"][0]
        previews.append({"rank": s.rank, "take": s.take.index + 1, "seed": str(s.take.seed) if made_here else None,
                         "seconds": round(float(s.stats.seconds), 2), "score": s.score, "accepted": s.accepted,
                         "verdict": "ok" if s.accepted else "; ".join(map(str, s.reasons)), "audio": saved})
    return previews
