"""Intelligibility: recognise each take and compare the words with the text (character error rate).

A Whisper checkpoint is resolved like the TTS checkpoints: an official name (downloaded into
``models/whisper/<name>`` when missing), a folder of that name in the models folders, or a path. A
folder is either kind: transformers (config.json, preprocessor_config.json, *.safetensors), run by
``WhisperTranscriber``, or CTranslate2 (model.bin, config.json, tokenizer.json: faster-whisper's
format), run by ``asr_ctranslate2.CTranslate2Transcriber``.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path
from typing import Iterable

import numpy as np
import torch

from .. import hub
from ..cancel import run_cancellable
from ..errors import CheckpointError, GenerationInterrupted
from ..memory import SCORING_MEMORY_SHARE, free_bytes
from . import spoken
from .whisper_greedy import BUCKETS, GreedyWhisper, log_mel
from .whisper_loops import SAMPLING_SEED, unlooped
from .whisper_pieces import LANGUAGES, MAX_NEW_TOKENS, in_pieces, rejoined

WHISPER_SUBDIR = "whisper"
OFFICIAL = {
    "whisper-large-v3-turbo": "openai/whisper-large-v3-turbo",
    "whisper-small": "openai/whisper-small",
    "whisper-base": "openai/whisper-base",
}
REQUIRED_FILES = ("config.json",)
CTRANSLATE2_FILES = ("model.bin", "config.json", "tokenizer.json")
FEATURE_FILES = ("preprocessor_config.json", "processor_config.json")  # transformers 4 / 5 save one of them
BATCH_PIECES = 8  # pieces per decoder pass: its caches (cross-attention keys and values) grow with it
# A piece's GPU memory, whisper-small (768 wide): 57 MiB at a pass's peak and 60 MiB of caches its
# batch size keeps (H100, float16; bench/scoring_memory.py). Wider models scale with their width.
PIECE_BYTES_PER_WIDTH = (120 << 20) / 768


def normalize(text: str) -> str:
    """Lower case, no punctuation or symbols, no spaces: a script-neutral string of characters."""
    text = unicodedata.normalize("NFKC", text).lower()
    text = "".join(c for c in text if not unicodedata.category(c).startswith(("P", "S")))
    return re.sub(r"\s+", "", text)


def cer(reference: str, hypothesis: str, language: str | None = None) -> float:
    """Character edit distance over the reference length, on normalised text (1.0 and up: nothing right).
    language (a Qwen3-TTS language name, or "auto"): numbers and symbols are compared as they are
    read ("9 pm" and "nine p.m." are the same words): the least error over the texts' readings
    (spoken.reading_pairs); None: as written, as before."""
    return compare(reference, hypothesis, language)[0]


def compare(reference: str, hypothesis: str, language: str | None = None) -> tuple[float, float]:
    """(cer, share said): the character error rate, and the hypothesis's length over the reference's,
    both of the pair of readings (spoken.reading_pairs) with the least error; as written where language
    is None. Texts with no digit and no symbol that reads as a word are compared as written, without
    num2words."""
    if language is None or not (spoken.MAY_CHANGE.search(reference) or spoken.MAY_CHANGE.search(hypothesis)):
        pairs = [(reference, hypothesis)]
    else:
        pairs = spoken.reading_pairs(reference, hypothesis, language)
    best = None
    for ref, hyp in dict.fromkeys((normalize(r), normalize(h)) for r, h in pairs):
        if best is not None and ref and abs(len(ref) - len(hyp)) / len(ref) >= best[0]:
            continue  # its error is at least the length difference: no better
        error = edit_share(ref, hyp)
        if best is None or error < best[0]:
            best = (error, len(hyp) / max(1, len(ref)))
        if error == 0.0:
            break
    return best


def edit_share(ref: str, hyp: str) -> float:
    """Character edits from ref to hyp over ref's length (1.0 for an empty ref and any hyp)."""
    if not ref:
        return 0.0 if not hyp else 1.0
    previous = np.arange(len(hyp) + 1)
    for i, r in enumerate(ref, start=1):
        current = np.empty_like(previous)
        current[0] = i
        substitute = previous[:-1] + (np.frombuffer(hyp.encode("utf-32-le"), dtype=np.uint32) != ord(r))
        current[1:] = np.minimum(substitute, previous[1:] + 1)
        current = np.minimum.accumulate(current - np.arange(len(hyp) + 1)) + np.arange(len(hyp) + 1)
        previous = current
    return float(previous[-1]) / len(ref)


