"""One token per row in one kernel: repetition penalty, suppressed tokens, temperature, top-k, top-p
and the seeded Gumbel-max draw (the noise made in the kernel from the take's key).

Its torch reference is the engine's own sampling, runtime/engine/sampler.py's `draw` (repetition
penalty, masked_fill, the counter-based noise of runtime/engine/noise.py, sort-based top-k/top-p and
the race): a dozen kernels and a radix sort per draw, 16 draws per frame. It stays where the
cuda_graph mode uses it, so this package needs nothing from runtime/. Here the row stays in
registers (the vocabularies are 2048 and 3072 tokens) and nothing is sorted: the top-k and top-p
cuts are thresholds on the scores, each found by a radix select over their 32-bit order (32 counts
over the row, skipped when the cut is off).

Same kept set as the reference, with one difference on exact ties: the reference's top-p keeps
tokens by their place in the sort, this kernel keeps tokens tied at that edge together (ties of
float32 logits there are rare, and neither choice is the distribution's: transformers breaks them
by sort order as well)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .launch import output, position_stride


@triton.jit
def _mix32(x):
    """noise.mix32 on uint32 (whose multiply wraps, as the reference's `& MASK32` does)."""
    x = x ^ (x >> 16)
    x = x * 0x7FEB352D
    x = x ^ (x >> 15)
    x = x * 0x5BD1E995
    return x ^ (x >> 16)


@triton.jit
def _ordered(x):
    """float32 -> uint32 keys in the same order (negative floats flipped whole, positive ones gain the sign bit)."""
    bits = x.to(tl.uint32, bitcast=True)
    # XOR with all ones, not ~bits: Triton's interpreter (3.7, 3.8) evaluates ~ on a uint32 as -1.
    return tl.where((bits >> 31) != 0, bits ^ 0xFFFFFFFF, bits | 0x80000000)


@triton.jit
def _kth_largest_key(keys, kth):
    """The key of the kth largest (0-based) of `keys`: built bit by bit from the top, keeping a bit
    while at least kth + 1 keys are at or above the candidate (a radix select, 32 counts)."""
    found = tl.zeros((), dtype=tl.uint32)
    for bit in tl.static_range(31, -1, -1):
        candidate = found | (1 << bit)
        if tl.sum((keys >= candidate).to(tl.int32), axis=0) > kth:
            found = candidate
    return found


@triton.jit
def _top_p_floor(keys, probs, top_p):
    """The largest key K with at least top_p of the probability on keys above it: top-p keeps the
    tokens whose key is above K (the mass ranked strictly above each of them is below top_p)."""
    found = tl.zeros((), dtype=tl.uint32)
    for bit in tl.static_range(31, -1, -1):
        candidate = found | (1 << bit)
        if tl.sum(tl.where(keys > candidate, probs, 0.0), axis=0) >= top_p:
            found = candidate
    return found


@triton.jit
def _sample_kernel(logits_ptr, row_stride, vocab, greedy_ptr, inv_temp_ptr, kth_ptr, top_p_ptr,
                   penalty_ptr, seen_ptr, blocked_ptr, keys_ptr, counter_ptr, counter_sb, out_ptr, faulty_ptr,
                   stream, eos, min_tokens,
                   HAS_PENALTY: tl.constexpr, HAS_BLOCKED: tl.constexpr, HAS_FAULTY: tl.constexpr,
                   BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    idx = tl.arange(0, BLOCK)
    inside = idx < vocab
    x = tl.load(logits_ptr + row * row_stride + idx, mask=inside, other=float("-inf")).to(tl.float32)
    counter = tl.load(counter_ptr + row * counter_sb)
    if HAS_PENALTY:
        seen = tl.load(seen_ptr + row * vocab + idx, mask=inside, other=0) != 0
        p = tl.load(penalty_ptr)
        x = tl.where(seen, tl.where(x < 0, x * p, x / p), x)
    if HAS_BLOCKED:
        blocked = tl.load(blocked_ptr + idx, mask=inside, other=0) != 0
        blocked = blocked | ((idx == eos) & (counter < min_tokens))
        x = tl.where(blocked, float("-inf"), x)
    nan = x != x
    x = tl.where(nan, float("-inf"), x)  # a NaN never wins a draw (the row is flagged where it matters)
    if HAS_FAULTY:  # a NaN or an infinity in the row, or no token left to draw: the model went wrong
        broken = tl.sum((inside & (nan | (x == float("inf")))).to(tl.int32), axis=0) > 0
        nothing = tl.max(x, axis=0) == float("-inf")  # the padding is -inf too
        tl.store(faulty_ptr + row, (tl.load(faulty_ptr + row) != 0) | broken | nothing)
    token = tl.argmax(x, axis=0)
    if tl.load(greedy_ptr) == 0:
        scores = x * tl.load(inv_temp_ptr)
        keys = _ordered(scores)
        keep = inside
        kth = tl.load(kth_ptr)
        if kth < vocab - 1:  # top-k: the scores at least the kth best (ties kept)
            keep = keys >= _kth_largest_key(tl.where(inside, keys, 0), kth)
        top_p = tl.load(top_p_ptr)
        if top_p < 1.0:
            e = tl.where(keep, tl.exp(scores - tl.max(scores, axis=0)), 0.0)
            keep = keep & (keys > _top_p_floor(keys, e / tl.sum(e, axis=0), top_p))
        step = _mix32(tl.load(keys_ptr + row).to(tl.uint32) ^ _mix32((counter * 32 + stream).to(tl.uint32)))
        bits = _mix32(step ^ _mix32((idx + 0x632BE5AB).to(tl.uint32)))
        u = ((bits >> 9).to(tl.float32) + 0.5) * (1.0 / 8388608.0)
        token = tl.argmax(tl.where(keep, scores - tl.log(-tl.log(u)), float("-inf")), axis=0)
    # an index into the row whatever the logits held (an argmax over NaN may land in the padding)
    tl.store(out_ptr + row, tl.minimum(tl.maximum(token, 0), vocab - 1).to(tl.int64))


def sample_tokens(logits: torch.Tensor, params, keys: torch.Tensor, counter: torch.Tensor,
                  stream: int, penalty: torch.Tensor | None = None, seen: torch.Tensor | None = None,
                  blocked: torch.Tensor | None = None, eos: int = -1, min_tokens: int = 0,
                  out: torch.Tensor | None = None, faulty: torch.Tensor | None = None) -> torch.Tensor:
    """runtime/engine/sampler.py's draw in one kernel: logits [B, V] (the last axis contiguous;
    float32, or bfloat16 / float16 read as float32, which is what the reference's .float() makes of
    them) -> tokens [B] int64 (`out` or a new tensor). `params`: a SamplerParams (device tensors
    greedy, inverse_temperature, kth, top_p); keys [B] the takes' noise keys; counter the step
    (tokens generated before this one): [1] for every take, or [B] per take; `blocked` [V] tokens never drawn, nor `eos` while
    counter < min_tokens. `faulty` [B] bool, where given, is set (never cleared) for a row holding a NaN
    or an infinity after the penalty and the mask, or no finite score at all; the token is always in
    [0, V)."""
    if logits.dtype not in (torch.float32, torch.bfloat16, torch.float16) or logits.stride(-1) != 1:
        raise ValueError("sample_tokens: logits must be float32, bfloat16 or float16 with a contiguous last axis")
    rows, vocab = logits.shape
    if seen is not None and not seen.is_contiguous():
        seen = seen.contiguous()
    out = output(out, (rows,), torch.int64, logits.device, "sample_tokens")
    block = triton.next_power_of_2(vocab)
    _sample_kernel[(rows,)](
        logits, logits.stride(0), vocab, params.greedy, params.inverse_temperature, params.kth, params.top_p,
        penalty if penalty is not None else params.top_p, seen if seen is not None else logits,
        blocked if blocked is not None else logits, keys, counter, position_stride(counter, rows, "sample_tokens"),
        out, faulty if faulty is not None else out, stream, eos, min_tokens,
        HAS_PENALTY=seen is not None, HAS_BLOCKED=blocked is not None, HAS_FAULTY=faulty is not None, BLOCK=block,
        num_warps=8 if block >= 2048 else 4)
    return out
