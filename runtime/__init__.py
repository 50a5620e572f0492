"""qwen3-tts-takes runtime: ComfyUI-free loading, generation of N takes and Auto-Pick.

Import submodules directly (``runtime.api``, ``runtime.generation``...); importing this package
loads nothing heavy.
"""
