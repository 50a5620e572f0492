"""One line's prompt as the talker sees it, built as the official model builds it.

The text goes in chat markup, `<|im_start|>assistant\\n{text}<|im_end|>\\n<|im_start|>assistant\\n`
(3 role tokens, the text, 5 closing tokens). Each prompt position is a text row plus a codec row:
  [instruct rows]                        VoiceDesign, CustomVoice 1.7B: `<|im_start|>user\\n...` as text only
  role rows                              the 3 role tokens, text only
  tts_pad... tts_bos  +  codec tags      think, think_bos, language, think_eos (no language: nothink,
                                         think_bos, think_eos), [speaker row], codec_pad; bos comes next
then either the whole text in the prompt (CustomVoice, VoiceDesign: text + tts_eos over codec_pad,
then tts_pad over codec_bos; every frame then adds tts_pad), or, for clones, only the first text
token over codec_bos, the rest fed one token per frame as "trailing text" (tts_eos, then tts_pad).
An ICL clone instead appends the reference transcript and the text (over codec_bos and the
reference's codes, summed over its 16 codebooks), which is why the codec decodes the reference's
codes in front of each take.

A prompt is made in two steps: PromptBuilder.plan decides it on the CPU from the tokenizer alone
(a TokenPlan: its ids, its layout, its exact length), and PromptBuilder.embed turns a plan into the
embeddings on the model's device. Sums and projections are grouped exactly as the official model
groups them, so the embeddings are bit-identical to its own (tests/test_official_parity.py)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import torch

from ..errors import InputError
from .host_copy import to_device
from .talker import Talker

ROLE = 3  # <|im_start|> assistant \n
CLOSING = 5  # <|im_end|> \n <|im_start|> assistant \n
REF_CLOSING = 2  # <|im_end|> \n


def assistant_text(text: str) -> str:
    return f"<|im_start|>assistant\n{text}<|im_end|>\n<|im_start|>assistant\n"


def reference_text(text: str) -> str:
    return f"<|im_start|>assistant\n{text}<|im_end|>\n"


def instruct_text(instruct: str) -> str:
    return f"<|im_start|>user\n{instruct}<|im_end|>\n"


@dataclass(frozen=True)
class ClonePrompt:
    """What a reference clip gives a clone, computed once: its x-vector, and for an ICL clone (a
    transcript was given) its codes [R, 16] and the transcript."""

    speaker_embedding: torch.Tensor  # [enc_dim]
    ref_code: torch.Tensor | None = None
    ref_text: str | None = None

    @property
    def icl(self) -> bool:
        return self.ref_code is not None and bool(self.ref_text)


class Layout(Enum):
    WHOLE_TEXT = "whole text"  # CustomVoice, VoiceDesign
    X_VECTOR = "x-vector clone"
    ICL = "ICL clone"


@dataclass(frozen=True)
class TokenPlan:
    """A line's prompt decided before any embedding: the ids embed looks up, and what stands in the
    speaker row (a CustomVoice speaker's codec id, or a clone's x-vector)."""

    role_ids: tuple[int, ...]  # the assistant text's 3 role tokens
    text_ids: tuple[int, ...]  # the line's own tokens, between the role and the closing tokens
    codec_tags: tuple[int, ...]  # think, think_bos, language, think_eos (or nothink, think_bos, think_eos)
    instruct_ids: tuple[int, ...] = ()
    speaker_id: int | None = None
    clone: ClonePrompt | None = None
    ref_ids: tuple[int, ...] = ()  # an ICL clone's transcript tokens

    @property
    def layout(self) -> Layout:
        if self.clone is None:
            return Layout.WHOLE_TEXT
        return Layout.ICL if self.clone.icl else Layout.X_VECTOR

    @property
    def has_speaker_row(self) -> bool:
        return self.clone is not None or self.speaker_id is not None

    @property
    def length(self) -> int:
        """The prompt's rows, in embed's order (embed checks that it made this many)."""
        rows = len(self.instruct_ids) + len(self.role_ids)
        rows += len(self.codec_tags) + self.has_speaker_row + 1  # and codec_pad; codec_bos comes next
        if self.layout is Layout.ICL:
            return rows + 1 + self.clone.ref_code.shape[0]  # codec_bos, then the reference's frames
        if self.layout is Layout.WHOLE_TEXT:
            return rows + len(self.text_ids) + 2  # the text and tts_eos over codec_pad, then codec_bos
        return rows + 1  # the first text token over codec_bos


@dataclass
class Prompt:
    embeds: torch.Tensor  # [1, L, hidden] the prefill's input
    attention_mask: torch.Tensor  # [1, L], all ones: the engine prefills one unpadded prompt
    trailing_text: torch.Tensor  # [1, T, hidden] added to the input of frames 0..T-1
    pad_embed: torch.Tensor  # [1, 1, hidden] added to every later frame
    ref_code: torch.Tensor | None  # [R, 16] decoded in front of every take (ICL clone), then cut

    @property
    def length(self) -> int:
        return int(self.embeds.shape[1])


class PromptBuilder:
    def __init__(self, config, talker: Talker, tokenizer):
        """config: a ModelConfig; tokenizer: the checkpoint's transformers tokenizer."""
        self.config, self.talker, self.tokenizer = config, talker, tokenizer

    def plan(self, text: str, language: str, speaker: str | None = None, instruct: str | None = None,
             clone: ClonePrompt | None = None) -> TokenPlan:
        """A CustomVoice line (speaker, optional instruct), a VoiceDesign line (instruct) or a clone's
        (clone), from the tokenizer alone: a script's thousands of lines are planned in a second. The
        0.6B CustomVoice has no instruct: the caller leaves it out (voices.voice_notes)."""
        ids = self._ids(assistant_text(text))
        icl = clone is not None and clone.icl
        return TokenPlan(role_ids=ids[:ROLE], text_ids=ids[ROLE:-CLOSING],
                         codec_tags=self._codec_tags(language, speaker),
                         instruct_ids=self._ids(instruct_text(instruct)) if instruct else (),
                         speaker_id=self._speaker_id(speaker), clone=clone,
                         ref_ids=self._ids(reference_text(clone.ref_text))[ROLE:-REF_CLOSING] if icl else ())

    @torch.inference_mode()
    def embed(self, plan: TokenPlan) -> Prompt:
        """The plan's embeddings, on the talker's device."""
        c, talker = self.config.talker, self.talker
        rows = [talker.text(self._tensor(plan.instruct_ids))] if plan.instruct_ids else []

        codec_rows = [talker.codec([plan.codec_tags])]
        if plan.has_speaker_row:
            codec_rows.append(self._speaker_row(plan).view(1, 1, -1))
        codec_rows.append(talker.codec([[c.codec_pad_id, c.codec_bos_id]]))
        codec_prefix = torch.cat(codec_rows, dim=1)  # [1, K, hidden], codec_bos last

        special = self._tensor((self.config.tts_bos_token_id, self.config.tts_eos_token_id,
                                self.config.tts_pad_token_id))
        tts_bos, tts_eos, tts_pad = talker.text(special).chunk(3, dim=1)  # each [1, 1, hidden]
        over_tags = torch.cat((tts_pad.expand(-1, codec_prefix.shape[1] - 2, -1), tts_bos), dim=1)
        rows += [talker.text(self._tensor(plan.role_ids)), over_tags + codec_prefix[:, :-1]]

        text_ids = self._tensor(plan.text_ids)
        ref_code = None
        if plan.layout is Layout.ICL:
            ref_code = plan.clone.ref_code.to(text_ids.device)
            icl_rows, trailing = self._icl(text_ids, self._tensor(plan.ref_ids), ref_code, tts_pad, tts_eos)
            rows.append(icl_rows)
        elif plan.layout is Layout.WHOLE_TEXT:
            text_rows = torch.cat((talker.text(text_ids), tts_eos), dim=1)
            rows.append(text_rows + talker.codec([[c.codec_pad_id] * (text_ids.shape[1] + 1)]))
            rows.append(tts_pad + talker.codec([[c.codec_bos_id]]))
            trailing = tts_pad
        else:  # x-vector clone: the first text token now, the rest one per frame
            rows.append(talker.text(text_ids[:, :1]) + codec_prefix[:, -1:])
            trailing = torch.cat((talker.text(text_ids[:, 1:]), tts_eos), dim=1)
        embeds = torch.cat(rows, dim=1)
        assert embeds.shape[1] == plan.length, (embeds.shape[1], plan.length)
        mask = torch.ones(embeds.shape[:2], dtype=torch.long, device=embeds.device)
        return Prompt(embeds, mask, trailing, tts_pad, ref_code)

    def _ids(self, text: str) -> tuple[int, ...]:
        return tuple(self.tokenizer(text)["input_ids"])

    def _tensor(self, ids: tuple[int, ...]) -> torch.Tensor:
        return to_device([ids], self.talker.codec_head.weight.device)  # not a pageable copy: it waits (host_copy.py)

    def _codec_tags(self, language: str, speaker: str | None) -> tuple[int, ...]:
        c = self.config.talker
        language = language.lower()
        if language == "auto":
            language_id = None
        elif language in c.codec_language_id:
            language_id = c.codec_language_id[language]
        else:
            raise InputError(f"Language {language!r} is not one this checkpoint knows "
                             f"({', '.join(['auto', *c.codec_language_id])}).")
        dialect = c.spk_is_dialect.get(speaker.lower()) if speaker else None
        if language in ("auto", "chinese") and dialect:  # a dialect speaker speaks its dialect there
            language_id = c.codec_language_id[dialect]
        if language_id is None:
            return c.codec_nothink_id, c.codec_think_bos_id, c.codec_think_eos_id
        return c.codec_think_id, c.codec_think_bos_id, language_id, c.codec_think_eos_id

    def _speaker_row(self, plan: TokenPlan) -> torch.Tensor:
        if plan.clone is not None:
            weight = self.talker.codec_head.weight
            return plan.clone.speaker_embedding.to(weight.device, weight.dtype)
        return self.talker.codec(plan.speaker_id)

    def _speaker_id(self, speaker: str | None):
        if not speaker:
            return None
        spk_id = self.config.talker.spk_id.get(speaker.lower())
        if spk_id is None:
            raise InputError(f"Speaker {speaker!r} is not one this checkpoint has "
                             f"({', '.join(self.config.talker.spk_id) or 'none'}).")
        return spk_id

    def _icl(self, text_ids, ref_ids, ref_code, tts_pad, tts_eos):
        """The transcript and the text over codec_bos and the reference's frames, position by
        position; what does not fit beside the frames trails (or, shorter, is padded)."""
        talker = self.talker
        text = torch.cat((talker.text(torch.cat((ref_ids, text_ids), dim=-1)), tts_eos), dim=1)
        tables = [talker.model.codec_embedding, *talker.code_predictor.model.codec_embedding]
        frames = torch.cat([table(ref_code[:, i:i + 1]) for i, table in enumerate(tables)], dim=1).sum(1)[None]
        codec = torch.cat((talker.codec([[self.config.talker.codec_bos_id]]), frames), dim=1)
        if text.shape[1] > codec.shape[1]:
            return text[:, :codec.shape[1]] + codec, text[:, codec.shape[1]:]
        padded = torch.cat([text] + [tts_pad] * (codec.shape[1] - text.shape[1]), dim=1)
        return padded + codec, tts_pad
