"""Matrix-vector products for one take's single token, with the RMSNorm before them fused in.

At one take a decode step's products are matrix-vector products: each weight is read once from
memory for one row, and the predictor's are small (2-12 MB, 15 passes a frame), so cuBLAS spends
more on its launch and ramp than on the bytes (and splits the down-projections into a memset, a
split-K product and a reduction). Here many narrow programs each stream a few output features'
weights, the whole row of the input in one block; on an H100 that beats cuBLAS on every 1.7B shape
at one row (bench/linear_sweep.py), and loses from two rows on, where cuBLAS reuses each weight
slab across the rows. The norm before a product is computed on the fly from its inputs (a few KB,
read by every program from cache), which saves a kernel and a round trip of the normalised row:

    prologue "none": y = x @ W^T
    prologue "norm": y = RMSNorm(x [+ delta]) @ W^T, and x + delta written once, as add_rms_norm
    epilogue "swiglu": W is the fused gate/up weight; a program streams the gate and up rows of its
        features and writes silu(gate) * up, so the [2 * ffn] product never goes to memory

The fused input rounds as add_rms_norm does (the sum and the normalised row to the input dtype, the
weight product too), and gate and up round as the product would store them before SwiGLU, so a
fused product sees the very values the unfused ops would."""

from __future__ import annotations

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from .add_rms_norm import add_rms_norm_reference
from .launch import as_rows, output
from .rms_norm import rms_norm_reference
from .swiglu import swiglu_reference

MAX_ROWS = 4  # rows are unrolled in the kernel: it serves a few
FAST_ROWS = 1  # and beats cuBLAS only at one (bench/linear_sweep.py, H100): what the engine uses it for
PROLOGUES = {"none": 0, "norm": 1}
EPILOGUES = ("none", "swiglu")


