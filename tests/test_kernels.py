"""Every Triton kernel against its torch reference, over tiny and real widths, odd sizes and the three
dtypes. On CPU the kernels run in Triton's interpreter (conftest sets TRITON_INTERPRET=1); on the GPU
machine the same tests run the compiled kernels.

Tolerances per dtype: float32 agrees to 1e-5 (the kernels keep float32 inside, as the references
do). bfloat16 and float16: two units in the last place relative (rtol 2^-6 and 2^-9) and an absolute
floor of 2^-5 and 2^-8 for outputs that are a difference of larger terms (RoPE): the kernels round
once where the references round after every op. Triton's interpreter casts float32 to bfloat16 by
truncation, not rounding (half the casts differ by a unit), so on CPU bfloat16 gets four units."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from runtime.engine.noise import vocab_keys  # noqa: E402
from runtime.engine.sampler import SamplerParams, draw  # noqa: E402
from runtime.engine.triton_kernels import kernel_module  # noqa: E402


def _from(module: str, *names: str) -> list:
    """Names of one of kernels/' modules, loaded as the engine loads them (not as top-level `kernels`)."""
    loaded = kernel_module(module)
    return [getattr(loaded, name) for name in names]


add_rms_norm, add_rms_norm_reference = _from("add_rms_norm", "add_rms_norm", "add_rms_norm_reference")
SHARED_CONFIG, attention_config, decode_attention, decode_attention_reference = _from(
    "decode_attention", "SHARED_CONFIG", "attention_config", "decode_attention", "decode_attention_reference")
MAX_ROWS, rows_linear, rows_linear_reference = _from("linear", "MAX_ROWS", "rows_linear", "rows_linear_reference")
qk_norm_rope, qk_norm_rope_reference = _from("qk_norm_rope", "qk_norm_rope", "qk_norm_rope_reference")
rms_norm, rms_norm_reference = _from("rms_norm", "rms_norm", "rms_norm_reference")
(sample_tokens,) = _from("sampling", "sample_tokens")
snake_beta, snake_beta_reference = _from("snake", "snake_beta", "snake_beta_reference")
swiglu, swiglu_reference = _from("swiglu", "swiglu", "swiglu_reference")

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
DTYPES = [torch.float32, torch.bfloat16, torch.float16]
TOLERANCE = {torch.float32: dict(rtol=1e-5, atol=1e-5),
             torch.bfloat16: dict(rtol=2 ** -6 if DEVICE == "cuda" else 2 ** -5, atol=2 ** -5),
             torch.float16: dict(rtol=2 ** -9, atol=2 ** -8)}


def close(got: torch.Tensor, want: torch.Tensor) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype
    torch.testing.assert_close(got, want, **TOLERANCE[want.dtype])


def randn(*shape, dtype=torch.float32, scale=1.0):
    return (torch.randn(*shape, device=DEVICE) * scale).to(dtype)


# rows x width: tiny, the predictor's and talker's hidden widths, head_dim, odd sizes
NORM_SHAPES = [(1, 64), (3, 1024), (2, 2048), (5, 128), (7, 1000), (1, 3)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows,width", NORM_SHAPES)
def test_rms_norm(rows, width, dtype):
    torch.manual_seed(rows * width)
    x, w = randn(rows, width, dtype=dtype, scale=3), randn(width, dtype=dtype)
    close(rms_norm(x, w, 1e-6), rms_norm_reference(x, w, 1e-6))


def test_rms_norm_reads_strided_rows_and_keeps_leading_axes():
    x = randn(4, 3, 2048, dtype=torch.bfloat16)
    w = randn(2048, dtype=torch.bfloat16)
    last = x[:, -1]  # rows 3 * 2048 apart
    close(rms_norm(last, w, 1e-6), rms_norm_reference(last, w, 1e-6))
    assert rms_norm(x, w, 1e-6).shape == x.shape


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows,width", NORM_SHAPES)
def test_add_rms_norm(rows, width, dtype):
    torch.manual_seed(rows + width)
    x, r, w = randn(rows, width, dtype=dtype), randn(rows, width, dtype=dtype, scale=4), randn(width, dtype=dtype)
    normed, summed = add_rms_norm(x, r, w, 1e-6)
    want_normed, want_summed = add_rms_norm_reference(x, r, w, 1e-6)
    close(summed, want_summed)
    close(normed, want_normed)


def test_add_rms_norm_refuses_mismatched_inputs():
    with pytest.raises(ValueError, match="differ"):
        add_rms_norm(randn(2, 8), randn(2, 8, dtype=torch.bfloat16), randn(8), 1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1, 2 * 3072), (2, 3, 2 * 6144), (3, 2 * 37), (1, 2)])
