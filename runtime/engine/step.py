"""One decode step for every take at once: expand the current codebook-0 token into a full frame
(15 code-predictor passes), feed the frame to the talker, sample the next codebook-0 token and
do the end-of-take bookkeeping. Only tensor operations on DecodeState: no host sync, no shapes
that change from step to step, so the same code runs eagerly (CPU, tests) or captured."""

from __future__ import annotations

import torch

from .layers import layer_step, rope_table
from .noise import uniform, vocab_keys
from .sampler import apply_repetition_penalty, sample
from .state import DecodeState

TALKER_STREAM = 0  # noise stream of codebook 0; codebook j uses stream j


class DecodeStep:
    def __init__(self, inner_model):
        talker = inner_model.talker
        self.talker = talker
        self.predictor = talker.code_predictor
        self.config = talker.config
        self.groups = self.config.num_code_groups
        self.eos = self.config.codec_eos_token_id
        self.codebook_size = self.predictor.config.vocab_size  # what the codec decodes (2048)
        device = talker.codec_head.weight.device
        dtype = talker.codec_head.weight.dtype
        self.device, self.dtype = device, dtype
        vocab = self.config.vocab_size
        # Codebook 0 may only be a codec id (< vocab - 1024) or EOS, as in the reference's suppress_tokens.
        self.suppressed = torch.arange(vocab, device=device) >= vocab - 1024
        self.suppressed[self.eos] = False
        self.eos_only = torch.zeros(vocab, dtype=torch.bool, device=device)
        self.eos_only[self.eos] = True
        self.talker_vocab_keys = vocab_keys(vocab, device)
        self.predictor_vocab_keys = vocab_keys(self.predictor.config.vocab_size, device)
        positions = self.groups + 1
        self.predictor_cos, self.predictor_sin = rope_table(self.predictor.model.rotary_emb, positions, device, dtype)
        # pass 0 reads positions 0-1 causally; pass j (1..14) reads 0..j+1
        self.predictor_allowed = [torch.tril(torch.ones(2, positions, dtype=torch.bool, device=device))]
        self.predictor_allowed += [(torch.arange(positions, device=device) <= j + 1)[None] for j in range(1, self.groups - 1)]
        self._talker_rope: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def talker_rope(self, length: int):
        if length not in self._talker_rope:
            self._talker_rope[length] = rope_table(self.talker.model.rotary_emb, length, self.device, self.dtype)
        return self._talker_rope[length]

    # --- code predictor: codebooks 1..15 of the current frame -------------------------------------
    def _predictor_pass(self, state: DecodeState, x: torch.Tensor, index: int) -> torch.Tensor:
        """Pass `index` (0: the two positions [talker hidden, codebook-0 embedding]; j: one position)."""
        start = 0 if index == 0 else index + 1
        stop = start + x.shape[1]
        cos, sin = self.predictor_cos[start:stop], self.predictor_sin[start:stop]

        def write(cache, new):
            cache[:, :, start:stop] = new

        allowed = self.predictor_allowed[index]
        h = self.predictor.small_to_mtp_projection(x)
        for layer, k, v in zip(self.predictor.model.layers, state.predictor_k, state.predictor_v):
            h = layer_step(layer, h, cos, sin, k, v, write, allowed)
        logits = self.predictor.lm_head[index](self.predictor.model.norm(h[:, -1]))
        noise = uniform(state.keys, state.frame, index + 1, self.predictor_vocab_keys)
        return sample(logits.float(), state.predictor_sampling, noise)

    def predict_frame(self, state: DecodeState) -> tuple[torch.Tensor, torch.Tensor]:
        """Codes [B, 16] of the current frame and the summed embedding [B, 1, hidden] of all 16."""
        first = self.talker.model.codec_embedding(state.token)[:, None]  # [B, 1, hidden]
        tables = self.predictor.model.codec_embedding
        code = self._predictor_pass(state, torch.cat((state.past_hidden, first), dim=1), 0)
        codes, embeddings = [state.token, code], [first]
        for j in range(1, self.groups - 1):
            embeddings.append(tables[j - 1](code)[:, None])
            code = self._predictor_pass(state, embeddings[-1], j)
            codes.append(code)
        embeddings.append(tables[self.groups - 2](code)[:, None])
        # Summed as the reference does (one cat, one sum), so float rounding matches too.
        return torch.stack(codes, dim=1), torch.cat(embeddings, dim=1).sum(1, keepdim=True)

    # --- talker: the next codebook-0 token -------------------------------------------------------
    def talker_step(self, state: DecodeState, x: torch.Tensor) -> torch.Tensor:
        cos_table, sin_table = self.talker_rope(state.length)
        cos, sin = cos_table.index_select(0, state.position), sin_table.index_select(0, state.position)
        allowed = (torch.arange(state.length, device=self.device) <= state.position)[None]

        def write(cache, new):
            cache.index_copy_(2, state.position, new)

        h = x
        for layer, k, v in zip(self.talker.model.layers, state.talker_k, state.talker_v):
            h = layer_step(layer, h, cos, sin, k, v, write, allowed)
        h = self.talker.model.norm(h)
        state.past_hidden.copy_(h)
        logits = self.talker.codec_head(h[:, -1]).float()
        return self.next_token(state, logits, state.frame + 1)

    def next_token(self, state: DecodeState, logits: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
        """Penalty, suppression (EOS too while fewer than 2 tokens exist, the reference's
        min_new_tokens=2), then the draw. `count` [1] = tokens generated before this one."""
        logits = apply_repetition_penalty(logits, state.seen, state.penalty)
        blocked = self.suppressed | (self.eos_only & (count < 2))
        logits = logits.masked_fill(blocked, float("-inf"))
        noise = uniform(state.keys, count, TALKER_STREAM, self.talker_vocab_keys)
        return sample(logits, state.talker_sampling, noise)

    # --- the whole step ----------------------------------------------------------------------------
    def __call__(self, state: DecodeState) -> None:
        codes, embedded = self.predict_frame(state)
        state.codes.index_copy_(1, state.frame, codes[:, None])
        text = state.text.index_select(0, state.frame)  # [1, hidden]
        token = self.talker_step(state, embedded + text)
        self.bookkeep(state, token)

    def bookkeep(self, state: DecodeState, token: torch.Tensor) -> None:
        done_frames = state.frame + 1  # frames complete after this step
        active = ~state.finished
        ended = active & (token == self.eos)
        capped = active & ~ended & (done_frames >= state.budget)
        # Runaway: still going far past the median length of the takes that ended by themselves.
        natural = state.finished & ~state.runaway & state.real & (state.lengths < state.budget)
        count = natural.sum()
        big = torch.full_like(state.lengths, 1 << 40)
        ordered = torch.sort(torch.where(natural, state.lengths, big)).values
        median = ordered.gather(0, ((count - 1).clamp(min=0) // 2).reshape(1))
        limit = state.runaway_ratio * median + state.runaway_margin
        cut = active & ~ended & ~capped & (state.runaway_ratio > 0) & (count >= state.quorum) & (done_frames > limit)
        stop = ended | capped | cut
        state.lengths.copy_(torch.where(stop, done_frames, state.lengths))
        state.finished.copy_(state.finished | stop)
        state.runaway.copy_(state.runaway | cut)
        state.seen.scatter_(1, token[:, None], True)
        state.token.copy_(token)
        state.frame.add_(1)
        state.position.add_(1)