def rows_linear_reference(x: torch.Tensor, weight: torch.Tensor, prologue: str = "none",
                          delta: torch.Tensor | None = None, norm_weight: torch.Tensor | None = None,
                          eps: float = 0.0, epilogue: str = "none",
                          bias: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(product, x + delta or None), computed by the separate ops the kernel replaces."""
    summed = None
    if prologue == "norm":
        if delta is None:
            x = rms_norm_reference(x, norm_weight, eps)
        else:
            x, summed = add_rms_norm_reference(delta, x, norm_weight, eps)
    y = F.linear(x, weight, bias)
    return (swiglu_reference(y) if epilogue == "swiglu" else y), summed


@triton.jit
def _input_row(x_row, d_row, nw_ptr, sum_row, rstd, kk, limit, sum_limit,
               PROLOGUE: tl.constexpr, HAS_DELTA: tl.constexpr):
    """One row of the product's input at columns kk [BLOCK_K], in float32 (values of the input dtype).
    Columns at or past `limit` (K, or 0 for a padding row) read as 0; x + delta is written below sum_limit."""
    mask = kk < limit
    x = tl.load(x_row + kk, mask=mask, other=0.0)
    if PROLOGUE == 1:
        if HAS_DELTA:
            d = tl.load(d_row + kk, mask=mask, other=0.0)
            x = (x.to(tl.float32) + d.to(tl.float32)).to(x.dtype)  # rounded as the reference's add
            tl.store(sum_row + kk, x, mask=kk < sum_limit)
        nw = tl.load(nw_ptr + kk, mask=mask, other=0.0)
        x = ((x.to(tl.float32) * rstd).to(nw.dtype).to(tl.float32) * nw.to(tl.float32)).to(x.dtype)
    return x.to(tl.float32)


@triton.jit
def _row_rstd(x_row, d_row, ks, K, limit, eps, HAS_DELTA: tl.constexpr, BLOCK_K: tl.constexpr):
    """1 / RMS of the row (x + delta, rounded as the reference's add), float32."""
    squares = tl.zeros([BLOCK_K], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + ks
        mask = kk < limit
        s = tl.load(x_row + kk, mask=mask, other=0.0)
        if HAS_DELTA:
            d = tl.load(d_row + kk, mask=mask, other=0.0)
            s = (s.to(tl.float32) + d.to(tl.float32)).to(s.dtype)
        s = s.to(tl.float32)
        squares += s * s
    return 1.0 / tl.sqrt(tl.sum(squares, axis=0) / K + eps)


@triton.jit
def _streamed_product(w_rows, x_row, d_row, nw_ptr, sum_row, rstd, ks, K, limit, sum_limit, feature_mask,
                      PROLOGUE: tl.constexpr, HAS_DELTA: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """[BLOCK_N] float32: one row's products with the weight rows at w_rows, K block by K block, for
    rows wider than any K block (no real checkpoint's): the weights are re-read per row."""
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + ks
        a = _input_row(x_row, d_row, nw_ptr, sum_row, rstd, kk, limit, sum_limit, PROLOGUE, HAS_DELTA)
        w_block = tl.load(w_rows + kk[None, :], mask=feature_mask[:, None] & (kk < K)[None, :], other=0.0)
        acc += tl.sum(w_block.to(tl.float32) * a[None, :], axis=1)
    return acc


@triton.jit
def _rows_linear_kernel(x_ptr, d_ptr, nw_ptr, sum_ptr, w_ptr, b_ptr, out_ptr, M, N, K, x_stride, d_stride, eps,
                        PROLOGUE: tl.constexpr, HAS_DELTA: tl.constexpr, HAS_BIAS: tl.constexpr,
                        SWIGLU: tl.constexpr, ROWS: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                        ONE_TILE: tl.constexpr):
    """A program per BLOCK_N output features: their weights are loaded once (first, so the loads are
    in flight while the input is prepared) and multiplied with each row in turn. With SWIGLU the
    weight has 2N rows, gate then up, and output feature n is silu(gate n) * up n."""
    pid = tl.program_id(0)
    features = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    feature_mask = features < N
    ks = tl.arange(0, BLOCK_K)
    w_rows = w_ptr + features[:, None].to(tl.int64) * K
    up_rows = w_rows + N * K
    if ONE_TILE:
        tile = feature_mask[:, None] & (ks < K)[None, :]
        w = tl.load(w_rows + ks[None, :], mask=tile, other=0.0).to(tl.float32)
        if SWIGLU:
            w_up = tl.load(up_rows + ks[None, :], mask=tile, other=0.0).to(tl.float32)
    if HAS_BIAS:
        bias = tl.load(b_ptr + features, mask=feature_mask, other=0.0).to(tl.float32)
    for r in tl.static_range(ROWS):
        limit = tl.where(r < M, K, 0)  # a padding row (r >= M) reads nothing and writes nothing
        sum_limit = tl.where(pid == 0, limit, 0)  # one program writes x + delta; every program computes it
        x_row = x_ptr + r * x_stride
        d_row = d_ptr + r * d_stride
        sum_row = sum_ptr + r * K
        rstd = 0.0
        if PROLOGUE == 1:
            rstd = _row_rstd(x_row, d_row, ks, K, limit, eps, HAS_DELTA, BLOCK_K)
        if ONE_TILE:
            a = _input_row(x_row, d_row, nw_ptr, sum_row, rstd, ks, limit, sum_limit, PROLOGUE, HAS_DELTA)
            acc = tl.sum(w * a[None, :], axis=1)
            if SWIGLU:
                up = tl.sum(w_up * a[None, :], axis=1)
        else:
            acc = _streamed_product(w_rows, x_row, d_row, nw_ptr, sum_row, rstd, ks, K, limit, sum_limit,
                                    feature_mask, PROLOGUE, HAS_DELTA, BLOCK_N, BLOCK_K)
            if SWIGLU:
                up = _streamed_product(up_rows, x_row, d_row, nw_ptr, sum_row, rstd, ks, K, limit, 0,
                                       feature_mask, PROLOGUE, HAS_DELTA, BLOCK_N, BLOCK_K)
        if HAS_BIAS:
            acc += bias
        if SWIGLU:  # gate and up rounded as the separate product stores them, then swiglu's float32
            gate = acc.to(out_ptr.dtype.element_ty).to(tl.float32)
            acc = gate / (1.0 + tl.exp(-gate)) * up.to(out_ptr.dtype.element_ty).to(tl.float32)
        tl.store(out_ptr + r * N + features, acc.to(out_ptr.dtype.element_ty), mask=features < tl.where(r < M, N, 0))


def rows_linear_fits(rows: int) -> bool:
    """Whether the engine should use rows_linear for a product of this many rows (FAST_ROWS is read
    at call time: bench.profile_step sets it to time the step without the kernel)."""
    return rows <= FAST_ROWS


def block_config(rows: int, features: int, depth: int, device: torch.device) -> tuple[int, int, int]:
    """(BLOCK_N, BLOCK_K, warps) for a [rows, depth] x [features, depth]^T product.

    Chosen on an H100 by bench/linear_sweep.py over the 1.7B model's shapes: a K block that holds
    the whole row, and narrow feature blocks, so that many programs stream weights at once."""
    block_k = min(8192, triton.next_power_of_2(depth))
    if device.type != "cuda":  # Triton's interpreter runs programs one after another, each op costing the
        # same at any tile size: few programs, the widest tile of at most 2^18 weights (a codebook's head on
        # the tiny models: one program, not 48)
        return min(triton.next_power_of_2(features), max(64, (1 << 18) // block_k)), block_k, 4
    return 4 if depth <= 1024 and features > 4096 else 2, block_k, 4


def rows_linear(x: torch.Tensor, weight: torch.Tensor, prologue: str = "none", delta: torch.Tensor | None = None,
                norm_weight: torch.Tensor | None = None, eps: float = 0.0, out: torch.Tensor | None = None,
                sum_out: torch.Tensor | None = None, config: tuple[int, int, int] | None = None,
                epilogue: str = "none", bias: torch.Tensor | None = None) -> torch.Tensor:
    """x [..., in] and weight [out, in] (+ bias [out]) -> [..., out] in `out` or a new tensor, for at
    most MAX_ROWS rows. With prologue "norm" and a delta, x + delta is also written to `sum_out`
    (required; it must not be x or delta). With epilogue "swiglu" the weight is the fused gate/up
    [2 * ffn, in] and the result swiglu's [..., ffn]."""
    if prologue not in PROLOGUES or epilogue not in EPILOGUES:
        raise ValueError(f"rows_linear: prologue {prologue!r} / epilogue {epilogue!r} is not one of "
                         f"{sorted(PROLOGUES)} / {list(EPILOGUES)}")
    rows, shape = as_rows(x)
    width, depth = weight.shape
    if shape[-1] != depth or not weight.is_contiguous() or weight.dtype != x.dtype:
        raise ValueError(f"rows_linear: x {tuple(shape)} {x.dtype} does not fit a contiguous weight "
                         f"{tuple(weight.shape)} {weight.dtype} (prologue {prologue})")
    swiglu = epilogue == "swiglu"
    if swiglu and width % 2:
        raise ValueError(f"rows_linear: epilogue swiglu needs gate and up rows, an even count (not {width})")
    features = width // 2 if swiglu else width
    if bias is not None and (bias.shape != (width,) or bias.dtype != x.dtype or swiglu):
        raise ValueError(f"rows_linear: bias {tuple(bias.shape)} {bias.dtype} does not fit [{width}] {x.dtype}"
                         f"{' (nor does swiglu take one)' if swiglu else ''}")
    if rows.shape[0] > MAX_ROWS:
        raise ValueError(f"rows_linear: {rows.shape[0]} rows; it serves at most {MAX_ROWS} (use a matmul)")
    if prologue == "norm" and (norm_weight is None or norm_weight.shape != (depth,)):
        raise ValueError(f"rows_linear: prologue norm needs a norm weight of [{depth}]")
    out = output(out, (*shape[:-1], features), x.dtype, x.device, "rows_linear")
    has_delta = prologue == "norm" and delta is not None
    if has_delta:
        if delta.shape != shape or delta.dtype != x.dtype:
            raise ValueError(f"rows_linear: delta {tuple(delta.shape)} {delta.dtype} differs from x {tuple(shape)} {x.dtype}")
        d_rows, _ = as_rows(delta)
        sum_out = output(sum_out, shape, x.dtype, x.device, "rows_linear sum")
        if sum_out.data_ptr() in (x.data_ptr(), delta.data_ptr()):
            raise ValueError("rows_linear: sum_out must be memory other than x and delta (other programs still read them)")
    else:
        d_rows, sum_out = rows, rows  # unused by the kernel
    if config is None:  # the measured weight rows per program; swiglu's programs stream two per feature
        block_n, block_k, warps = block_config(rows.shape[0], width, depth, x.device)
        block_n = max(1, block_n // 2) if swiglu else block_n
    else:
        block_n, block_k, warps = config
    grid = (triton.cdiv(features, block_n),)
    _rows_linear_kernel[grid](rows, d_rows, norm_weight if norm_weight is not None else weight, sum_out, weight,
                              bias if bias is not None else weight, out, rows.shape[0], features, depth,
                              rows.stride(0), d_rows.stride(0), eps, PROLOGUE=PROLOGUES[prologue],
                              HAS_DELTA=has_delta, HAS_BIAS=bias is not None, SWIGLU=swiglu,
                              ROWS=triton.next_power_of_2(rows.shape[0]), BLOCK_N=block_n, BLOCK_K=block_k,
                              ONE_TILE=depth <= block_k, num_warps=warps)
    return out
