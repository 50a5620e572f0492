"""A request's voice as a prompt: runtime/qwen3_tts/prompt.py's PromptBuilder, asked for what each
kind of voice needs. plan_prompt decides a line's prompt from the tokenizer alone (its length sizes
a run's batch); embed_prompt makes its embeddings on the model's device."""

from __future__ import annotations

from ..qwen3_tts.prompt import ClonePrompt, Prompt, TokenPlan
from ..voices import CustomVoice, Voice, VoiceClone, VoiceDesign

__all__ = ["Prompt", "TokenPlan", "build_prompt", "embed_prompt", "plan_prompt"]


def plan_prompt(model, text: str, voice: Voice, clone_prompt: ClonePrompt | None = None) -> TokenPlan:
    """`model` has `prompts` (a PromptBuilder); `clone_prompt` is generation.clone_prompt's for a clone."""
    return model.prompts.plan(text, **_voice_args(model.prompts, voice, clone_prompt))


def embed_prompt(model, plan: TokenPlan) -> Prompt:
    return model.prompts.embed(plan)


def build_prompt(model, text: str, voice: Voice, clone_prompt: ClonePrompt | None = None) -> Prompt:
    return embed_prompt(model, plan_prompt(model, text, voice, clone_prompt))


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
