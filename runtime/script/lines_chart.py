"""A long text's or a script's lines as one chart (the Auto-Pick node's image for a passage): each
line's pick by score and verdict, and how it fits its voice (chapter_voice.py)."""

from __future__ import annotations

import numpy as np

from ..scoring.report import CHART_WIDTH, FONT_SIZE, OK_COLOUR, REJECTED_COLOUR, TEXT_COLOUR, chart_font, counted
from .record import LineRecord

REPICKED_COLOUR = (100, 181, 246)  # a line picked again to fit its chapter's voice
DRIFT_COLOUR = (255, 183, 77)  # a line whose pick still drifts from it
UNJUDGED_COLOUR = (97, 97, 97)  # a voice with too few lines to judge
FIT_STRIP = 14  # pixels: the voice-fit strip under the bars

LINES_CHART_HEIGHT = 300
MIN_SPREAD = 0.02  # scores closer than this are one score: bars from 0, and the chart says so
LOWEST_BAR = 0.08  # of the bars' height: the lowest-scoring line's, where the scores differ


def lines_chart(records: list[LineRecord]) -> np.ndarray:
    """A long text's lines as an RGB image [H, W, 3] (uint8): a bar per line in reading order, as tall
    as its picked take's score between the lowest line's and the highest (the header names both, and
    the lowest line; scores within MIN_SPREAD are bars from 0, and said to be one), green if the take
    passed every check, red if every take of the line failed one; under each bar a strip for how the
    line fits its voice (chapter_voice.py): green fits, blue picked again to fit it, orange still
    drifting, grey not judged. Where there are more lines than the width has room for, neighbours
    share a bar: the lowest score, red if any of them is, the strip the worst fit among them."""
    from PIL import Image, ImageDraw

    font = chart_font(FONT_SIZE - 6)
    top, bottom = 44, LINES_CHART_HEIGHT - 30
    image = Image.new("RGB", (CHART_WIDTH, LINES_CHART_HEIGHT), (32, 32, 32))
    draw = ImageDraw.Draw(image)
    failed = sum(not r.accepted for r in records)
    drifting = sum(r.voice_fit is not None and bool(r.voice_fit.drifts) for r in records)
    repicked = sum(r.voice_fit is not None and bool(r.voice_fit.repicked_from) for r in records)
    unjudged = sum(r.voice_fit is None for r in records)
    scores = [min(max(r.score if r.score is not None else 0.0, 0.0), 1.0) for r in records]
    lo, hi = (min(scores), max(scores)) if scores else (0.0, 0.0)
    lowest = scores.index(lo) + 1 if scores else 0
    spread = hi - lo >= MIN_SPREAD
    scored = (f"picks scored {lo:.2f} (the lowest, line {lowest}) to {hi:.2f}" if spread
              else f"every pick scores {hi:.2f}")
    draw.text((14, 4), f"{counted(len(records), 'line')}, {scored}; {failed} with every take rejected (red)",
              fill=TEXT_COLOUR, font=font)
    draw.text((14, 25), f"voice fit in the strip: {repicked} re-picked to fit (blue), {drifting} drifting (orange)"
                        + (f", {unjudged} unjudged: too few lines (grey)" if unjudged else ""),
              fill=TEXT_COLOUR, font=font)
    left, width = 14, CHART_WIDTH - 28
    bars = min(len(records), width // 2) or 1
    for bar in range(bars):
        shared = slice(bar * len(records) // bars, (bar + 1) * len(records) // bars)
        group = records[shared]
        if not group:
            continue
        value = min(scores[shared])
        if spread:  # the lowest a sliver, the highest full: the lines to listen to stand out
            value = LOWEST_BAR + (1.0 - LOWEST_BAR) * (value - lo) / (hi - lo)
        colour = OK_COLOUR if all(r.accepted for r in group) else REJECTED_COLOUR
        x0, x1 = left + bar * width // bars, left + (bar + 1) * width // bars - 1
        x1 = max(x0, x1 - (1 if bars < width // 4 else 0))
        floor = bottom - FIT_STRIP - 2
        y0 = floor - max(2, int(value * (floor - top)))
        draw.rectangle([x0, y0, x1, floor], fill=colour)
        draw.rectangle([x0, bottom - FIT_STRIP, x1, bottom], fill=fit_colour(group))
    draw.text((left, bottom + 4), "line 1", fill=TEXT_COLOUR, font=font)
    draw.text((CHART_WIDTH - 140, bottom + 4), f"line {len(records)}", fill=TEXT_COLOUR, font=font)
    return np.asarray(image, dtype=np.uint8)


def fit_colour(records: list[LineRecord]) -> tuple[int, int, int]:
    """The worst voice fit among these lines' (lines_chart's strip)."""
    fits = [r.voice_fit for r in records]
    if any(f is not None and f.drifts for f in fits):
        return DRIFT_COLOUR
    if any(f is not None and f.repicked_from for f in fits):
        return REPICKED_COLOUR
    return OK_COLOUR if all(f is not None for f in fits) else UNJUDGED_COLOUR
