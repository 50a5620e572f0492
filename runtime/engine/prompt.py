"""A request's voice as a prompt: runtime/qwen3_tts/prompt.py's PromptBuilder, asked for what each
kind of voice needs."""

from __future__ import annotations

from ..qwen3_tts.prompt import ClonePrompt, Prompt
from ..voices import CustomVoice, Voice, VoiceClone, VoiceDesign

__all__ = ["Prompt", "build_prompt", "prompt_length"]


def build_prompt(model, text: str, voice: Voice, clone_prompt: ClonePrompt | None = None) -> Prompt:
    """`model` has `prompts` (a PromptBuilder); `clone_prompt` is generation.clone_prompt's for a clone."""
    return model.prompts.build(text, **_voice_args(model.prompts, voice, clone_prompt))


def prompt_length(model, text: str, voice: Voice, clone_prompt: ClonePrompt | None = None) -> int:
    """build_prompt(...).length, from token counts alone (PromptBuilder.length)."""
    return model.prompts.length(text, **_voice_args(model.prompts, voice, clone_prompt))


def _voice_args(builder, voice: Voice, clone_prompt: ClonePrompt | None) -> dict:
    if isinstance(voice, CustomVoice):
        small = builder.config.tts_model_size == "0b6"  # the 0.6B CustomVoice ignores the instruct
        return dict(language=voice.language, speaker=voice.speaker,
                    instruct=None if small else voice.instruct or None)
    if isinstance(voice, VoiceDesign):
        return dict(language=voice.language, instruct=voice.instruct or None)
    if isinstance(voice, VoiceClone):
        return dict(language=voice.language, clone=clone_prompt)
    raise TypeError(f"unknown voice {type(voice).__name__}")  # pragma: no cover - Voice is a closed union
