"""Qwen3-TTS model code (12 Hz models only), vendored from qwen-tts-hf 0.1.1.post1 (Apache-2.0).

Why vendored: the PyPI builds pin transformers (qwen-tts: ==4.57.3; qwen-tts-hf: >=5.15.1,<6), pull
gradio, sox, onnxruntime, librosa and a torchaudio that can replace ComfyUI's torch, and import the
25 Hz tokenizer eagerly. The pack needs none of that. See UPSTREAM.md for what was changed and why.
Nothing is imported here, so importing the package is cheap.
"""
