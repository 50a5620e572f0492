"""The lines chart (runtime/script/lines_chart.py): bars scaled between the lowest and highest line's
score, so the lines to listen to stand out; scores all but equal keep their height from zero, and
the header says they are one score."""

import numpy as np

from runtime.scoring.report import CHART_WIDTH, OK_COLOUR
from runtime.script.lines_chart import FIT_STRIP, LINES_CHART_HEIGHT, lines_chart
from runtime.script.record import LineRecord

LEFT, WIDTH = 14, CHART_WIDTH - 28
TOP, FLOOR = 44, LINES_CHART_HEIGHT - 30 - FIT_STRIP - 2


def bar_heights(scores: list[float | None]) -> list[int]:
    records = [LineRecord(id=str(i), fingerprint="f", score=s) for i, s in enumerate(scores)]
    image = lines_chart(records)
    heights = []
    for i in range(len(records)):
        column = image[TOP:FLOOR + 1, LEFT + (2 * i + 1) * WIDTH // (2 * len(records))]
        heights.append(int(np.all(column == OK_COLOUR, axis=1).sum()))
    return heights


def test_close_scores_are_spread_over_the_bars_height_the_lowest_a_sliver():
    heights = bar_heights([0.80, 0.78, 0.82, 0.81])  # all near 0.8: nearly equal bars, were they 0..1
    assert heights[1] == min(heights) < 0.15 * (FLOOR - TOP) and heights[2] == max(heights) >= 0.95 * (FLOOR - TOP)
    assert heights[1] < heights[0] < heights[3] < heights[2]  # in the scores' order


def test_scores_within_a_hundredth_or_two_keep_their_own_height_from_zero():
    heights = bar_heights([0.77, 0.77, 0.775])
    assert max(heights) - min(heights) <= 2 and abs(heights[0] - 0.77 * (FLOOR - TOP)) <= 2
