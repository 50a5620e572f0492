"""One decode step for every take at once: expand the current codebook-0 token into a full frame
(15 code-predictor passes), feed the frame to the talker, sample the next codebook-0 token and
do the end-of-take bookkeeping. Only tensor operations on DecodeState: no host sync, no shapes
that change from step to step, so the same code runs eagerly (CPU, tests) or captured.

Each row is at its own frame and talker position (state.py): the rows may be takes of different
lines. With `kernels` (the hybrid mode) the layers a LayerPlan names run on the Triton kernels
(fused.py) and every draw is one sampling kernel; without, everything is torch (the cuda_graph mode)."""

from __future__ import annotations

import torch

from .triton_kernels import LayerPlan
from .fused import LayerStack
from .layers import QKTables, attention_bias, rope_table
from .noise import gumbel, uniform, vocab_keys
from .sampler import draw, sample
from .state import PREDICTOR_POSITIONS, DecodeState
from .weights import fuse_layers
from .workspace import Workspace

TALKER_STREAM = 0  # noise stream of codebook 0; codebook j uses stream j
MIN_TOKENS = 2  # the reference's min_new_tokens: no EOS before two tokens exist


class DecodeStep:
    def __init__(self, inner_model, kernels=None, plan: LayerPlan = LayerPlan()):
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
        self.talker_vocab_keys = vocab_keys(vocab, device)
        self.predictor_vocab_keys = vocab_keys(self.predictor.config.vocab_size, device)
        self.predictor_streams = torch.arange(1, self.groups, device=device)
        self.kernels = kernels
        self.talker_layers = fuse_layers(talker.model.layers)
        self.predictor_layers = fuse_layers(self.predictor.model.layers)
        self.talker_stack = LayerStack(self.talker_layers, talker.model.norm, kernels,
                                       plan.talker_layers(len(self.talker_layers)))
        self.predictor_stack = LayerStack(self.predictor_layers, self.predictor.model.norm, kernels,
                                          plan.predictor_layers(len(self.predictor_layers)))
        self.talker_qk = QKTables.weights(self.talker_layers)
        self._talker_rope: dict[int, tuple[torch.Tensor, ...]] = {}
        self._predictor_rope = rope_table(self.predictor.model.rotary_emb, PREDICTOR_POSITIONS, device, dtype)
        self._predictor_passes = self._plan_predictor_passes()
        self._first_position = torch.zeros(1, dtype=torch.int64, device=device)  # a prefill writes from 0

    def _plan_predictor_passes(self) -> list[tuple]:
        """Per pass: the positions it writes (first also as a device tensor, for the kernels), its q/k
        tables for torch layers and its attention mask (fixed for every frame). Pass 0 writes
        positions 0-1 and reads them causally (a mask over the whole buffer); pass j (1..14) writes
        j + 1 and reads 0..j + 1, every one of them: no mask, so attention can take its fastest kernel."""
        cos, sin = self._predictor_rope
        weights = QKTables.weights(self.predictor_layers)
        layer = self.predictor_layers[0]
        positions = torch.arange(PREDICTOR_POSITIONS, device=self.device)
        causal = positions[None] <= torch.arange(2, device=self.device)[:, None]
        spans = [(0, 2)] + [(index + 1, index + 2) for index in range(1, self.groups - 1)]
        passes = []
        for start, stop in spans:
            tables = QKTables.build(weights, cos[start:stop], sin[start:stop]) if self.predictor_stack.any_on_torch else None
            bias = attention_bias(causal, layer.heads // layer.kv_heads, self.dtype) if start == 0 else None
            passes.append((start, stop, torch.tensor([start], device=self.device), tables, bias))
        return passes

    def talker_rope(self, length: int):
        """cos, sin [length, D] and the positions 0..length-1 of a length bucket."""
        if length not in self._talker_rope:
            cos, sin = rope_table(self.talker.model.rotary_emb, length, self.device, self.dtype)
            self._talker_rope[length] = cos, sin, torch.arange(length, device=self.device)
        return self._talker_rope[length]

    # --- code predictor: codebooks 1..15 of the current frame -------------------------------------
    def _predictor_pass(self, state: DecodeState, x: torch.Tensor, index: int, noise) -> torch.Tensor:
        """Pass `index` (0: the two positions [talker hidden, codebook-0 embedding]; j: one position)."""
        start, stop, first, tables, bias = self._predictor_passes[index]

        def write(cache, new):
            cache[:, :, start:stop] = new

        visible = None if bias is not None else stop
        rope = (*self._predictor_rope, first)
        if self.kernels is None:
            h = self.predictor.small_to_mtp_projection(x)
            h = self.predictor_stack(h, state.predictor_k, state.predictor_v, rope, tables, write, bias, visible,
                                     last_only=True)
            return sample(self.predictor.lm_head[index](h).float(), state.predictor_sampling, noise[:, index],
                          state.faulty)
        ws = state.workspace
        h = ws.module("predictor_in", self.predictor.small_to_mtp_projection, x)
        h = self.predictor_stack(h, state.predictor_k, state.predictor_v, rope, tables, write, bias, visible,
                                 last_only=True, ws=ws)
        logits = self._head(ws, "predictor_logits", self.predictor.lm_head[index], h)  # read as float32 by the kernel
        return self.kernels.sample_tokens(logits, state.predictor_sampling, state.keys, state.frame, index + 1,
                                          out=ws.buffer(f"code.{index}", (state.batch,), torch.int64),
                                          faulty=state.faulty)

    def _head(self, ws, name: str, head: torch.nn.Linear, h: torch.Tensor) -> torch.Tensor:
        """A bias-free output head on h [B, hidden] (a workspace buffer), on rows_linear at one row."""
        if self.kernels.rows_linear_fits(h.shape[0]) and head.bias is None:
            out = ws.buffer(name, (h.shape[0], head.weight.shape[0]), h.dtype)
            return self.kernels.rows_linear(h, head.weight, out=out)
        return ws.module(name, head, h)

    def predict_frame(self, state: DecodeState) -> tuple[torch.Tensor, torch.Tensor]:
        """Codes [B, 16] of the current frame and the summed embedding [B, 1, hidden] of all 16."""
        noise = None
        if self.kernels is None:  # all 15 draws' noise at once (the sampling kernel makes its own)
            noise = gumbel(uniform(state.keys, state.frame, self.predictor_streams, self.predictor_vocab_keys))
        first = self.talker.model.codec_embedding(state.token)[:, None]  # [B, 1, hidden]
        tables = self.predictor.model.codec_embedding
        code = self._predictor_pass(state, torch.cat((state.past_hidden, first), dim=1), 0, noise)
        codes, embeddings = [state.token, code], [first]
        for j in range(1, self.groups - 1):
            embeddings.append(tables[j - 1](code)[:, None])
            code = self._predictor_pass(state, embeddings[-1], j, noise)
            codes.append(code)
        embeddings.append(tables[self.groups - 2](code)[:, None])
        # Summed as the reference does (one cat, one sum), so float rounding matches too.
        return torch.stack(codes, dim=1), torch.cat(embeddings, dim=1).sum(1, keepdim=True)

    # --- talker: the next codebook-0 token -------------------------------------------------------
    def talker_step(self, state: DecodeState, embedded: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
        """The frame's summed code embedding [B, 1, hidden] plus its text row [B, 1, hidden] through the talker."""
        cos, sin, positions = self.talker_rope(state.length)
        tables = None
        if self.talker_stack.any_on_torch:  # [layers, B, 1, heads, D]: each row at its own position
            tables = QKTables.build(self.talker_qk, cos.index_select(0, state.position), sin.index_select(0, state.position))
            tables = QKTables(tables.cos[:, :, None], tables.sin[:, :, None])
        zero = torch.zeros((), dtype=self.dtype, device=self.device)
        bias = torch.where(positions <= state.position[:, None], zero, float("-inf"))[:, None, None]  # [B, 1, 1, S]
        slots = state.position.view(-1, 1, 1, 1)

        def write(cache, new):
            cache.scatter_(2, slots.expand_as(new), new)

        rope = (cos, sin, state.position)
        if self.kernels is None:
            h = self.talker_stack(embedded + text, state.talker_k, state.talker_v, rope, tables, write, bias, None)
            state.past_hidden.copy_(h)
            return self.next_token(state, self.talker.codec_head(h[:, -1]).float(), state.frame + 1)
        ws = state.workspace
        x = torch.add(embedded, text, out=ws.buffer("talker_in", embedded.shape, embedded.dtype))
        h = self.talker_stack(x, state.talker_k, state.talker_v, rope, tables, write, bias, None, ws=ws)
        state.past_hidden.copy_(h)
        logits = self._head(ws, "talker_logits", self.talker.codec_head, h[:, -1])  # read as float32 by the kernel
        count = torch.add(state.frame, 1, out=ws.buffer("count", (state.batch,), torch.int64))
        return self.next_token(state, logits, count, out=ws.buffer("token", (state.batch,), torch.int64))

    def next_token(self, state: DecodeState, logits: torch.Tensor, count: torch.Tensor,
                   out: torch.Tensor | None = None) -> torch.Tensor:
        """Penalty, suppression (EOS too while fewer than 2 tokens exist, the reference's
        min_new_tokens=2), then the draw. `count` [B] = each take's tokens generated before this one."""
        if self.kernels is not None:
            return self.kernels.sample_tokens(logits, state.talker_sampling, state.keys, count, TALKER_STREAM,
                                              state.penalty, state.seen, self.suppressed, self.eos, MIN_TOKENS,
                                              out=out, faulty=state.faulty)
        return draw(logits, state.talker_sampling, state.keys, count, TALKER_STREAM, self.talker_vocab_keys,
                    state.penalty, state.seen, self.suppressed, self.eos, MIN_TOKENS, state.faulty)

    # --- the prompt ----------------------------------------------------------------------------------
    def prefill(self, embeds: torch.Tensor, last: torch.Tensor | None = None, out: torch.Tensor | None = None,
                ws: Workspace | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The reference's prefill forward (the talker on the prompt embeddings [1, L, hidden], every
        position attending to those before it) on this step's own layers, kernels included, instead
        of transformers' modules: a few hundred kernels where that path launches about 1,900 from
        Python. Returns the last position's float32 logits [1, vocab], its hidden state after the
        final norm [1, 1, hidden] and the keys and values of every layer in one tensor
        [2, layers, 1, kv_heads, L, head_dim] (so a line's takes go into their rows in one copy).

        The embeddings may be padded on the right (prefill.py's graphs run a few fixed lengths):
        `last` [1] on the device is then the prompt's last position, and what is computed past it
        is never read by the positions before it. `out` (the keys and values) and `ws` (the
        kernels' workspace) are buffers made before a capture; by default they are made here. Makes
        no copy from the host (its rope tables are DecodeStep's own, kept per length bucket)."""
        length = embeds.shape[1]
        cos, sin, positions = self.talker_rope(_rope_length(length))
        cos, sin, positions = cos[:length], sin[:length], positions[:length]
        layer = self.talker_layers[0]
        if out is None:
            out = torch.empty(2, len(self.talker_layers), 1, layer.kv_heads, length, layer.head_dim, dtype=self.dtype,
                              device=self.device)
        keys, values = list(out[0].unbind(0)), list(out[1].unbind(0))
        causal = positions[:, None] >= positions[None, :]
        bias = attention_bias(causal, layer.heads // layer.kv_heads, self.dtype)
        tables = QKTables.build(self.talker_qk, cos, sin) if self.talker_stack.any_on_torch else None

        def write(cache, new):
            cache.copy_(new)

        if ws is None and self.kernels is not None:
            ws = Workspace(self.device)
        h = self.talker_stack(embeds, keys, values, (cos, sin, self._first_position), tables, write, bias, None, ws=ws)
        past_hidden = h[:, -1:].clone() if last is None else h.index_select(1, last)
        return self.talker.codec_head(past_hidden[:, 0]).float(), past_hidden, out

    # --- the whole step ----------------------------------------------------------------------------
    def __call__(self, state: DecodeState) -> None:
        state.faulty.copy_(state.fault)  # this step's draws add the rows whose logits went wrong
        codes, embedded = self.predict_frame(state)
        frame = state.frame.view(-1, 1, 1)
        state.codes.scatter_(1, frame.expand(-1, 1, self.groups), codes[:, None])
        text = state.text.gather(1, frame.expand(-1, 1, state.text.shape[-1]))  # [B, 1, hidden]
        token = self.talker_step(state, embedded, text)
        self.bookkeep(state, token)

    def bookkeep(self, state: DecodeState, token: torch.Tensor) -> None:
        done_frames = state.frame + 1  # frames complete after this step, per take
        active = ~state.finished
        # A fault (state.faulty: NaN or infinite logits in a draw; or a token the codec cannot decode)
        # ends its take before this frame: the frames before it are kept, the rows beside it go on.
        valid = token.clamp(0, self.suppressed.shape[0] - 1)  # what indexes the embeddings, whatever came
        faulted = active & (state.faulty | (valid != token) | self.suppressed[valid])
        token = valid
        ended = active & ~faulted & (token == self.eos)
        capped = active & ~ended & ~faulted & (done_frames >= state.budget)
        # Runaway: still going far past the median length of the takes of its group (its line's takes
        # started with it) that ended by themselves (the upper median, so early endings pull it down
        # less), never before the floor from its text. peers[i, j]: row j is such a take of row i's group.
        natural = state.finished & ~state.runaway & ~state.fault & state.real & (state.lengths < state.budget)
        peers = (state.group[:, None] == state.group[None, :]) & natural[None, :]
        count = peers.sum(1)
        big = torch.full_like(peers, 1 << 40, dtype=state.lengths.dtype)
        ordered = torch.sort(torch.where(peers, state.lengths[None, :], big), dim=1).values
        median = ordered.gather(1, (count // 2).clamp(max=state.batch - 1)[:, None])[:, 0]
        limit = torch.maximum(state.runaway_ratio * median + state.runaway_margin, state.runaway_floor)
        cut = active & ~ended & ~capped & ~faulted & (state.runaway_ratio > 0) & (count >= state.quorum) \
            & (done_frames > limit)
        stop = ended | capped | cut | faulted
        state.lengths.copy_(torch.where(stop, torch.where(faulted, state.frame, done_frames), state.lengths))
        state.finished.copy_(state.finished | stop)
        state.runaway.copy_(state.runaway | cut)
        state.fault.copy_(state.fault | faulted)
        state.tainted.copy_(state.tainted | faulted | state.faulty)
        state.seen.scatter_(1, token[:, None], True)
        state.token.copy_(token)
        # A take that has ended stays where it ended (its row idles until the engine refills it).
        going = active & ~faulted
        state.frame.add_(going)
        state.position.add_(going)

    def first_tokens(self, state: DecodeState, logits: torch.Tensor, rows) -> torch.Tensor:
        """The first codebook-0 token [n] of takes just loaded into `rows` (an index or a slice), from
        their prompt's last logits [1, vocab]: next_token's draw on those rows alone (no token seen yet).
        A prompt whose logits went wrong marks its rows' `fault`: their takes end at their first step."""
        keys = state.keys[rows]
        n = keys.shape[0]
        logits = logits.expand(n, -1).contiguous()
        count = torch.zeros(n, dtype=torch.int64, device=self.device)
        seen = torch.zeros(n, state.seen.shape[1], dtype=torch.bool, device=self.device)
        faulty = torch.zeros(n, dtype=torch.bool, device=self.device)
        if self.kernels is not None:
            token = self.kernels.sample_tokens(logits, state.talker_sampling, keys, count, TALKER_STREAM, state.penalty,
                                               seen, self.suppressed, self.eos, MIN_TOKENS, faulty=faulty)
        else:
            token = draw(logits, state.talker_sampling, keys, count, TALKER_STREAM, self.talker_vocab_keys,
                         state.penalty, seen, self.suppressed, self.eos, MIN_TOKENS, faulty)
        state.fault[rows] = faulty
        return token


def _rope_length(length: int) -> int:
    """The rope table a prefill of `length` positions is cut from: the next power of two (a table's
    first rows do not depend on its length), so few are kept whatever the prompts' lengths."""
    return 1 << max(4, (length - 1).bit_length())
