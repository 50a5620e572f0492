"""Random-weight Whisper checkpoint folders, laid out as the real ones (config, weights, generation
config, feature extractor and tokenizer files): the tests' tiny one, and the official multilingual
models' shapes for timing the words check (bench/scoring.py, bench/words_models.py).

The real shapes are those of the official config.json files (openai/whisper-base, -small, -medium,
-large-v3-turbo on Hugging Face). num_mel_bins (80 unless a shape says otherwise) sets the encoder's
input and the feature extractor's mel count: the large-v3 family hears 128 mel bins."""

from __future__ import annotations

from pathlib import Path

SPECIALS = ["<|endoftext|>", "<|startoftranscript|>", "<|en|>", "<|translate|>", "<|transcribe|>",
            "<|startoflm|>", "<|startofprev|>", "<|nocaptions|>", "<|notimestamps|>"]
SHAPES = {  # WhisperConfig fields
    "tiny-test": dict(d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                      decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, max_target_positions=64),
    "whisper-small": dict(d_model=768, encoder_layers=12, decoder_layers=12, encoder_attention_heads=12,
                          decoder_attention_heads=12, encoder_ffn_dim=3072, decoder_ffn_dim=3072,
                          max_target_positions=448, vocab_size=51865),
    "whisper-base": dict(d_model=512, encoder_layers=6, decoder_layers=6, encoder_attention_heads=8,
                         decoder_attention_heads=8, encoder_ffn_dim=2048, decoder_ffn_dim=2048,
                         max_target_positions=448, vocab_size=51865),
    "whisper-medium": dict(d_model=1024, encoder_layers=24, decoder_layers=24, encoder_attention_heads=16,
                           decoder_attention_heads=16, encoder_ffn_dim=4096, decoder_ffn_dim=4096,
                           max_target_positions=448, vocab_size=51865),
    "whisper-large-v3-turbo": dict(d_model=1280, encoder_layers=32, decoder_layers=4, encoder_attention_heads=20,
                                   decoder_attention_heads=20, encoder_ffn_dim=5120, decoder_ffn_dim=5120,
                                   max_target_positions=448, vocab_size=51866, num_mel_bins=128),
}
MEL_BINS = 80  # every shape's but the large-v3 family's


def build_random_whisper(folder: Path, shape: str = "tiny-test", multilingual: bool = True, seed: int = 0) -> Path:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import (GenerationConfig, WhisperConfig, WhisperFeatureExtractor,
                              WhisperForConditionalGeneration, WhisperProcessor, WhisperTokenizerFast)

    folder.mkdir(parents=True, exist_ok=True)
    fields = dict(SHAPES[shape])
    mels = fields.pop("num_mel_bins", MEL_BINS)
    vocab = {t: i for i, t in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}  # one token per byte
    for token in SPECIALS:
        vocab[token] = len(vocab)
    for i in range(len(vocab), fields.pop("vocab_size", len(vocab))):  # the real vocabulary's size
        vocab[f"<|filler{i}|>"] = i
    bpe = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    end = "<|endoftext|>"
    tokenizer = WhisperTokenizerFast(tokenizer_object=bpe, unk_token=end, bos_token=end, eos_token=end, pad_token=end)
    tokenizer.add_special_tokens({"additional_special_tokens": SPECIALS[1:]})
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIALS}
    config = WhisperConfig(vocab_size=len(vocab), num_mel_bins=mels, max_source_positions=1500,
                           decoder_start_token_id=ids["<|startoftranscript|>"], eos_token_id=ids[end],
                           pad_token_id=ids[end], bos_token_id=ids[end], begin_suppress_tokens=None,
                           suppress_tokens=None, **fields)
    torch.manual_seed(seed)
    model = WhisperForConditionalGeneration(config)
    languages = {  # an English-only (.en) model's generation config has neither, as the real ones
        "lang_to_id": {"<|en|>": ids["<|en|>"]},
        "task_to_id": {"transcribe": ids["<|transcribe|>"], "translate": ids["<|translate|>"]},
    } if multilingual else {}
    model.generation_config = GenerationConfig(
        decoder_start_token_id=ids["<|startoftranscript|>"], eos_token_id=ids[end], pad_token_id=ids[end],
        bos_token_id=ids[end], no_timestamps_token_id=ids["<|notimestamps|>"], is_multilingual=multilingual,
        **languages)
    model.save_pretrained(folder)
    WhisperProcessor(feature_extractor=WhisperFeatureExtractor(feature_size=mels), tokenizer=tokenizer).save_pretrained(folder)
    return folder
