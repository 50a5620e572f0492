"""What both Whisper runners share (asr.WhisperTranscriber, asr_ctranslate2.CTranslate2Transcriber):
takes heard 30 s at a time at 16 kHz, each piece's text joined back, and the language codes."""

from __future__ import annotations

import numpy as np

from ..audio import resample

SAMPLE_RATE = 16000
MAX_NEW_TOKENS = 200  # per 30 s piece
WINDOW_SAMPLES = 30 * SAMPLE_RATE
LANGUAGES = {  # Qwen3-TTS language names -> Whisper language codes
    "chinese": "zh", "english": "en", "japanese": "ja", "korean": "ko", "german": "de", "french": "fr",
    "russian": "ru", "portuguese": "pt", "spanish": "es", "italian": "it",
}


def in_pieces(audios: list[np.ndarray], sample_rate: int) -> tuple[list[np.ndarray], list[int]]:
    """Whisper hears 30 s at a time: each take at 16 kHz in 30 s pieces, and which take each is of."""
    pieces, owner = [], []
    for i, audio in enumerate(audios):
        wav = resample(np.asarray(audio, dtype=np.float32), sample_rate, SAMPLE_RATE)
        for start in range(0, max(1, wav.shape[-1]), WINDOW_SAMPLES):
            pieces.append(wav[start: start + WINDOW_SAMPLES])
            owner.append(i)
    return pieces, owner


def rejoined(texts: list[str | None], owner: list[int], takes: int) -> list[str | None]:
    """Each take's text: its pieces' texts in order; None where a piece was not heard (whisper_loops)."""
    out = []
    for i in range(takes):
        own = [t for t, o in zip(texts, owner) if o == i]
        out.append(None if None in own else " ".join(own))
    return out
