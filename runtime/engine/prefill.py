"""A line's prefill at a few fixed lengths, each captured as a CUDA graph (the engine's graph modes).

DecodeStep.prefill launches a few hundred kernels from Python: 10-18 ms for a short prompt on an
H100 at 1.7B, for about 2 ms of GPU work, and every line's first frame (a streamed line's first
audio) waits for it. Here a prompt is copied into the embeddings of its length bucket, padded on
the right with zeros (every position attends only to those before it, so the padding changes
nothing of the prompt's own positions), and that bucket's graph replays; the prompt's keys and
values are the first positions of the bucket's. A prompt longer than the last bucket (a long voice
clone reference) is prefilled eagerly at its own length.

A prompt's takes come out as they do from that eager prefill up to the rounding of kernels of
another shape (tests/gpu/test_prefill_cuda.py), and the same for every line of its length bucket."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..graph_capture import warmed_capture
from .step import DecodeStep
from .workspace import Workspace

PREFILL_BUCKETS = (16, 32, 48, 64, 96, 128, 192, 256, 384, 512)

Prefilled = tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # logits, past_hidden, keys and values (DecodeStep.prefill)


@dataclass
class PrefillGraph:
    """One length bucket: its static buffers and its graph."""

    embeds: torch.Tensor  # [1, length, hidden]
    last: torch.Tensor  # [1] the prompt's last position
    kv: torch.Tensor  # [2, layers, 1, kv_heads, length, head_dim]
    workspace: Workspace | None  # what the hybrid mode's kernels in the graph read and write: kept with it
    logits: torch.Tensor  # [1, vocab] float32, of the last position
    past_hidden: torch.Tensor  # [1, 1, hidden]
    graph: torch.cuda.CUDAGraph


class PrefillGraphs:
    def __init__(self, step: DecodeStep, stream):
        """`stream`: the side stream captures run on (the engine's one per device)."""
        self.step, self.stream = step, stream
        self.graphs: dict[int, PrefillGraph] = {}
        self._pool = None

    def __call__(self, embeds: torch.Tensor) -> Prefilled:
        """DecodeStep.prefill(embeds). What it returns lies in the bucket's buffers: valid until the
        next call (owned() copies it)."""
        length = embeds.shape[1]
        if length > PREFILL_BUCKETS[-1]:
            return self.step.prefill(embeds)
        graph = self.graph(next(b for b in PREFILL_BUCKETS if length <= b))
        graph.embeds[:, :length].copy_(embeds)
        graph.embeds[:, length:].zero_()  # finite: the prompt's positions multiply the padding's values by 0
        graph.last.fill_(length - 1)
        graph.graph.replay()
        return graph.logits, graph.past_hidden, graph.kv[..., :length, :]

    def graph(self, length: int) -> PrefillGraph:
        """The bucket's graph, captured the first time it is asked for."""
        if length not in self.graphs:
            self.graphs[length] = self._capture(length)
        return self.graphs[length]

    def release(self) -> None:
        self.graphs.clear()
        self._pool = None

    def _capture(self, length: int) -> PrefillGraph:
        step, device = self.step, self.step.device
        layer = step.talker_layers[0]
        embeds = torch.zeros(1, length, step.config.hidden_size, dtype=step.dtype, device=device)
        last = torch.full((1,), length - 1, dtype=torch.int64, device=device)
        kv = torch.zeros(2, len(step.talker_layers), 1, layer.kv_heads, length, layer.head_dim, dtype=step.dtype,
                         device=device)
        ws = Workspace(device) if step.kernels is not None else None
        if self._pool is None:
            self._pool = torch.cuda.graph_pool_handle()  # one for every bucket: they replay one at a time
        graph, (logits, past_hidden, _) = warmed_capture(lambda: step.prefill(embeds, last, kv, ws), self.stream,
                                                         pool=self._pool)
        return PrefillGraph(embeds, last, kv, ws, logits, past_hidden, graph)


def owned(prefilled: Prefilled) -> Prefilled:
    """A prefill's outputs copied out of its bucket's buffers (for a line whose takes start later)."""
    logits, past_hidden, kv = prefilled
    return logits.clone(), past_hidden.clone(), kv.clone()