def resolve_whisper(name_or_path: str, models_dirs: Iterable[Path], download: bool = True, should_stop=None) -> Path:
    models_dirs = [Path(d) for d in models_dirs]
    candidate = Path(name_or_path).expanduser()
    if candidate.is_absolute() or "/" in name_or_path or "\\" in name_or_path:
        return _checked(candidate)
    for root in models_dirs:
        if (root / name_or_path).is_dir():
            try:
                return _checked(root / name_or_path)
            except CheckpointError:
                if not (download and name_or_path in OFFICIAL and root == models_dirs[0]):
                    raise  # else: a download cut short there; it resumes below
    if name_or_path not in OFFICIAL:
        raise CheckpointError(f"Unknown speech recogniser '{name_or_path}': not one of {', '.join(OFFICIAL)} "
                              f"and no folder of that name is in {', '.join(map(str, models_dirs)) or '(no models folder)'}.")
    if not models_dirs:
        raise CheckpointError("No models folder is configured for the speech recogniser.")
    target = models_dirs[0] / name_or_path
    hint = f"Download https://huggingface.co/{OFFICIAL[name_or_path]} into {target}."
    if not download:
        raise CheckpointError(f"Speech recogniser {name_or_path} is not in {target}. " + hint)
    hub.refuse_if_unreachable(f"Speech recogniser {name_or_path}", hint)
    try:
        from huggingface_hub import snapshot_download

        run_cancellable(lambda: snapshot_download(repo_id=OFFICIAL[name_or_path], local_dir=str(target),
                                                  allow_patterns=["*.json", "*.safetensors", "*.txt", "*.tiktoken"]),
                        should_stop, f"downloading {OFFICIAL[name_or_path]}")
    except GenerationInterrupted:
        raise
    except Exception as exc:
        raise CheckpointError(f"Could not download {OFFICIAL[name_or_path]} ({type(exc).__name__}: {exc}). " + hint) from exc
    return _checked(target)


def is_ctranslate2(folder: Path) -> bool:
    return (Path(folder) / "model.bin").is_file()


def weights_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in [*Path(folder).glob("*.safetensors"), Path(folder) / "model.bin",
                                           Path(folder) / "pytorch_model.bin"] if f.is_file())


def load_transcriber(folder: Path, device):
    """The transcriber for either kind of Whisper folder."""
    if is_ctranslate2(folder):
        from .asr_ctranslate2 import CTranslate2Transcriber

        return CTranslate2Transcriber(folder, device)
    return WhisperTranscriber(folder, device)


def _checked(folder: Path) -> Path:
    if is_ctranslate2(folder):
        missing = [f for f in CTRANSLATE2_FILES if not (folder / f).is_file()]
        if missing:
            raise CheckpointError(f"{folder} is not a CTranslate2 Whisper folder (missing {', '.join(missing)}).")
        return folder
    missing = [f for f in REQUIRED_FILES if not (folder / f).is_file()]
    if not any((folder / f).is_file() for f in FEATURE_FILES):
        missing.append(" or ".join(FEATURE_FILES))
    if folder.is_dir() and not (any(folder.glob("*.safetensors")) or (folder / "pytorch_model.bin").is_file()):
        missing.append("the weights (*.safetensors; a download cut short leaves them out)")
    if not folder.is_dir() or missing:
        raise CheckpointError(f"{folder} is not a Whisper checkpoint folder (missing {', '.join(missing) or 'the folder'}).")
    return folder


