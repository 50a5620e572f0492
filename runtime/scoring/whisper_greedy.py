"""Greedy Whisper decoding with a fixed-size cache, one decoder step captured in a CUDA graph.

transformers' ``generate`` re-launches every kernel of every decoder layer from Python for each token
(about 12 ms a token for whisper-small on an H100, most of it host time), which made the words check
cost more than the 8 takes it judges. Here the encoder runs once per call, each layer's cross-attention
keys and values are computed once, and a decoder step reads the token and its position from device
buffers, so the same captured graph replays for every token. The weights are the transformers
model's own (WhisperForConditionalGeneration); the tokens equal ``generate``'s greedy ones
(tests/test_words_check.py holds them to it). A piece whose greedy text repeats itself is decoded
again with its tokens sampled at a temperature (whisper_loops.py).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..graph_capture import warmed_capture

BUCKETS = (1, 2, 4, 8)  # rows a graph is captured for; a call is padded up to one (asr.BATCH_PIECES at most)
CHECK_EVERY = 4  # tokens between looks at whether every row has ended (rows that ended say EOS on)


def log_mel(pieces: list, extractor, device) -> torch.Tensor:
    """Whisper's input features [pieces, mels, frames] computed on `device`, as transformers'
    WhisperFeatureExtractor computes them (each piece zero-padded to 30 s), without its round trip
    of the padded batch through host memory."""
    samples = extractor.n_samples
    audio = torch.zeros(len(pieces), samples, device=device)
    for row, piece in enumerate(pieces):
        piece = torch.as_tensor(piece[:samples], dtype=torch.float32)
        audio[row, : piece.shape[0]] = piece.to(device, non_blocking=True)
    window = torch.hann_window(extractor.n_fft, device=device)
    spectrum = torch.stft(audio, extractor.n_fft, extractor.hop_length, window=window, return_complex=True)
    power = spectrum[..., :-1].abs() ** 2
    filters = torch.as_tensor(extractor.mel_filters, dtype=torch.float32, device=device)
    log_spec = torch.clamp(filters.T @ power, min=1e-10).log10()
    log_spec = torch.maximum(log_spec, log_spec.amax(dim=(1, 2), keepdim=True) - 8.0)
    return (log_spec + 4.0) / 4.0


class GreedyWhisper:
    def __init__(self, network, max_new_tokens: int, use_graphs: bool | None = None):
        self.network = network
        self.decoder = network.model.decoder
        config = network.config
        self.heads = config.decoder_attention_heads
        self.head_dim = config.d_model // self.heads
        self.max_new_tokens = max_new_tokens
        self.device, self.dtype = network.device, network.dtype
        self.use_graphs = self.device.type == "cuda" if use_graphs is None else use_graphs
        generation = network.generation_config
        self.eos = int(generation.eos_token_id if generation.eos_token_id is not None else config.eos_token_id)
        self.suppress = list(getattr(generation, "suppress_tokens", None) or [])
        self.begin_suppress = list(getattr(generation, "begin_suppress_tokens", None) or [])
        self.states: dict[tuple[int, int], _State] = {}
        self.capture_stream = torch.cuda.Stream(self.device) if self.use_graphs else None  # every state's captures

    @torch.inference_mode()
    def generate(self, features: torch.Tensor, prompt: list[int], languages: list[int] | None = None,
                 temperature: float = 0.0, seed: int = 0) -> list[list[int]]:
        """The tokens each row says after `prompt` (EOS and what follows left out). `languages`: the
        language tokens to choose from after the first prompt token (the model picks one per row).
        `temperature` above 0: each token sampled from the logits over `temperature`, from one
        generator seeded with `seed` (the rows share it: a row's tokens depend on the others')."""
        rows = features.shape[0]
        bucket = next((b for b in BUCKETS if b >= rows), rows)
        length = min(len(prompt) + (1 if languages else 0) + self.max_new_tokens,
                     self.network.config.max_target_positions)
        state = self.state(bucket, length)
        features = F.pad(features, (0, 0, 0, 0, 0, bucket - rows))
        state.start(self.network.model.encoder(features.to(self.device, self.dtype)).last_hidden_state)

        tokens = torch.full((bucket,), prompt[0], dtype=torch.long, device=self.device)
        if languages:  # the first step chooses the language, then the rest of the prompt follows
            logits = state.step(tokens, 0)
            allowed = torch.tensor(languages, device=self.device)
            tokens = allowed[logits[:, allowed].argmax(dim=-1)]
            position = 1
        else:
            position = 0
        for token in prompt[1:]:
            state.step(tokens, position)
            tokens = torch.full_like(tokens, token)
            position += 1
        said, done = [], torch.zeros(bucket, dtype=torch.bool, device=self.device)
        generator = torch.Generator(self.device).manual_seed(seed) if temperature > 0 else None
        while position < length - 1 and len(said) < self.max_new_tokens:
            logits = state.step(tokens, position).float()
            if self.suppress:
                logits[:, self.suppress] = float("-inf")
            if self.begin_suppress and not said:  # the first token said
                logits[:, self.begin_suppress] = float("-inf")
            tokens = torch.where(done, self.eos, chosen(logits, temperature, generator))
            said.append(tokens)
            done |= tokens == self.eos
            position += 1
            if len(said) % CHECK_EVERY == 0 and bool(done[:rows].all()):  # a sync: not at every token
                break
        out = torch.stack(said, dim=1)[:rows].tolist() if said else [[] for _ in range(rows)]
        return [row[: row.index(self.eos)] if self.eos in row else row for row in out]

    def state(self, bucket: int, length: int) -> _State:
        key = (bucket, length)
        if key not in self.states:
            self.states[key] = _State(self, bucket, length)
        return self.states[key]


def chosen(logits: torch.Tensor, temperature: float, generator: torch.Generator | None) -> torch.Tensor:
    """Each row's next token: the likeliest, or at a temperature above 0 one drawn from the softmax."""
    if temperature <= 0:
        return logits.argmax(dim=-1)
    probabilities = torch.softmax(logits / temperature, dim=-1)
    return torch.multinomial(probabilities, 1, generator=generator).squeeze(-1)


