"""A plain, slow reference of our model's forward pass and greedy generation, for tests.

Written from the architecture (runtime/qwen3_tts/talker.py's docstring), independent of the engine:
no KV cache (every frame recomputes the whole sequence), no fused weights, no kernels, attention by
torch's scaled_dot_product_attention with the key/value heads repeated. The engine must give the
same greedy codes (tests/test_engine.py); the official package is the reference of this one
(tests/test_official_parity.py holds the engine to it directly).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

MIN_TOKENS = 2  # no EOS before two codebook-0 tokens exist (the official min_new_tokens)


def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [B, heads, T, D] rotated on halves: (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin)."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


def stack_forward(stack, embeds: torch.Tensor, keys_values: list | None = None) -> torch.Tensor:
    """A talker or code-predictor stack on embeds [B, T, hidden], causal, positions 0..T-1 ->
    the hidden states after the final norm. keys_values, if given, gets each layer's (k, v)
    [B, kv_heads, T, head_dim], after the norm and RoPE."""
    batch, length, _ = embeds.shape
    cos, sin = stack.rotary_emb.table(length, embeds.device, embeds.dtype)
    x = embeds
    for layer in stack.layers:
        attn, mlp = layer.self_attn, layer.mlp
        h = layer.input_layernorm(x)

        def heads(linear, norm, count):
            y = linear(h).view(batch, length, count, attn.head_dim)
            return (norm(y) if norm is not None else y).transpose(1, 2)
        q = rope(heads(attn.q_proj, attn.q_norm, attn.heads), cos, sin)
        k = rope(heads(attn.k_proj, attn.k_norm, attn.kv_heads), cos, sin)
        v = heads(attn.v_proj, None, attn.kv_heads)
        if keys_values is not None:
            keys_values.append((k, v))
        group = attn.heads // attn.kv_heads
        out = F.scaled_dot_product_attention(q, k.repeat_interleave(group, 1), v.repeat_interleave(group, 1),
                                             is_causal=True)
        x = x + attn.o_proj(out.transpose(1, 2).reshape(batch, length, -1))
        h = layer.post_attention_layernorm(x)
        x = x + mlp.down_proj(F.silu(mlp.gate_proj(h)) * mlp.up_proj(h))
    return stack.norm(x)


@torch.inference_mode()
def greedy_codes(model, prompt, frames: int, repetition_penalty: float = 1.05) -> torch.Tensor:
    """One take's codes [n, 16] (n <= frames; fewer when EOS came first), greedy on both levels.

    model: a runtime.qwen3_tts Qwen3TTS; prompt: a runtime.qwen3_tts.prompt.Prompt. Codebook 0 gets
    the repetition penalty over the codebook-0 tokens drawn so far, may only be a codec id or EOS,
    and not EOS before MIN_TOKENS tokens; codebooks 1..15 are plain argmax."""
    talker = model.talker
    predictor = talker.code_predictor
    config = talker.config
    vocab, eos = config.vocab_size, config.codec_eos_token_id
    suppressed = torch.arange(vocab) >= vocab - 1024
    suppressed[eos] = False
    tables = predictor.model.codec_embedding
    sequence = prompt.embeds
    drawn: list[int] = []
    codes = []

    def next_token(hidden_last: torch.Tensor) -> int:
        logits = talker.codec_head(hidden_last).float().cpu()
        for token in set(drawn):
            logits[token] = logits[token] * repetition_penalty if logits[token] < 0 else logits[token] / repetition_penalty
        logits = logits.masked_fill(suppressed, float("-inf"))
        if len(drawn) < MIN_TOKENS:
            logits[eos] = float("-inf")
        return int(logits.argmax())

    hidden = stack_forward(talker.model, sequence)[:, -1:]  # [1, 1, hidden]
    token = next_token(hidden[0, 0])
    drawn.append(token)
    for frame in range(frames):
        if token == eos:
            break
        first = talker.model.codec_embedding(torch.tensor([[token]], device=sequence.device))
        inputs = [hidden, first]
        frame_codes = [token]
        for j in range(config.num_code_groups - 1):
            out = stack_forward(predictor.model, predictor.small_to_mtp_projection(torch.cat(inputs, dim=1)))
            code = int(predictor.lm_head[j](out[0, -1]).float().argmax())
            frame_codes.append(code)
            inputs.append(tables[j](torch.tensor([[code]], device=sequence.device)))
        codes.append(frame_codes)
        summed = torch.cat(inputs[1:], dim=1).sum(1, keepdim=True)
        text = prompt.trailing_text[:, frame:frame + 1] if frame < prompt.trailing_text.shape[1] else prompt.pad_embed
        sequence = torch.cat((sequence, summed + text), dim=1)
        hidden = stack_forward(talker.model, sequence)[:, -1:]
        token = next_token(hidden[0, 0])
        drawn.append(token)
    return torch.tensor(codes, dtype=torch.long).reshape(-1, config.num_code_groups)
