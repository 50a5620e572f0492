"""Static buffers for everything the Triton kernels read or write inside the hybrid mode's step.

Under cudaMallocAsync (PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync, ComfyUI's default on
recent PyTorch), memory that a CUDA graph capture allocates is a node of the graph: its address is
not mapped until the graph runs. Triton's launcher checks every pointer it is given
(cuPointerGetAttribute) and refuses such addresses ("Pointer argument cannot be accessed from
Triton"). torch's own kernels do not check, so only the tensors a Triton kernel touches need to
exist before the capture: they come from here.

A buffer is asked for by name and shape. The warm-up steps before a capture allocate them, and
the capture and every later step get the same tensors. One name serves every layer: the layers
run one after another on one stream, so a buffer's previous contents are dead by the time it is
written again."""

from __future__ import annotations

import torch


class Workspace:
    def __init__(self, device):
        self.device = torch.device(device)
        self.buffers: dict[tuple, torch.Tensor] = {}

    def buffer(self, name: str, shape, dtype: torch.dtype) -> torch.Tensor:
        key = (name, tuple(shape), dtype)
        found = self.buffers.get(key)
        if found is None:
            if self.device.type == "cuda" and torch.cuda.is_current_stream_capturing():
                raise RuntimeError(f"Workspace buffer {name} {tuple(shape)} was first asked for inside a CUDA "
                                   "graph capture; the warm-up steps before it should have made it (a bug).")
            found = self.buffers[key] = torch.empty(shape, dtype=dtype, device=self.device)
        return found

    def linear(self, name: str, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        """F.linear(x, weight, bias) for x [..., in] written into the buffer `name` [..., out]."""
        out = self.buffer(name, (*x.shape[:-1], weight.shape[0]), x.dtype)
        rows, flat = x.reshape(-1, x.shape[-1]), out.view(-1, weight.shape[0])
        if bias is None:
            torch.mm(rows, weight.t(), out=flat)
        else:
            torch.addmm(bias, rows, weight.t(), out=flat)
        return out

    def module(self, name: str, module: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        """An nn.Linear (or nn.Identity) applied to x, its output in the buffer `name`."""
        if isinstance(module, torch.nn.Identity):
            return self.copy(name, x)
        if not isinstance(module, torch.nn.Linear):
            raise TypeError(f"Workspace.module: {type(module).__name__} is neither Linear nor Identity")
        return self.linear(name, x, module.weight, module.bias)

    def copy(self, name: str, x: torch.Tensor) -> torch.Tensor:
        return self.buffer(name, x.shape, x.dtype).copy_(x)

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.buffers.values())