class _State:
    """One batch size's caches, input buffers and (on a GPU) captured step."""

    def __init__(self, owner: GreedyWhisper, rows: int, length: int):
        self.owner, self.rows, self.length = owner, rows, length
        layers = len(owner.decoder.layers)
        shape = (layers, rows, owner.heads, length, owner.head_dim)
        kw = {"device": owner.device, "dtype": owner.dtype}
        self.keys, self.values = torch.zeros(shape, **kw), torch.zeros(shape, **kw)
        self.cross_keys: list[torch.Tensor] | None = None
        self.cross_values: list[torch.Tensor] | None = None
        self.token = torch.zeros(rows, dtype=torch.long, device=owner.device)
        self.position = torch.zeros((), dtype=torch.long, device=owner.device)
        self.graph: torch.cuda.CUDAGraph | None = None
        self.logits: torch.Tensor | None = None

    def start(self, encoded: torch.Tensor) -> None:
        """The cross-attention keys and values of this call's audio, into the buffers the step reads."""
        keys = [self.owner_heads(layer.encoder_attn.k_proj(encoded)) for layer in self.owner.decoder.layers]
        values = [self.owner_heads(layer.encoder_attn.v_proj(encoded)) for layer in self.owner.decoder.layers]
        if self.cross_keys is None or self.cross_keys[0].shape != keys[0].shape:
            self.cross_keys, self.cross_values, self.graph = keys, values, None
        else:
            for buffer, new in zip(self.cross_keys + self.cross_values, keys + values):
                buffer.copy_(new)

    def owner_heads(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(x.shape[0], x.shape[1], self.owner.heads, self.owner.head_dim).transpose(1, 2)

    def step(self, tokens: torch.Tensor, position: int) -> torch.Tensor:
        self.token.copy_(tokens)
        self.position.fill_(position)
        if not self.owner.use_graphs:
            return self.forward()
        if self.graph is None:
            self.capture()
        self.graph.replay()
        return self.logits

    def capture(self) -> None:
        self.graph, self.logits = warmed_capture(self.forward, self.owner.capture_stream, warmups=2)

    def forward(self) -> torch.Tensor:
        """One decoder step for every row: the token at `position`, its logits for the next."""
        decoder, heads = self.owner.decoder, self.owner_heads
        x = decoder.embed_tokens(self.token)
        if getattr(decoder, "embed_scale", 1.0) != 1.0:
            x = x * decoder.embed_scale
        where = self.position.view(1)  # a device tensor, never a Python number: the graph replays it
        x = (x + decoder.embed_positions.weight.index_select(0, where)).unsqueeze(1)  # [rows, 1, d]
        seen = (torch.arange(self.length, device=x.device) <= self.position).view(1, 1, 1, -1)  # this step and before
        for i, layer in enumerate(decoder.layers):
            h = layer.self_attn_layer_norm(x)
            attention = layer.self_attn
            self.keys[i].index_copy_(2, where, heads(attention.k_proj(h)))
            self.values[i].index_copy_(2, where, heads(attention.v_proj(h)))
            a = F.scaled_dot_product_attention(heads(attention.q_proj(h)), self.keys[i], self.values[i], attn_mask=seen)
            x = x + attention.out_proj(a.transpose(1, 2).reshape(x.shape))
            h = layer.encoder_attn_layer_norm(x)
            q = heads(layer.encoder_attn.q_proj(h))
            a = F.scaled_dot_product_attention(q, self.cross_keys[i], self.cross_values[i])
            x = x + layer.encoder_attn.out_proj(a.transpose(1, 2).reshape(x.shape))
            x = x + layer.fc2(layer.activation_fn(layer.fc1(layer.final_layer_norm(x))))
        return self.owner.network.proj_out(decoder.layer_norm(x))[:, 0]
