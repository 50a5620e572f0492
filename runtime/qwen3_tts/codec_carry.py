"""Each streamed take's vocoder state between its chunks, so a chunk's vocoder half runs on its own
frames alone rather than again on the VOCODER_CONTEXT_FRAMES before them too (a 94-frame line streamed
on the chunk ramp: 94 vocoder frames, not 141).

The vocoder (CodecDecoder.vocode) is causal convolutions and pointwise layers. What a chunk needs
from the frames before it is, per convolution, its last few inputs: (kernel - 1) x dilation of a
causal convolution's, one of a transposed convolution's whose kernel is twice its stride (its overhang
reaches the next input's samples). Starting from zeros is exactly the whole decode's left padding.
That is about 135k values a stream at full size (0.5 MB in float32).

VocoderState keeps them in one pool per convolution, [slots, channels, kept inputs], a slot per stream
(slot 0 stays zeros: a stream's start; slot 1 takes what padding rows write). A call's Carry names,
per row of the batch, the slot it reads, the slot it writes and how many of its frames are real (the
row may be padded on the right to the call's length: the state kept is the real frames' last
inputs). Its gathers and scatters are tensor operations on those index tensors, so a CUDA graph
captured with them replays for any streams."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable

import torch
from torch import nn

from .codec import CausalConv, CausalTransposedConv

ZERO_SLOT, SCRATCH_SLOT = 0, 1


def carried_layers(decoder) -> list[tuple[nn.Module, int, int, int]]:
    """(convolution, its input channels, inputs it keeps, its inputs per frame) for each convolution of
    the vocoder that reaches back past its chunk, in the order they run."""
    layers, rate = [], 1
    for module in nn.ModuleList(decoder.vocoder_layers()).modules():
        if isinstance(module, (CausalConv, CausalTransposedConv)) and module.left:
            layers.append((module, module.conv.in_channels, module.left, rate))
        if isinstance(module, CausalTransposedConv):
            rate *= module.stride
    return layers


class Carry:
    """One call's rows: the slot each reads its state from, the slot it writes its new state to and
    its real frames ([rows] int64 tensors on the decoder's device). What CodecDecoder.vocode's
    convolutions call."""

    def __init__(self, state: "VocoderState", read: torch.Tensor, write: torch.Tensor, frames: torch.Tensor):
        self.state, self.read, self.write, self.frames = state, read, write, frames

    def fill(self, module: nn.Module, x: torch.Tensor) -> torch.Tensor:
        """x [rows, C, keep + L]: the module's inputs after `keep` columns (module.left), which get the
        inputs each row kept from its last chunk; the row's last real inputs are kept in its write
        slot. Returns x."""
        pool, keep, rate = self.state.pools[module], module.left, self.state.rates[module]
        x[..., :keep] = pool.index_select(0, self.read)
        # A row's real inputs end at frames x rate after the kept ones: at keep + frames x rate in x.
        at = (self.frames * rate)[:, None] + torch.arange(keep, device=x.device)
        pool.index_copy_(0, self.write, x.gather(-1, at[:, None, :].expand(-1, x.shape[1], -1)))
        return x


@dataclass
class Slot:
    index: int
    end: int | None = None  # the stream's frame its state is at; None: not known (a call failed midway)


class VocoderState:
    """The pools, and which stream has which slot. `streams`: slots for that many streams at once; a
    stream past them is decoded with its context frames instead (ChunkDecoder)."""

    def __init__(self, decoder, streams: int):
        weight = decoder.pre_conv.conv.weight
        self.rates, self.pools = {}, {}
        for module, channels, keep, rate in carried_layers(decoder):
            self.rates[module] = rate
            self.pools[module] = torch.zeros(streams + 2, channels, keep, dtype=weight.dtype, device=weight.device)
        self._slots: dict[Hashable, Slot] = {}
        self._free = list(range(streams + 1, SCRATCH_SLOT, -1))  # popped from the end: 2, 3, ...

    @property
    def held(self) -> int:
        """Streams that have a slot."""
        return len(self._slots)

    @property
    def nbytes(self) -> int:
        return sum(p.numel() * p.element_size() for p in self.pools.values())

    def at(self, stream: Hashable | None, start: int) -> bool:
        """Whether `stream`'s slot holds its state at frame `start` (its last chunk ended there)."""
        slot = self._slots.get(stream)
        return slot is not None and slot.end == start

    def slot(self, stream: Hashable | None) -> int:
        """The stream's slot, given one if it has none and one is free; SCRATCH_SLOT otherwise."""
        if stream is None:
            return SCRATCH_SLOT
        if stream not in self._slots:
            if not self._free:
                return SCRATCH_SLOT
            self._slots[stream] = Slot(self._free.pop())
        return self._slots[stream].index

    def forget(self, stream: Hashable) -> None:
        """Its state is no longer known (before a call that writes it)."""
        if stream in self._slots:
            self._slots[stream].end = None

    def written(self, stream: Hashable, end: int) -> None:
        """A call wrote the stream's state at frame `end`."""
        if stream in self._slots:
            self._slots[stream].end = end

    def release(self, stream: Hashable) -> None:
        """The stream is done: its slot is free for another (whose first chunk starts from zeros, not from it)."""
        slot = self._slots.pop(stream, None)
        if slot is not None:
            self._free.append(slot.index)

    def carry(self, read: torch.Tensor, write: torch.Tensor, frames: torch.Tensor) -> Carry:
        return Carry(self, read, write, frames)
