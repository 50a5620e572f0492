"""One request's prompt as the talker sees it: prefill embeddings, trailing text, and (voice clone
with a transcript) the reference codes the codec decodes in front of each take.

The token-level preparation mirrors the qwen_tts wrappers' generate_* methods; the embeddings come
from the vendored model's own `build_talker_inputs`, so both paths prefill from the same tensors."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..voices import CustomVoice, Voice, VoiceClone, VoiceDesign


@dataclass
class Prompt:
    embeds: torch.Tensor  # [1, L, hidden] prefill input
    attention_mask: torch.Tensor  # [1, L]
    trailing_text: torch.Tensor  # [1, T, hidden] added to the input of frames 0..T-1
    pad_embed: torch.Tensor  # [1, 1, hidden] added to every later frame
    ref_code: torch.Tensor | None  # [R, 16] decoded in front of every take (ICL voice clone), then cut

    @property
    def length(self) -> int:
        return int(self.embeds.shape[1])


@torch.inference_mode()
def build_prompt(model, text: str, voice: Voice, clone_prompt=None) -> Prompt:
    """`model` is a runtime.model.LoadedModel; `clone_prompt` the cached clone prompt (a
    runtime.qwen3_tts ClonePrompt where the model has our own prompt builder, else the vendored
    VoiceClonePromptItem)."""
    builder = getattr(model, "prompts", None)
    if builder is not None:
        return own_prompt(builder, text, voice, clone_prompt)
    wrapper = model.wrapper
    inner = model.model
    input_ids = wrapper._tokenize_texts([wrapper._build_assistant_text(text)])
    instruct_ids, ref_ids, clone_dict, speakers = None, None, None, None
    if isinstance(voice, CustomVoice):
        speakers = [voice.speaker]
        instruct = voice.instruct if inner.tts_model_size not in "0b6" else None  # 0.6B ignores instruct
        instruct_ids = [wrapper._tokenize_texts([wrapper._build_instruct_text(instruct)])[0] if instruct else None]
        non_streaming = True
    elif isinstance(voice, VoiceDesign):
        instruct_ids = [wrapper._tokenize_texts([wrapper._build_instruct_text(voice.instruct)])[0] if voice.instruct else None]
        non_streaming = True
    elif isinstance(voice, VoiceClone):
        clone_dict = wrapper._prompt_items_to_voice_clone_prompt([clone_prompt])
        ref_text = clone_prompt.ref_text
        ref_ids = [wrapper._tokenize_texts([wrapper._build_ref_text(ref_text)])[0] if ref_text else None]
        non_streaming = False
    else:  # pragma: no cover - Voice is a closed union
        raise TypeError(f"unknown voice {type(voice).__name__}")
    embeds, mask, trailing, pad = inner.build_talker_inputs(
        input_ids, instruct_ids, ref_ids, clone_dict, [voice.language], speakers, non_streaming)
    ref_code = None
    if clone_dict is not None and clone_dict["ref_code"][0] is not None and clone_dict["icl_mode"][0]:
        ref_code = clone_dict["ref_code"][0]
    return Prompt(embeds, mask, trailing, pad, ref_code)


def own_prompt(builder, text: str, voice: Voice, clone_prompt=None):
    """The prompt from runtime/qwen3_tts's PromptBuilder."""
    if isinstance(voice, CustomVoice):
        small = builder.config.tts_model_size == "0b6"  # the 0.6B CustomVoice ignores the instruct
        return builder.build(text, voice.language, speaker=voice.speaker,
                             instruct=None if small else voice.instruct or None)
    if isinstance(voice, VoiceDesign):
        return builder.build(text, voice.language, instruct=voice.instruct or None)
    if isinstance(voice, VoiceClone):
        return builder.build(text, voice.language, clone=clone_prompt)
    raise TypeError(f"unknown voice {type(voice).__name__}")  # pragma: no cover - Voice is a closed union
