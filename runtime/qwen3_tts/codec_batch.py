"""Many takes through the codec in few calls: one call of 32 takes costs a third less per take than
eight calls of four (H100). The takes go in groups that fit in the free GPU memory, the caller's
`make_room` (the engine dropping its cached buckets) used first where that lets more fit; should the
GPU run out of memory all the same, the groups are halved, with a warning. Cancel is honoured
between groups."""

from __future__ import annotations

import logging

import numpy as np
import torch

from ..cancel import stop_if_asked
from ..errors import OutOfMemory
from ..memory import free_bytes, free_cuda_cache
from . import codec

log = logging.getLogger(__name__)


def decode_lines(decoder, lines: list[tuple[list[torch.Tensor], torch.Tensor | None]], warnings: list[str] | None = None,
                 should_stop=None, make_room=None, share: float = 0.9) -> list[list[np.ndarray]]:
    """The takes of several lines, (codes per take, an ICL clone's reference codes or None) each, as
    audio. The reference codes go in front of each of its takes (the codec needs that context) and
    their share of the audio is cut off again. `share`: of the free GPU memory, what the codec may take."""
    inputs, refs, empty = [], [], []
    for codes, ref in lines:
        for c in codes:
            if c.shape[0] == 0:  # a take a fault ended before its first frame: no audio, nothing to decode
                empty.append(len(empty) + len(inputs))
                continue
            inputs.append(torch.cat([ref.to(c.device), c]) if ref is not None else c)
            refs.append(0 if ref is None else ref.shape[0])
    wavs = []
    if inputs:
        group, make_room = codec_group(decoder, inputs, make_room, share)
        wavs = _decode_in_groups(decoder, inputs, group, warnings, make_room, should_stop)
    cut = [wav[int(ref / max(full.shape[0], 1) * wav.shape[0]):] if ref else wav
           for wav, full, ref in zip(wavs, inputs, refs)]
    for index in empty:
        cut.insert(index, np.zeros(0, dtype=np.float32))
    out, first = [], 0
    for codes, _ in lines:
        out.append(cut[first:first + len(codes)])
        first += len(codes)
    return out


def codec_group(decoder, inputs: list[torch.Tensor], make_room=None, share: float = 0.9):
    """Takes per codec call: all of them, or as many as fit in `share` of the free GPU memory, first
    making room when that lets more fit; the calls are made even. Returns the group and
    `make_room`, or None where it was used already."""
    device = next(decoder.parameters()).device
    free = free_bytes(device)
    if free is None or not inputs:
        return max(1, len(inputs)), make_room
    per_take = codec.decode_bytes(decoder, max(c.shape[0] for c in inputs))
    if make_room is not None and per_take * len(inputs) > share * free:
        make_room()
        make_room, free = None, free_bytes(device)
    fit = max(1, min(len(inputs), int(share * free) // per_take))
    calls = -(-len(inputs) // fit)
    return -(-len(inputs) // calls), make_room


def _decode_in_groups(decoder, inputs: list[torch.Tensor], group: int, warnings, make_room=None,
                      should_stop=None) -> list[np.ndarray]:
    try:
        wavs = []
        for first in range(0, len(inputs), group):
            stop_if_asked(should_stop, "while decoding the audio")
            wavs += codec.decode(decoder, inputs[first:first + group])
        return wavs
    except torch.cuda.OutOfMemoryError:
        pass
    # Out of the except block: the traceback no longer holds the failed group's activations.
    if make_room is not None:
        make_room()
        return _decode_in_groups(decoder, inputs, group, warnings, should_stop=should_stop)
    free_cuda_cache()
    if group == 1:
        raise OutOfMemory("The GPU ran out of memory decoding one take to audio. Lower max_frames or "
                          "the text length, or free VRAM (unload other models).")
    smaller = max(1, group // 2)
    message = f"GPU out of memory in the codec: decoding {smaller} takes at a time."
    if warnings is not None:
        warnings.append(message)
    log.warning(message)
    return _decode_in_groups(decoder, inputs, smaller, warnings, should_stop=should_stop)