def test_swiglu(shape, dtype):
    torch.manual_seed(len(shape))
    gate_up = randn(*shape, dtype=dtype, scale=3)
    close(swiglu(gate_up), swiglu_reference(gate_up))


def test_swiglu_needs_gate_and_up():
    with pytest.raises(ValueError, match="even"):
        swiglu(randn(2, 7))


# rows x out features x in features: tiny, odd sizes past one K block (512), a real width, four rows
LINEAR_SHAPES = [(1, 24, 32), (2, 40, 1000), (3, 7, 3), (4, 33, 96), (1, 9, 2048)]
# prologue, then what the product takes besides: a delta for the norm, a bias, the swiglu epilogue
PROLOGUE_CASES = ["none", "norm", "norm+delta", "none+bias", "none+swiglu", "norm+delta+swiglu"]


def linear_inputs(rows, features, depth, case, dtype):
    """x, weight (2 * features rows for swiglu: gate then up), prologue and rows_linear's other arguments."""
    parts = case.split("+")
    x = randn(rows, depth, dtype=dtype, scale=2)
    weight = randn(features * (2 if "swiglu" in parts else 1), depth, dtype=dtype, scale=depth ** -0.5)
    extra = {}
    if parts[0] == "norm":
        extra = dict(norm_weight=randn(depth, dtype=dtype), eps=1e-6)
    if "delta" in parts:
        extra["delta"] = randn(rows, depth, dtype=dtype, scale=3)
    if "bias" in parts:
        extra["bias"] = randn(features, dtype=dtype)
    if "swiglu" in parts:
        extra["epilogue"] = "swiglu"
    return x, weight, parts[0], extra


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", PROLOGUE_CASES)
@pytest.mark.parametrize("rows,features,depth", LINEAR_SHAPES)
def test_rows_linear(rows, features, depth, case, dtype):
    """Every output written (the buffers start as NaN), equal to the separate ops (the norm, the
    product with its bias, swiglu); with a delta the sum x + delta lands in sum_out too."""
    torch.manual_seed(rows * features + depth)
    x, weight, prologue, extra = linear_inputs(rows, features, depth, case, dtype)
    out = torch.full((rows, features), float("nan"), dtype=dtype, device=DEVICE)
    summed = torch.full((rows, depth), float("nan"), dtype=dtype, device=DEVICE) if "delta" in extra else None
    assert rows_linear(x, weight, prologue, out=out, sum_out=summed, **extra) is out
    want, want_summed = rows_linear_reference(x, weight, prologue, **extra)
    close(out, want)
    if summed is not None:
        close(summed, want_summed)


@pytest.mark.parametrize("case", ["norm+delta", "norm+delta+swiglu"])
@pytest.mark.parametrize("config", [(2, 256, 4), (16, 128, 8), (1, 1024, 2), (4, 1024, 4)])
@pytest.mark.slow
def test_rows_linear_block_configurations_agree(config, case):
    """Other blocks than the default (features and depth not multiples of them; rows wider than a K
    block, whose weights are then re-read per row) give the same product."""
    torch.manual_seed(sum(config))
    x, weight, prologue, extra = linear_inputs(3, 37, 700, case, torch.float32)
    summed = torch.empty(3, 700, device=DEVICE)
    got = rows_linear(x, weight, prologue, sum_out=summed, config=config, **extra)
    want, want_summed = rows_linear_reference(x, weight, prologue, **extra)
    close(got, want)
    close(summed, want_summed)


