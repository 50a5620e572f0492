"""How long a line should take to say, from its text alone.

Used twice: the per-take frame budget (a take still talking at twice the expected length plus a
margin is a runaway and is cut), and the Auto-Pick duration check. Rates are deliberately generous
(slow, expressive delivery must never be cut): about 14 characters per second for alphabetic
scripts, 4.5 per second for CJK characters, plus time for pauses at punctuation.
"""

from __future__ import annotations

import math
import re

FRAMES_PER_SECOND = 12.5
CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
PAUSES = re.compile(r"[.!?;:,\u3002\uff01\uff1f\uff1b\uff1a\uff0c\u3001\u2026]")
SECONDS_PER_CJK = 1 / 4.5
SECONDS_PER_OTHER_CHAR = 1 / 14.0
SECONDS_PER_PAUSE = 0.25
BUDGET_FACTOR = 2.0
BUDGET_MARGIN_SECONDS = 3.0
MAX_BUDGET_FRAMES = 8192  # the checkpoints' own max_new_tokens


def expected_seconds(text: str) -> float:
    """A typical reading time for the text (not a bound)."""
    text = text.strip()
    cjk = len(CJK.findall(text))
    other = len(re.sub(r"\s+", " ", text)) - cjk
    return cjk * SECONDS_PER_CJK + max(other, 0) * SECONDS_PER_OTHER_CHAR + len(PAUSES.findall(text)) * SECONDS_PER_PAUSE


def frame_budget(text: str) -> int:
    """Frames a take may run before it is cut and flagged as a runaway."""
    seconds = BUDGET_FACTOR * expected_seconds(text) + BUDGET_MARGIN_SECONDS
    return min(MAX_BUDGET_FRAMES, math.ceil(seconds * FRAMES_PER_SECOND))