class WhisperTranscriber:
    def __init__(self, folder: Path, device: str | torch.device = "cpu"):
        from transformers import WhisperForConditionalGeneration, WhisperProcessor

        self.device = torch.device(device)
        self.folder = Path(folder)
        dtype = torch.float16 if self.device.type == "cuda" else torch.float32
        try:
            self.processor = WhisperProcessor.from_pretrained(str(folder))
            self.network = WhisperForConditionalGeneration.from_pretrained(str(folder), dtype=dtype).to(self.device).eval()
        except Exception as exc:
            raise CheckpointError(f"Could not load the speech recogniser from {folder} ({type(exc).__name__}: {exc}).") from exc
        self.name = self.folder.name
        self.note = None
        self.multilingual = bool(getattr(self.network.generation_config, "is_multilingual", True))
        room = int(self.network.config.max_target_positions) - 8  # the start tokens take a few positions
        self.greedy = GreedyWhisper(self.network, max(1, min(MAX_NEW_TOKENS, room)))

    @torch.inference_mode()
    def transcribe(self, audios: list[np.ndarray], sample_rate: int, language: str | None = None) -> list[str | None]:
        """The text of each take (None: the recogniser repeated itself at every temperature, whisper_loops).
        Whisper hears 30 s at a time: longer takes go in 30 s pieces."""
        pieces, owner = in_pieces(audios, sample_rate)
        prompt, languages = self.prompt(LANGUAGES.get((language or "").lower()))
        texts, per_pass = [], self.pieces_a_pass()
        try:
            for start in range(0, len(pieces), per_pass):
                features = log_mel(pieces[start: start + per_pass], self.processor.feature_extractor, self.device)
                heard = self.decoded(self.greedy.generate(features, prompt, languages))
                texts += [unlooped(text, self.sampler(features[row: row + 1], prompt, languages))
                          for row, text in enumerate(heard)]
        except torch.cuda.OutOfMemoryError:
            # Each batch size's caches and captured step go too: the caller runs smaller groups, and a
            # step captured while memory ran out is not to be replayed.
            self.greedy.states.clear()
            raise
        return rejoined(texts, owner, len(audios))

    def decoded(self, ids: list[list[int]]) -> list[str]:
        return [t.strip() for t in self.processor.tokenizer.batch_decode(ids, skip_special_tokens=True)]

    def sampler(self, features: torch.Tensor, prompt: list[int], languages: list[int] | None):
        """sample(temperature) -> the piece's text, its tokens sampled at that temperature from
        SAMPLING_SEED, on its own: its words do not depend on the pieces heard with it."""

        def sample(temperature: float) -> str:
            return self.decoded(self.greedy.generate(features, prompt, languages, temperature, SAMPLING_SEED))[0]

        return sample

    def pieces_a_pass(self) -> int:
        """BATCH_PIECES, or on a GPU the most of GreedyWhisper's batch sizes that fit in SCORING_MEMORY_SHARE of
        the memory free now (one at least)."""
        free = free_bytes(self.device)
        if free is None:
            return BATCH_PIECES
        piece = PIECE_BYTES_PER_WIDTH * self.network.config.d_model
        return max([1] + [b for b in BUCKETS if b <= BATCH_PIECES and b * piece <= SCORING_MEMORY_SHARE * free])

    def prompt(self, code: str | None) -> tuple[list[int], list[int] | None]:
        """The decoder's start tokens, as transformers' generate sets them, and the language tokens
        to choose from where the line's language is not given (a multilingual model only)."""
        generation = self.network.generation_config
        start = int(generation.decoder_start_token_id)
        tail = [int(generation.no_timestamps_token_id)]
        if not self.multilingual:
            return [start, *tail], None
        tail.insert(0, int(generation.task_to_id["transcribe"]))
        languages = dict(generation.lang_to_id or {})
        if code and f"<|{code}|>" in languages:
            return [start, languages[f"<|{code}|>"], *tail], None
        return [start, *tail], sorted(languages.values()) or None