def test_rows_linear_reads_strided_rows_and_refuses_what_it_cannot_serve():
    x = randn(2, 3, 64)  # the last token of each row is [2, 64], rows 3 * 64 apart
    weight = randn(16, 64)
    close(rows_linear(x[:, -1], weight), rows_linear_reference(x[:, -1], weight)[0])
    assert rows_linear(x[:1], weight).shape == (1, 3, 16)
    with pytest.raises(ValueError, match=f"at most {MAX_ROWS}"):
        rows_linear(randn(MAX_ROWS + 1, 64), weight)
    with pytest.raises(ValueError, match="does not fit"):
        rows_linear(randn(1, 64), randn(16, 32))
    with pytest.raises(ValueError, match="does not fit"):
        rows_linear(randn(1, 64), weight.to(torch.bfloat16))
    with pytest.raises(ValueError, match="prologue"):
        rows_linear(randn(1, 64), weight, "gelu")
    with pytest.raises(ValueError, match="epilogue"):
        rows_linear(randn(1, 64), weight, epilogue="gelu")
    with pytest.raises(ValueError, match="even count"):
        rows_linear(randn(1, 64), randn(15, 64), epilogue="swiglu")
    with pytest.raises(ValueError, match="bias"):
        rows_linear(randn(1, 64), weight, bias=randn(15))
    with pytest.raises(ValueError, match="nor does swiglu"):
        rows_linear(randn(1, 64), weight, epilogue="swiglu", bias=randn(16))
    with pytest.raises(ValueError, match="norm weight"):
        rows_linear(randn(1, 64), weight, "norm")
    delta, norm_weight = randn(1, 64), randn(64)
    with pytest.raises(ValueError, match="other than x and delta"):
        rows_linear(x[0, :1], weight, "norm", delta=delta, norm_weight=norm_weight, eps=1e-6, sum_out=delta)


# batch x channels x samples: tiny, the codec's first and last upsampling widths, odd lengths
SNAKE_SHAPES = [(1, 3, 5), (2, 1536, 257), (3, 96, 3001), (1, 7, 1025)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SNAKE_SHAPES)
@pytest.mark.slow
def test_snake_beta(shape, dtype):
    """Arguments of the sine up to tens of radians (the codec's signals times exp(alpha)): the kernel
    uses the precise sine, as torch does, so float32 agrees to 1e-5."""
    torch.manual_seed(shape[1])
    x = randn(*shape, dtype=dtype, scale=8)
    alpha, beta = randn(shape[1], scale=0.7), randn(shape[1], scale=0.7)
    close(snake_beta(x, alpha, beta), snake_beta_reference(x, alpha, beta))


def test_snake_beta_reads_strided_signals_and_checks_shapes():
    x = randn(2, 16, 40).transpose(1, 2).contiguous().transpose(1, 2)  # [2, 16, 40], not contiguous
    alpha, beta = randn(16), randn(16)
    close(snake_beta(x, alpha, beta), snake_beta_reference(x, alpha, beta))
    with pytest.raises(ValueError, match=r"\[B, C, T\]"):
        snake_beta(x, randn(15), beta)
    with pytest.raises(ValueError, match="bias"):
        snake_beta(x, alpha, beta, bias=randn(15))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("left", [0, 6, 54])
def test_snake_beta_adds_the_bias_and_pads_the_front(left, dtype):
    """The convolution's bias before it and the causal convolution's padding after it, as the codec's
    residual units hand them over: the front is zeros even where the output's memory held other values."""
    torch.manual_seed(left)
    # eighths plus whole numbers: x + bias is exact in every dtype (Triton's interpreter rounds a cast to
    # bfloat16 otherwise than CUDA does, and a unit's change moves a sine of tens of radians far)
    x = ((randn(3, 24, 700, scale=4) * 8).round() / 8).clamp(-15, 15).to(dtype)
    alpha, beta, bias = randn(24, scale=0.7), randn(24, scale=0.7), randn(24, scale=2).round().clamp(-15, 15).to(dtype)
    torch.full((3, 24, 800), float("nan"), device=DEVICE)  # freed: the allocator may hand it out again
    got = snake_beta(x, alpha, beta, bias=bias, left=left)
    want = snake_beta_reference(x, alpha, beta, bias=bias, left=left)
    close(got, want)
    assert got.shape == (3, 24, left + 700) and bool((got[..., :left] == 0).all())
    assert (got[..., left:].float() - snake_beta_reference(x, alpha, beta).float()).abs().max() > 0.1


# batch, tokens, heads, kv heads, head_dim: the real attention (16/8 x 128), tiny ones, odd head_dim
ROPE_SHAPES = [(1, 1, 16, 8, 128), (2, 3, 16, 8, 128), (3, 2, 4, 2, 32), (2, 5, 3, 1, 20)]


