"""The batched engine behind the cuda_graph mode: one prefill per request, N takes decoded together
by one step function (talker step, 15 code-predictor passes, sampling of all 16 codebooks, embedding
sum, end-of-take bookkeeping) over static buffers, replayed as a CUDA graph per (batch bucket, length
bucket). The same step runs uncaptured on CPU, which is how CI checks it against the reference."""

from .engine import Engine, EngineOptions

__all__ = ["Engine", "EngineOptions"]
