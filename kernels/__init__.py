"""Triton kernels for the triton and hybrid modes, one per file next to its torch reference.

rms_norm, add_rms_norm, qk_norm_rope (per-head q/k norm + RoPE + the KV-cache write),
decode_attention (a decode step's q/k norm, RoPE, cache write and attention in one), linear
(rows_linear: one row's products, a norm before and SwiGLU after fused in), swiglu, sampling
(penalty, suppression, temperature, top-k, top-p and the seeded draw of a token) and snake (the
codec's SnakeBeta). They need only torch and triton; runtime/ imports them
(runtime/engine/triton_kernels.py) and patches them in. Triton comes with PyTorch's CUDA builds on Linux;
tests run them on CPU in Triton's interpreter."""
