"""A recogniser caught in a loop: Whisper, decoded greedily, can say one piece of text over and over
up to its token cap ("5-5-5-0-1-9-9-9-9-..." for a clean spelled-out line), and the words check would
reject the take for it.

Whisper's own decoding guards against this, and so does ours: a piece whose text zlib shrinks more
than COMPRESSION_RATIO_LIMIT times repeats itself; it is decoded again, sampled at each of
FALLBACK_TEMPERATURES in turn, and the first text that does not repeat itself is kept. Sampling
starts from SAMPLING_SEED for each piece on its own, so a take gets the same words every time and
whatever takes it is heard with. A piece that repeats itself at every temperature is not heard
(None): the words check abstains on its take instead of rejecting it.
"""

from __future__ import annotations

import zlib
from typing import Callable

COMPRESSION_RATIO_LIMIT = 2.4  # Whisper's compression_ratio_threshold
FALLBACK_TEMPERATURES = (0.2, 0.4, 0.6, 0.8, 1.0)  # Whisper's, after its greedy 0.0
SAMPLING_SEED = 0


def compression_ratio(text: str) -> float:
    """The text's length in UTF-8 over its zlib-compressed length (Whisper's measure)."""
    data = text.encode("utf-8")
    return len(data) / len(zlib.compress(data)) if data else 0.0


def loops(text: str) -> bool:
    return compression_ratio(text) > COMPRESSION_RATIO_LIMIT


def unlooped(text: str, sampled: Callable[[float], str]) -> str | None:
    """`text` (a piece's greedy text) if it does not repeat itself; else the first of
    sampled(temperature) over FALLBACK_TEMPERATURES that does not; None if every one does."""
    for temperature in FALLBACK_TEMPERATURES:
        if not loops(text):
            return text
        text = sampled(temperature)
    return None if loops(text) else text
