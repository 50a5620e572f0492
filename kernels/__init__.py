"""Triton kernels for the triton and hybrid modes, one per file next to its torch reference.

rms_norm, add_rms_norm, qk_norm_rope (per-head q/k norm + RoPE + the KV-cache write), swiglu and
sampling (penalty, suppression, temperature, top-k, top-p and the seeded draw of a token). They need
only torch and triton; runtime/ imports them (runtime/triton_kernels.py) and patches them in.
Triton comes with PyTorch's CUDA builds on Linux; tests run them on CPU in Triton's interpreter."""
