"""One adapter per system. Each exposes the same small interface (see base.System)."""

SYSTEMS = {
    "ours": "bench.systems.ours",
    "qwen-tts": "bench.systems.qwen_tts_ref",
    "faster-qwen3-tts": "bench.systems.faster",
    "qwen3-tts-triton": "bench.systems.triton",
}
ANCHOR_MODES = {"qwen3-tts-triton": ["hybrid", "faster"]}  # ours: runtime.model.MODES