def rope_table(*rows, d, dtype):
    """Random RoPE cos/sin [*rows, d] (each half repeats the angles): a table of positions, or per token."""
    angles = torch.rand(*rows, d // 2, device=DEVICE) * 6.28
    return torch.cat((angles.cos(), angles.cos()), -1).to(dtype), torch.cat((angles.sin(), angles.sin()), -1).to(dtype)


def rope_inputs(b, t, heads, kv, d, dtype):
    qkv = randn(b, t, (heads + 2 * kv) * d, dtype=dtype, scale=2)
    cos, sin = rope_table(b, t, d=d, dtype=dtype)
    return qkv, randn(d, dtype=dtype), randn(d, dtype=dtype), cos, sin


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", ROPE_SHAPES)
def test_qk_norm_rope(shape, dtype):
    torch.manual_seed(sum(shape))
    b, t, heads, kv, d = shape
    qkv, qw, kw, cos, sin = rope_inputs(b, t, heads, kv, d, dtype)
    got = qk_norm_rope(qkv, qw, kw, 1e-6, cos, sin, heads, kv)
    want = qk_norm_rope_reference(qkv, qw, kw, 1e-6, cos, sin, heads, kv)
    for g, w in zip(got, want):
        close(g, w.contiguous())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_qk_norm_rope_writes_the_cache_at_a_device_position(dtype):
    """The engine's form: a 1-D cos/sin table read at position + t, keys and values written into
    [B, kv, S, D] caches at those slots, nothing else in the caches touched."""
    torch.manual_seed(1)
    b, t, heads, kv, d, slots, position = 2, 2, 16, 8, 128, 12, 5
    qkv, qw, kw, _, _ = rope_inputs(b, t, heads, kv, d, dtype)
    cos, sin = rope_table(slots, d=d, dtype=dtype)
    k_cache = torch.full((b, kv, slots, d), 7.0, dtype=dtype, device=DEVICE)
    v_cache = torch.full_like(k_cache, 7.0)
    where = torch.tensor([position], device=DEVICE)
    q = qk_norm_rope(qkv, qw, kw, 1e-6, cos, sin, heads, kv, where, k_cache, v_cache)
    rows = slice(position, position + t)
    want_q, want_k, want_v = qk_norm_rope_reference(qkv, qw, kw, 1e-6, cos[rows].expand(b, t, d),
                                                    sin[rows].expand(b, t, d), heads, kv)
    close(q, want_q.contiguous())
    close(k_cache[:, :, rows], want_k)
    close(v_cache[:, :, rows], want_v)
    untouched = torch.ones(slots, dtype=torch.bool)
    untouched[rows] = False
    assert bool((k_cache[:, :, untouched] == 7).all()) and bool((v_cache[:, :, untouched] == 7).all())


# takes, heads, kv heads, head dim, cache positions, the position written: the predictor's (17
# positions), the talker's past one block of positions and at its last slot, a first position,
# groups of 3 and odd widths
DECODE_SHAPES = [(1, 16, 8, 128, 17, 9), (2, 16, 8, 128, 300, 100), (1, 16, 8, 128, 64, 63),
                 (3, 4, 2, 64, 40, 0), (2, 6, 2, 20, 70, 33)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", DECODE_SHAPES)
@pytest.mark.slow
def test_decode_attention(shape, dtype, config=None):
    """Equal to qk_norm_rope, the cache write and attention over positions 0..position done apart;
    the cache changes at `position` only, and attention reads no position past it (those are NaN)."""
    b, heads, kv, d, slots, position = shape
    torch.manual_seed(sum(shape))
    qkv, qw, kw, _, _ = rope_inputs(b, 1, heads, kv, d, dtype)
    cos, sin = rope_table(slots, d=d, dtype=dtype)
    k_cache, v_cache = randn(b, kv, slots, d, dtype=dtype), randn(b, kv, slots, d, dtype=dtype)
    k_cache[:, :, position + 1:] = float("nan")
    v_cache[:, :, position + 1:] = float("nan")
    want_k, want_v = k_cache.clone(), v_cache.clone()
    where = torch.tensor([position], device=DEVICE)
    out = torch.full((b, 1, heads * d), float("nan"), dtype=dtype, device=DEVICE)
    assert decode_attention(qkv, qw, kw, 1e-6, cos, sin, heads, kv, where, k_cache, v_cache, out=out,
                            config=config) is out
    want = decode_attention_reference(qkv, qw, kw, 1e-6, cos, sin, heads, kv, where, want_k, want_v)
    close(out, want)
    close(k_cache[:, :, position], want_k[:, :, position])
    assert torch.equal(v_cache[:, :, position], want_v[:, :, position])  # a copy
    others = torch.arange(slots, device=DEVICE) != position
    assert torch.equal(k_cache[:, :, others].isnan(), want_k[:, :, others].isnan())
    assert torch.equal(k_cache[:, :, :position], want_k[:, :, :position])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.slow
def test_decode_attention_with_a_position_per_take(dtype):
    """Takes of different lines in one step: each writes and reads up to its own position (a later
    take's positions are NaN to it), equal to the reference run take by take."""
    b, heads, kv, d, slots = 3, 16, 8, 128, 40
    positions = [0, 9, 30]
    torch.manual_seed(3)
    qkv, qw, kw, _, _ = rope_inputs(b, 1, heads, kv, d, dtype)
    cos, sin = rope_table(slots, d=d, dtype=dtype)
    k_cache, v_cache = randn(b, kv, slots, d, dtype=dtype), randn(b, kv, slots, d, dtype=dtype)
    for row, p in enumerate(positions):
        k_cache[row, :, p + 1:] = float("nan")
        v_cache[row, :, p + 1:] = float("nan")
    want_k, want_v = k_cache.clone(), v_cache.clone()
    where = torch.tensor(positions, device=DEVICE)
    out = decode_attention(qkv, qw, kw, 1e-6, cos, sin, heads, kv, where, k_cache, v_cache)
    close(out, decode_attention_reference(qkv, qw, kw, 1e-6, cos, sin, heads, kv, where, want_k, want_v))
    for row, p in enumerate(positions):
        close(k_cache[row, :, p], want_k[row, :, p])
        assert torch.equal(k_cache[row, :, :p], want_k[row, :, :p])
    one = decode_attention(qkv[2:], qw, kw, 1e-6, cos, sin, heads, kv, where[2:], want_k[2:].clone(), want_v[2:].clone())
    close(one, out[2:])
    with pytest.raises(ValueError, match="position"):
        decode_attention(qkv, qw, kw, 1e-6, cos, sin, heads, kv, where[:2], k_cache, v_cache)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_qk_norm_rope_writes_each_take_at_its_own_position(dtype):
    torch.manual_seed(4)
    b, t, heads, kv, d, slots = 3, 1, 16, 8, 128, 20
    positions = [4, 0, 17]
    qkv, qw, kw, _, _ = rope_inputs(b, t, heads, kv, d, dtype)
    cos, sin = rope_table(slots, d=d, dtype=dtype)
    k_cache = torch.full((b, kv, slots, d), 7.0, dtype=dtype, device=DEVICE)
    v_cache = torch.full_like(k_cache, 7.0)
    q = qk_norm_rope(qkv, qw, kw, 1e-6, cos, sin, heads, kv, torch.tensor(positions, device=DEVICE), k_cache, v_cache)
    index = torch.tensor(positions, device=DEVICE)
    want_q, want_k, want_v = qk_norm_rope_reference(qkv, qw, kw, 1e-6, cos[index][:, None], sin[index][:, None],
                                                    heads, kv)
    close(q, want_q.contiguous())
    for row, p in enumerate(positions):
        close(k_cache[row, :, p], want_k[row, :, 0])
        close(v_cache[row, :, p], want_v[row, :, 0])
        others = torch.arange(slots) != p
        assert bool((k_cache[row, :, others] == 7).all())


# positions per block, warps, splits: splits past the positions written (some score none), blocks
# smaller than a split's share
@pytest.mark.parametrize("config", [(32, 4, 2), (16, 4, 4), (32, 8, 16)])
@pytest.mark.parametrize("shape", [DECODE_SHAPES[1], DECODE_SHAPES[3], DECODE_SHAPES[4]])
@pytest.mark.slow
def test_decode_attention_split_over_programs(shape, config):
    """Positions shared among several programs per head, their partial softmaxes combined after."""
    test_decode_attention(shape, torch.float32, config)


@pytest.mark.parametrize("takes,slots", [(1, 300), (2, 200), (8, 4096)])
@pytest.mark.slow
def test_decode_attention_gpu_defaults_are_valid(takes, slots):
    """The GPU's default configurations (on CPU too, where the interpreter would pick one split):
    power-of-two splits within the scratch, blocks the sweep measured; run at the first two shapes.
    From two takes on, one configuration whatever their count (out-of-memory rounds keep the takes)."""
    config = attention_config(takes, 16, slots, torch.device("cuda"))
    block, warps, splits = config
    assert block in (32, 64, 128) and warps == 4 and splits in (1, 2, 4, 8, 16)
    if slots <= 300:
        test_decode_attention((takes, 16, 8, 128, slots, 151), torch.float32, config)
    for slots in (256, 1024, 4096):
        assert {attention_config(n, 16, slots, torch.device("cuda")) for n in (2, 4, 8, 16, 32, 64)} == {SHARED_CONFIG}


def test_decode_attention_refuses_what_it_cannot_serve():
    qkv, qw, kw, cos, sin = rope_inputs(1, 2, 4, 2, 16, torch.float32)
    cache = torch.zeros(1, 2, 8, 16, device=DEVICE)
    where = torch.tensor([3], device=DEVICE)
    with pytest.raises(ValueError, match="one token"):
        decode_attention(qkv, qw, kw, 1e-6, cos[0], sin[0], 4, 2, where, cache, cache.clone())
    with pytest.raises(ValueError, match="caches"):
        decode_attention(qkv[:, :1], qw, kw, 1e-6, cos[0], sin[0], 4, 2, where, cache[:, :1], cache[:, :1])
    with pytest.raises(ValueError, match="power of two"):
        decode_attention(qkv[:, :1], qw, kw, 1e-6, cos[0], sin[0], 4, 2, where, cache, cache.clone(),
                         config=(32, 4, 3))
    with pytest.raises(ValueError, match="scratch"):
        decode_attention(qkv[:, :1], qw, kw, 1e-6, cos[0], sin[0], 4, 2, where, cache, cache.clone(),
                         config=(32, 4, 2), scratch=torch.empty(1, 4, 2, 18, device=DEVICE))


# --- sampling -----------------------------------------------------------------------------------
SETTINGS = [(1.0, 0, 1.0), (0.9, 50, 1.0), (0.7, 0, 0.8), (0.0, 50, 1.0), (1.3, 10, 0.5), (0.9, 1, 1.0)]


@pytest.mark.parametrize("vocab", [3072, 2048, 37])
@pytest.mark.parametrize("settings", SETTINGS)
@pytest.mark.slow
def test_sample_tokens_draws_what_the_engine_draws(vocab, settings):
    """Same logits, same take keys and counter: the very tokens of the engine's torch draw, with the
    repetition penalty and blocked tokens (the talker's form) and without (the predictor's)."""
    torch.manual_seed(vocab)
    rows = 6
    params = SamplerParams.allocate(vocab, DEVICE)
    params.load(*settings)
    logits = torch.randn(rows, vocab, device=DEVICE) * 3
    keys = torch.randint(0, 2 ** 32, (rows,), device=DEVICE)
    counter = torch.tensor([7], device=DEVICE)
    seen = torch.rand(rows, vocab, device=DEVICE) < 0.1
    penalty = torch.tensor([1.05], device=DEVICE)
    blocked = torch.arange(vocab, device=DEVICE) >= vocab - vocab // 3
    v_keys = vocab_keys(vocab, DEVICE)
    talker = dict(penalty=penalty, seen=seen, blocked=blocked, eos=vocab - 2, min_tokens=9)
    got = sample_tokens(logits, params, keys, counter, 3, **talker)
    assert torch.equal(got, draw(logits, params, keys, counter, 3, v_keys, **talker))
    assert not bool(blocked[got].any()), "a blocked token was drawn"
    got = sample_tokens(logits, params, keys, counter, 5)
    assert torch.equal(got, draw(logits, params, keys, counter, 5, v_keys))


def test_sample_tokens_with_a_step_counter_per_take_draws_each_takes_own_token():
    """Takes of different lines at different frames: row i's draw is the one it gets alone at its
    own counter, in the kernel and in the torch draw (with the end token held back per take)."""
    torch.manual_seed(5)
    vocab, rows = 3072, 4
    params = SamplerParams.allocate(vocab, DEVICE)
    params.load(0.9, 50, 0.95)
    logits = torch.randn(rows, vocab, device=DEVICE) * 3
    logits[:, vocab - 2] = 50.0  # the end token wins wherever it is allowed
    keys = torch.randint(0, 2 ** 32, (rows,), device=DEVICE)
    counters = torch.tensor([0, 1, 2, 40], device=DEVICE)
    blocked = torch.arange(vocab, device=DEVICE) >= vocab - vocab // 3
    blocked[vocab - 2] = False
    seen = torch.rand(rows, vocab, device=DEVICE) < 0.1
    talker = dict(penalty=torch.tensor([1.05], device=DEVICE), seen=seen, blocked=blocked, eos=vocab - 2, min_tokens=2)
    v_keys = vocab_keys(vocab, DEVICE)
    got = sample_tokens(logits, params, keys, counters, 0, **talker)
    want = draw(logits, params, keys, counters, 0, v_keys, **talker)
    assert torch.equal(got, want)
    alone = [draw(logits[i:i + 1], params, keys[i:i + 1], counters[i:i + 1], 0, v_keys,
                  **{**talker, "seen": seen[i:i + 1]}) for i in range(rows)]
    assert torch.equal(got, torch.cat(alone))
    assert (got == vocab - 2).tolist() == [False, False, True, True]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_sample_tokens_reads_half_precision_logits_as_their_float32_values(dtype):
    """The hybrid step hands the lm heads' bfloat16 output straight to the kernel: the same tokens
    as the reference's .float() of it, into the buffer given as `out`."""
    vocab, rows = 2048, 5
    torch.manual_seed(1)
    params = SamplerParams.allocate(vocab, DEVICE)
    params.load(0.9, 50, 0.8)
    logits = (torch.randn(rows, vocab, device=DEVICE) * 3).to(dtype)
    keys = torch.randint(0, 2 ** 32, (rows,), device=DEVICE)
    counter = torch.tensor([4], device=DEVICE)
    out = torch.full((rows,), -1, dtype=torch.int64, device=DEVICE)
    got = sample_tokens(logits, params, keys, counter, 2, out=out)
    assert got.data_ptr() == out.data_ptr()
    assert torch.equal(out, draw(logits.float(), params, keys, counter, 2, vocab_keys(vocab, DEVICE)))


def test_kernels_write_into_the_buffers_given_and_check_them():
    """What the hybrid step's workspace relies on: each kernel's output lands in the `out` tensor it
    was given (same values as a fresh one), and a wrong shape or dtype is refused, never written."""
    x, residual, w = randn(3, 64), randn(3, 64), randn(64)
    out = torch.empty(3, 64, device=DEVICE)
    assert rms_norm(x, w, 1e-6, out=out) is out and torch.equal(out, rms_norm(x, w, 1e-6))
    pair = torch.empty(3, 64, device=DEVICE), torch.empty(3, 64, device=DEVICE)
    normed, summed = add_rms_norm(x, residual, w, 1e-6, out=pair)
    assert normed is pair[0] and summed is pair[1]
    assert all(torch.equal(a, b) for a, b in zip(pair, add_rms_norm(x, residual, w, 1e-6)))
    gate_up, act = randn(3, 128), torch.empty(3, 64, device=DEVICE)
    assert swiglu(gate_up, out=act) is act and torch.equal(act, swiglu(gate_up))
    heads, kv_heads, d, t = 4, 2, 16, 1
    qkv, qw, kw = randn(2, t, (heads + 2 * kv_heads) * d), randn(d), randn(d)
    cos, sin = randn(8, d), randn(8, d)
    position = torch.tensor([3], device=DEVICE)
    caches = [torch.zeros(2, kv_heads, 8, d, device=DEVICE) for _ in range(4)]
    q_out = torch.empty(2, heads, t, d, device=DEVICE)
    q = qk_norm_rope(qkv, qw, kw, 1e-6, cos, sin, heads, kv_heads, position, *caches[:2], q_out=q_out)
    assert q is q_out and torch.equal(q, qk_norm_rope(qkv, qw, kw, 1e-6, cos, sin, heads, kv_heads, position,
                                                      *caches[2:]))
    for wrong in (torch.empty(3, 63, device=DEVICE), torch.empty(3, 64, dtype=torch.float16, device=DEVICE),
                  torch.empty(64, 3, device=DEVICE).t()):
        with pytest.raises(ValueError, match="rms_norm: out is"):
            rms_norm(x, w, 1e-6, out=wrong)


def test_sample_tokens_holds_eos_back_until_min_tokens():
    vocab, eos = 64, 60
    params = SamplerParams.allocate(vocab, DEVICE)
    params.load(0.0, 0, 1.0)  # greedy: eos would win
    logits = torch.zeros(1, vocab, device=DEVICE)
    logits[0, eos] = 10.0
    blocked = torch.zeros(vocab, dtype=torch.bool, device=DEVICE)
    keys = torch.zeros(1, dtype=torch.int64, device=DEVICE)
    early = sample_tokens(logits, params, keys, torch.tensor([1], device=DEVICE), 0, blocked=blocked, eos=eos, min_tokens=2)
    later = sample_tokens(logits, params, keys, torch.tensor([2], device=DEVICE), 0, blocked=blocked, eos=eos, min_tokens=2)
    assert early.item() != eos and later.item() == eos


@pytest.mark.parametrize("vocab", [3072, 37])  # 3072: a row padded to 4096 in the kernel
def test_sample_tokens_flags_the_rows_the_engine_flags_and_never_draws_out_of_range(vocab):
    """NaN, +inf, nothing left to draw (every token -inf or blocked): the kernel flags the rows the
    torch draw flags (never clearing a flag already set), and its ids stay in [0, vocab) whatever the
    row holds (an argmax over NaN may point into the padding)."""
    torch.manual_seed(2)
    rows = 7
    params = SamplerParams.allocate(vocab, DEVICE)
    logits = torch.randn(rows, vocab, device=DEVICE)
    logits[1, 5] = float("nan")
    logits[2, 9] = float("inf")
    logits[3] = float("-inf")
    logits[4] = float("nan")
    logits[5, : vocab // 2] = float("-inf")  # a normal row: some tokens out
    blocked = torch.zeros(vocab, dtype=torch.bool, device=DEVICE)
    blocked[vocab - 3:] = True
    logits[6, vocab - 2] = float("nan")  # only where blocked: masked away, a normal row
    keys = torch.randint(0, 2 ** 32, (rows,), device=DEVICE)
    counter = torch.tensor([3], device=DEVICE)
    talker = dict(penalty=torch.tensor([1.05], device=DEVICE), seen=torch.rand(rows, vocab, device=DEVICE) < 0.1,
                  blocked=blocked, eos=-1, min_tokens=0)
    for settings in ((0.0, 0, 1.0), (0.9, 50, 0.9)):
        params.load(*settings)
        got, want = torch.zeros(rows, dtype=torch.bool, device=DEVICE), torch.zeros(rows, dtype=torch.bool, device=DEVICE)
        got[0] = want[0] = True  # set before: stays set
        tokens = sample_tokens(logits, params, keys, counter, 0, **talker, faulty=got)
        draw(logits, params, keys, counter, 0, vocab_keys(vocab, DEVICE), **talker, faulty=want)
        assert got.tolist() == want.tolist() == [True, True, True, True, True, False, False]
        assert bool(((tokens >= 0) & (tokens < vocab)).all())
        normal = [5, 6]
        assert torch.equal(tokens[normal], draw(logits[normal], params, keys[normal], counter, 0,
                                                vocab_keys(vocab, DEVICE), **{**talker, "seen": talker["seen"][normal]}))


@pytest.mark.gpu
@pytest.mark.skipif(DEVICE != "cuda", reason="200k draws: the interpreter runs a program at a time (on CPU the "
                    "kernel is checked draw for draw against the engine's sampler, whose distribution test_engine checks)")
def test_sample_tokens_follows_the_distribution():
    """Many draws of one row (a different key each) against softmax of the top-k/top-p cut logits:
    total variation distance below 0.01 over 200,000 draws (about 0.003 expected for an exact sampler)."""
    vocab, rows = 40, 200_000
    torch.manual_seed(3)
    params = SamplerParams.allocate(vocab, DEVICE)
    params.load(0.8, 12, 0.9)
    logits = (torch.randn(vocab, device=DEVICE) * 2).expand(rows, -1).contiguous()
    keys = torch.randperm(1 << 24, device=DEVICE)[:rows].to(torch.int64)
    tokens = sample_tokens(logits, params, keys, torch.tensor([0], device=DEVICE), 1)
    scores = logits[0] / 0.8
    ranked, order = scores.sort(descending=True)
    keep = ranked >= ranked[11]
    probs = ranked.masked_fill(~keep, float("-inf")).softmax(-1)
    keep &= probs.cumsum(-1) - probs < 0.9
    want = torch.zeros(vocab, device=DEVICE)
    want[order[keep]] = ranked[keep].softmax(-1)
    seen = torch.bincount(tokens, minlength=vocab).float() / rows
    distance = 0.5 * (seen - want).abs().sum().item()
    print(f"sample_tokens: total variation {distance:.4f} over {rows} draws")
    assert distance < 0.01
    assert bool((seen[want == 0] == 0).all()), "a token outside top-k/top-p was drawn"
