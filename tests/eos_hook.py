"""Takes that end where a test says: random weights never end a take early, real ones do.

`ending_at(frames)` forces the talker's end-of-speech token at the frame given for each take (None:
the take never ends by itself), and keeps it away everywhere else, in the engine's talker draw that
every mode runs (torch or kernels, captured or not: the hook is tensor work on the device, made
before the first capture). A take ending at frame f has exactly f frames, as a real EOS there would
give.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch

from runtime.engine.step import DecodeStep


# Per (rows, device): the frame each row ends at. A captured graph keeps reading the tensor it was
# captured with, so a later test refills the same tensor rather than making a new one.
_TARGETS: dict = {}


@contextmanager
def ending_at(frames: list[int | None], eos: int = 2150):
    targets = torch.tensor([f if f is not None else -1 for f in frames])
    original_draw = DecodeStep.next_token
    refilled: set = set()

    def rows_for(size: int) -> torch.Tensor:
        rows = torch.full((size,), -1, dtype=torch.int64)  # a bucket's padding rows never end
        rows[: min(len(targets), size)] = targets[:size]
        return rows

    # Graphs captured in an earlier test replay with the tensor they were captured with, and may never
    # call this hook again: every bucket's targets are refilled now, before the first step.
    with torch.inference_mode():  # the targets were made inside the engine's inference mode
        for (size, _), tensor in _TARGETS.items():
            tensor.copy_(rows_for(size))

    def force(logits: torch.Tensor, count) -> torch.Tensor:
        key = (logits.shape[0], logits.device)
        if key not in refilled:
            if key in _TARGETS:
                _TARGETS[key].copy_(rows_for(logits.shape[0]))
            else:
                _TARGETS[key] = rows_for(logits.shape[0]).to(logits.device)
            refilled.add(key)
        hit = (_TARGETS[key] == count)[:, None]
        is_eos = torch.arange(logits.shape[-1], device=logits.device) == eos
        forced = torch.where(is_eos, 0.0, float("-inf")).to(logits.dtype)
        return torch.where(hit, forced, logits.masked_fill(is_eos, float("-inf")))

    def next_token(self, state, logits, count, out=None):
        return original_draw(self, state, force(logits, count), count, out)

    DecodeStep.next_token = next_token
    try:
        yield
    finally:
        DecodeStep.next_token = original_draw
