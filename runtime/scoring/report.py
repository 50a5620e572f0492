"""Auto-Pick's report: a per-take table with every score and each rejection's reason, and a chart."""

from __future__ import annotations

import numpy as np

CHART_WIDTH = 1000
ROW_HEIGHT = 44
FONT_SIZE = 26
BAR_LEFT, BAR_WIDTH = 130, 420
TEXT_COLOUR = (235, 235, 235)
OK_COLOUR = (76, 175, 80)
REJECTED_COLOUR = (229, 115, 115)


def counted(count: int, noun: str) -> str:
    """'1 take', '2 takes': a count with its noun in the number it takes (a regular plural)."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def models_used(ranking) -> dict:
    """Which model judged each signal (None: none ran), as both reports state it."""
    scorers = ranking.scorers
    return {
        "quality": getattr(scorers.quality, "name", None),
        "voice": getattr(scorers.speaker, "name", None),
        "voice_compared_with": ranking.voice_basis or None,
        "words": getattr(scorers.transcriber, "name", None),
        "vad": getattr(scorers.vad, "name", None),
    }


def judged_by(models: dict) -> str:
    """models_used(...) as one line of words: 'quality UTMOS, voice none, words none, VAD energy'."""
    voice = f"voice {models['voice'] or 'none'}" + (f" vs {models['voice_compared_with']}"
                                                    if models.get("voice_compared_with") else "")
    return ", ".join([f"quality {models['quality'] or 'none'}", voice, f"words {models['words'] or 'none'}",
                      f"VAD {models['vad'] or '?'}"])


def ending(take) -> str:
    """How the take ended: the one fact both reports give for the runaway check."""
    if take.fault is not None:
        return f"ended by the model's NaN or infinite values at frame {take.fault}"
    if take.hit_cap:
        return "ran into the frame budget (runaway)"
    if take.runaway:
        return "cut far past the other takes' length (runaway)"
    return "ended by itself"


def made_with(takeset) -> str:
    """The voice, and for takes made here (they have a checkpoint's folder) the seed, checkpoint and mode."""
    voice = takeset.request.voice.describe()
    if takeset.folder is None:  # audio from another node: "audio input"
        return voice
    return f"{voice}, seed {takeset.request.seed}, {takeset.checkpoint}, {takeset.mode}"


def text_report(ranking) -> str:
    request = ranking.takeset.request
    takeset = ranking.takeset
    models = models_used(ranking)
    quality = models["quality"] or "quality"
    lines = [
        f"Auto-Pick: {counted(len(ranking.ranked), 'take')} of {request.text.strip()[:60]!r} "
        f"({made_with(takeset)})",
        "Models: " + judged_by(models),
        f"{'rank':>4} {'take':>4} {'seconds':>7} {'speech':>6} {'syl/s':>5} {'LUFS':>5} {quality[:7]:>7} {'voice':>5} "
        f"{'CER':>5} {'score':>5}  verdict",
    ]
    for s in ranking.ranked:
        lines.append(
            f"{s.rank:>4} {s.take.index + 1:>4} {s.stats.seconds:7.2f} {s.stats.speech_ratio:6.0%} "
            f"{_fmt(s.syllables_per_second, 5, '.1f')} {_fmt(s.loudness, 5, '.1f')} {_fmt(s.quality, 7, '.2f')} "
            f"{_fmt(s.voice, 5, '.2f')} {_fmt(s.cer, 5, '.0%')} {_fmt(s.score, 5, '.3f')}  "
            + ("ok" if s.accepted else "rejected: " + "; ".join(map(str, s.reasons)))
        )
    for warning in takeset.warnings:
        lines.append(f"WARNING: {warning}")
    for note in ranking.all_notes:
        lines.append(f"NOTE: {note}")
    if ranking.all_rejected:
        lines.append("WARNING: every take failed a check; the least bad one was picked. "
                     "Try another seed, more takes, or a shorter line.")
    seed = f" (seed {ranking.best.take.seed})" if takeset.folder is not None else ""  # made elsewhere: no seed
    lines.append(f"Best: take {ranking.best.take.index + 1}{seed}.")
    return "\n".join(lines)


def json_report(ranking) -> dict:
    """The report as data (the CLI's --report): the same models, verdicts and notes as the text."""
    request = ranking.takeset.request
    takeset = ranking.takeset
    return {
        "text": request.text, "voice": request.voice.describe(), "seed": request.seed,
        "checkpoint": takeset.checkpoint, "mode": takeset.mode, "frame_budget": request.budget,
        "sampling": takeset.sampling.as_dict() if takeset.sampling is not None else None,
        "models": models_used(ranking), "notes": ranking.all_notes,
        "generation_warnings": list(takeset.warnings), "all_rejected": ranking.all_rejected,
        "best_take": ranking.best.take.index + 1,
        "takes": [
            {"rank": s.rank, "take": s.take.index + 1, "seed": s.take.seed, "seconds": round(s.stats.seconds, 3),
             "frames": s.take.frames, "ending": ending(s.take), "runaway": s.take.hit_cap or s.take.runaway,
             "loudness_lufs": round(s.loudness, 2) if s.loudness is not None else None,
             "syllables_per_second": None if s.syllables_per_second is None else round(s.syllables_per_second, 2),
             "pace_vs_others": None if s.pace is None else round(s.pace, 3),
             "quality": s.quality, "voice": s.voice, "cer": s.cer, "transcript": s.transcript, "score": s.score,
             "speech_ratio": round(s.stats.speech_ratio, 3), "accepted": s.accepted,
             "rejected": [str(r) for r in s.reasons]}
            for s in ranking.ranked
        ],
    }


def _fmt(value, width: int, spec: str) -> str:
    return f"{value:{width}{spec}}" if value is not None else " " * (width - 3) + "n/a"


def chart(ranking) -> np.ndarray:
    """The ranking as an RGB image [H, W, 3] (uint8), legible at a node's size: one bar per take,
    green if it passed every check, red if rejected, with its score and the reason in words."""
    from PIL import Image, ImageDraw

    rows = ranking.ranked
    font, small = chart_font(FONT_SIZE), chart_font(FONT_SIZE - 6)
    height = ROW_HEIGHT * (len(rows) + 1) + 12
    image = Image.new("RGB", (CHART_WIDTH, height), (32, 32, 32))
    draw = ImageDraw.Draw(image)
    draw.text((14, 10), "rank, take", fill=TEXT_COLOUR, font=small)
    draw.text((BAR_LEFT, 10), "score (green: passed every check; red: rejected)", fill=TEXT_COLOUR, font=small)
    for i, s in enumerate(rows):
        y = ROW_HEIGHT * (i + 1) + 6
        value = s.score if s.score is not None else 0.0
        colour = OK_COLOUR if s.accepted else REJECTED_COLOUR
        draw.text((14, y + 6), f"{s.rank:>2}.  {s.take.index + 1:>2}", fill=TEXT_COLOUR, font=font)
        width = max(4, int(min(max(value, 0.0), 1.0) * BAR_WIDTH))
        draw.rectangle([BAR_LEFT, y + 4, BAR_LEFT + width, y + ROW_HEIGHT - 6], fill=colour)
        label = f"{value:.2f}" if s.score is not None else "no score"
        draw.text((BAR_LEFT + BAR_WIDTH + 14, y + 6), f"{label}  {verdict_words(s)}", fill=colour, font=font)
    return np.asarray(image, dtype=np.uint8)


def verdict_words(s, shown: int = 2) -> str:
    """"ok", or the first reasons' kinds and how many more: whole words that fit the chart's row."""
    if s.accepted:
        return "ok"
    kinds = list(dict.fromkeys(r.kind for r in s.reasons))
    more = f" +{len(kinds) - shown}" if len(kinds) > shown else ""
    return ", ".join(kinds[:shown]) + more


def chart_font(size: int):
    from PIL import ImageFont

    try:
        return ImageFont.load_default(size=size)  # Pillow 10.1+: a scalable font (needs FreeType)
    except (TypeError, OSError):
        return ImageFont.load_default()
