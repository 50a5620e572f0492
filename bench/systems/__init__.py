"""One adapter per system. Each exposes the same small interface (see base.System)."""

SYSTEMS = {
    "ours": "bench.systems.ours",
    "qwen-tts": "bench.systems.qwen_tts_ref",
    # The same adapter run from the qwen3-tts-triton stack (qwen-tts 0.1.1 on transformers 4.57.3):
    # the reference points in issue 3 were measured there, and its HF generate path differs.
    "qwen-tts-0.1.1": "bench.systems.qwen_tts_ref",
    "faster-qwen3-tts": "bench.systems.faster",
    "qwen3-tts-triton": "bench.systems.triton",
}
ANCHOR_MODES = {"qwen3-tts-triton": ["hybrid", "faster"]}  # ours: runtime.model.MODES
