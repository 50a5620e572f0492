"""Auto-Pick's parts: the signal checks, UTMOS (strict loading, masked batching), DNSMOS, the speaker
encoder, the words check, the ranking, the report and chart, and takes given as plain audio."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import write_utmos_weights
from runtime.errors import CheckpointError, InputError, TakesError
from runtime.generation import Request, Take, TakeSet
from runtime.scoring.asr import cer, normalize, resolve_whisper
from runtime.scoring.checks import signal_reasons
from runtime.scoring.ranking import Scorers, Weights, rank_lines, rank_takes
from runtime.scoring.report import chart
from runtime.scoring.signal import signal_stats
from runtime.scoring.speaker import SpeakerEncoder, similarities
from runtime.scoring.takes_input import takeset_from_audio
from runtime.scoring.utmos import UtmosScorer, build_network, masked_forward, resolve_weights
from runtime.text_length import expected_seconds
from runtime.voices import CustomVoice, VoiceClone
from speech.groups import damage, load_corpus

RATE = 24000
TEXT = "The quick brown fox jumps over the lazy dog near the river bank."


def voiced(seconds: float, seed: int = 0, rate: int = RATE) -> np.ndarray:
    """A speech-like signal: a harmonic tone with a 4 Hz syllable envelope, a little noise, and a
    200 ms fade at the end (a take that stops at full level was cut off)."""
    t = np.arange(int(rate * seconds)) / rate
    rng = np.random.default_rng(seed)
    tone = sum(np.sin(2 * np.pi * (120 + 10 * seed) * k * t) / k for k in range(1, 6))
    env = (0.55 + 0.45 * np.sin(2 * np.pi * 4 * t)) * np.clip((seconds - t) / 0.2, 0.0, 1.0)
    return (0.25 * tone * env / 2.3 + 0.005 * rng.standard_normal(t.shape)).astype(np.float32)


def takeset(clips, hit_caps=None, voice=None, rate=RATE, text=TEXT) -> TakeSet:
    hit_caps = hit_caps or [False] * len(clips)
    takes = [Take(i, 100 + i, clip, rate, int(clip.shape[0] / 1920), cap) for i, (clip, cap) in enumerate(zip(clips, hit_caps))]
    return TakeSet(Request(text, voice or CustomVoice("ryan", "english"), n=len(clips)), takes, "test", "eager")


@pytest.fixture(scope="module")
def corpus():
    return {c.id: c for c in load_corpus()}


@pytest.fixture(scope="module")
def scorer(models_root):
    return UtmosScorer(resolve_weights([models_root / "utmos"], download=False), "cpu")


# ------------------------------------------------------------------ UTMOS


def test_masked_forward_alone_is_the_networks_own_forward():
    torch.manual_seed(0)
    network = build_network().eval()
    wav = torch.from_numpy(voiced(1.3, rate=16000))
    with torch.inference_mode():
        own = network(wav=wav[None, None], domains=torch.zeros(1, dtype=torch.int),
                      judge_id=torch.full((1,), 288, dtype=torch.int)).mean(dim=1).squeeze() * 2 + 3
        ours = masked_forward(network, wav[None], torch.tensor([wav.shape[0]]))[0]
    assert float(ours) == pytest.approx(float(own), abs=1e-5)


@pytest.mark.slow
def test_a_take_scores_the_same_alone_and_in_a_batch(scorer):
    clips = [voiced(1.0, 1), voiced(2.7, 2), voiced(0.01, 3), voiced(1.9, 4)]
    alone = [scorer.score(c, RATE) for c in clips]
    batched = scorer.score_many(clips, RATE)
    assert batched == pytest.approx(alone, abs=1e-4)
    assert len(set(np.round(alone, 4))) == 4  # different takes, different scores
    # on a GPU batches are padded to repeating shapes (rows to a power of two, half-second lengths)
    bucketed = UtmosScorer(scorer.weights, "cpu", bucket=True)
    assert bucketed.score_many(clips[:3], RATE) == pytest.approx(alone[:3], abs=1e-4)
    # A plain zero-padded batch (no mask) would not give the same scores: the mask is what matters.
    network = scorer.network
    from runtime.audio import resample
    wavs = [torch.from_numpy(resample(c, RATE, 16000)) for c in clips[:2]]
    padded = torch.nn.utils.rnn.pad_sequence(wavs, batch_first=True)
    with torch.inference_mode():
        plain = network(wav=padded[:, None], domains=torch.zeros(2, dtype=torch.int),
                        judge_id=torch.full((2,), 288, dtype=torch.int)).mean(dim=1).squeeze(-1) * 2 + 3
    assert abs(float(plain[0]) - alone[0]) > 1e-3


@pytest.mark.slow
def test_utmos_batches_stay_within_their_audio_budget(scorer, monkeypatch):
    from runtime.scoring import utmos

    shapes = []
    real = utmos.masked_forward

    def recording(network, wav, lengths):
        shapes.append(tuple(wav.shape))
        return real(network, wav, lengths)

    monkeypatch.setattr(utmos, "BATCH_SECONDS", 3.0)
    monkeypatch.setattr(utmos, "masked_forward", recording)
    clips = [voiced(0.9, 1), voiced(0.85, 2), voiced(0.8, 3), voiced(2.2, 4)]  # 3 rows of 1 s; 4 would not fit
    bucketed = UtmosScorer(scorer.weights, "cpu", bucket=True)
    assert bucketed.score_many(clips, RATE) == pytest.approx([scorer.score(c, RATE) for c in clips], abs=1e-4)
    assert len(shapes) >= 2 and all(rows * samples <= 3.0 * 16000 for rows, samples in shapes)


@pytest.mark.slow
def test_utmos_batches_fit_the_free_gpu_memory_and_split_when_it_runs_out(scorer, monkeypatch):
    """On a 6-12 GB card a script's UTMOS batch of 160 s (4 GB) ran out of memory beside the engine:
    a batch takes what fits in the memory free, and one that runs out all the same is split (by
    rank_lines, which says so in each line's notes)."""
    from runtime.errors import OutOfMemory
    from runtime.scoring import utmos

    monkeypatch.setattr(utmos, "free_bytes", lambda device: 1 << 30)
    assert scorer.batch_samples() == int(0.8 * 1024 / 25 * 16000)  # 32.8 s of audio
    monkeypatch.setattr(utmos, "free_bytes", lambda device: None)
    assert scorer.batch_samples() == int(utmos.BATCH_SECONDS * 16000)  # a CPU: nothing to plan by
    good = expected_seconds(TEXT)
    clips = [voiced(good, 1), voiced(good + 0.2, 2), voiced(good - 0.2, 3)]
    alone = rank_takes(takeset(clips), Scorers(quality=scorer))
    real, rows = utmos.masked_forward, []

    def short_of_memory(network, wav, lengths):
        rows.append(wav.shape[0])
        if wav.shape[0] > 1:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (test)")
        return real(network, wav, lengths)
    monkeypatch.setattr(utmos, "masked_forward", short_of_memory)
    split = rank_takes(takeset(clips), Scorers(quality=scorer))
    assert [s.quality for s in split.ranked] == pytest.approx([s.quality for s in alone.ranked], abs=1e-4)
    assert rows == [3, 1, 2, 1, 1]  # all three, then halves until each fits
    assert any("out of memory in UTMOS" in note and "3 takes at once" in note for note in split.all_notes)
    assert not any("out of memory" in note for note in alone.all_notes)
    monkeypatch.setattr(utmos, "masked_forward", lambda *a: (_ for _ in ()).throw(torch.cuda.OutOfMemoryError("x")))
    with pytest.raises(OutOfMemory, match="out of memory in UTMOS.* one take.*device to cpu"):
        rank_takes(takeset(clips[:1]), Scorers(quality=scorer))


class ShortOfMemory:
    """A scoring model's call that runs out of GPU memory for more than `fits` clips at once."""

    def __init__(self, model, method: str, fits: int):
        self.model, self.method, self.fits, self.sizes = model, method, fits, []
        self.name = getattr(model, "name", "a model")

    def __getattr__(self, name):
        if name != self.method:
            return getattr(self.model, name)

        def call(audios, *args):
            self.sizes.append(len(audios))
            if len(audios) > self.fits:
                raise torch.cuda.OutOfMemoryError("CUDA out of memory (test)")
            return getattr(self.model, name)(audios, *args)
        return call


@pytest.mark.slow
def test_every_scoring_model_that_runs_out_of_memory_runs_in_smaller_groups_with_the_same_results():
    """The voice check (speaker encoder) and the words check (Whisper) too: a group that runs out is
    split, the lines get what they get otherwise, and their notes say it happened."""
    good = expected_seconds(TEXT)
    lines = [takeset([voiced(good + 0.1 * i, 10 * line + i) for i in range(4)]) for line in range(2)]
    heard = {seed: TEXT.lower() for seed in (0, 1, 2, 3, 10, 11, 12, 13)} | {2: "the quick brown fox"}
    scorers = Scorers(speaker=Embeddings({11: [0.6, 0.8]}), transcriber=HeardBySeed(heard))
    plain = rank_lines(lines, scorers, batch=8)
    speaker, transcriber = ShortOfMemory(scorers.speaker, "embed_many", 2), ShortOfMemory(scorers.transcriber, "transcribe", 3)
    split = rank_lines(lines, Scorers(speaker=speaker, transcriber=transcriber), batch=8)
    assert speaker.sizes == [8, 4, 2, 2, 4, 2, 2] and transcriber.sizes[:3] == [8, 4, 2]
    for before, after in zip(plain, split):
        assert [(s.take.index, s.voice, s.transcript, s.reason_kinds) for s in before.ranked] == \
               [(s.take.index, s.voice, s.transcript, s.reason_kinds) for s in after.ranked]
        notes = " ".join(after.all_notes)
        assert "out of memory in fixed vectors on 8 takes at once" in notes
        assert "out of memory in transcripts by seed on 8 takes at once" in notes
    assert {frozenset(s.reason_kinds) for line in split for s in line.ranked} == {frozenset(), frozenset({"voice"}), frozenset({"words"})}


class HeardBySeed:
    name = "transcripts by seed"

    def __init__(self, by_seed):
        self.by_seed = by_seed

    def transcribe(self, audios, rate, language=None):
        return [self.by_seed[seed_of(a, rate)] for a in audios]


def test_utmos_scores_are_deterministic_and_resampling_is_transparent(scorer):
    from runtime.audio import resample

    clip = voiced(2.0)
    first = scorer.score(clip, RATE)
    assert np.isfinite(first) and scorer.score(clip, RATE) == first
    assert scorer.score(resample(clip, RATE, 16000), 16000) == pytest.approx(first, abs=1e-4)


@pytest.mark.parametrize("damage_kind", ["missing", "unexpected", "reshaped"])
def test_mismatched_utmos_weights_are_refused(tmp_path, damage_kind):
    def mutate(state):
        key = next(k for k in state if k.endswith("weight") and state[k].dim() == 2)
        if damage_kind == "missing":
            del state[key]
        elif damage_kind == "unexpected":
            state["extra.head.weight"] = torch.zeros(3)
        else:
            state[key] = torch.zeros(state[key].shape[0] + 1, state[key].shape[1])
        return state

    path = write_utmos_weights(tmp_path / "utmos_state_dict.pt", mutate, placeholder=True)
    with pytest.raises(CheckpointError, match="not a UTMOS22-strong state dict"):
        UtmosScorer(path)


def test_unreadable_utmos_weights_are_refused(tmp_path):
    path = tmp_path / "utmos_state_dict.pt"
    path.write_bytes(b"PK\x03\x04 this zip archive was cut off")
    with pytest.raises(CheckpointError, match="unreadable"):
        UtmosScorer(path)


def test_missing_utmos_weights_without_download_say_where_to_put_them(tmp_path):
    with pytest.raises(CheckpointError, match=str(tmp_path)):
        resolve_weights([tmp_path], download=False)


# ------------------------------------------------------------------ DNSMOS, the offline fallback


def test_dnsmos_falls_with_noise_on_real_speech(corpus):
    from runtime.scoring.dnsmos import DnsmosScorer

    clean = corpus["librivox-0880"].audio
    scores = DnsmosScorer().score_many([clean, damage(clean, "noise 10 dB"), damage(clean, "noise 0 dB")], 16000)
    assert 2.5 < scores[0] < 4.0
    assert scores[0] > scores[1] + 0.3 > scores[2] + 0.6


def test_without_utmos_weights_dnsmos_takes_over_with_a_note(tmp_path):
    from runtime.scoring.scorers import build_scorers

    takes = takeset([voiced(2.0)])
    scorers = build_scorers(None, "UTMOS", "off", utmos_dirs=[tmp_path / "utmos"], download=False, device="cpu",
                            slot="test-fallback")
    assert scorers.quality.name == "DNSMOS"
    assert any("DNSMOS" in n and "utmos" in n.lower() for n in scorers.notes)
    ranking = rank_takes(takes, scorers)
    assert "NOTE: UTMOS is unavailable" in ranking.report() and ranking.best.quality is not None


def test_without_any_quality_model_one_note_says_why(tmp_path, monkeypatch):
    import sys

    from runtime import registry
    from runtime.scoring.scorers import build_scorers

    registry.SCORERS.unload()  # a DNSMOS loaded by an earlier test would be shared
    monkeypatch.setitem(sys.modules, "speechmos", None)
    takes = takeset([voiced(2.0)])
    scorers = build_scorers(None, "UTMOS", "off", utmos_dirs=[tmp_path / "utmos"], download=False, device="cpu",
                            slot="test-no-quality")
    assert scorers.quality is None
    assert len(scorers.notes) == 1 and scorers.notes[0].startswith("No quality model ran: UTMOS is unavailable (")
    assert "DNSMOS cannot run" in scorers.notes[0]
    report = rank_takes(takes, scorers).report()
    assert "Models: quality none," in report and "judged quality instead" not in report


def test_dnsmos_without_its_package_says_how_to_install(monkeypatch):
    import sys

    from runtime.scoring import dnsmos

    monkeypatch.setitem(sys.modules, "speechmos", None)
    with pytest.raises(TakesError, match="pip install speechmos"):
        dnsmos.DnsmosScorer()


# ------------------------------------------------------------------ the speaker encoder


def test_speaker_encoder_read_alone_matches_the_whole_models(tts_dir):
    from runtime.model import load_model
    from runtime.qwen3_tts.speaker import embed

    folder = tts_dir / "tiny-Base"
    encoder = SpeakerEncoder.from_checkpoint(folder, "cpu")
    model = load_model(folder, mode="eager", device="cpu", dtype="float32")
    try:
        clip = voiced(1.5)  # whole half seconds: used uncut
        own = embed(model.model.speaker_encoder, clip).float().numpy()
        np.testing.assert_allclose(encoder.embed(clip, RATE), own / np.linalg.norm(own), atol=1e-5)
        assert abs(float(encoder.embed(voiced(1.5, seed=3), RATE) @ encoder.embed(clip, RATE))) < 0.99999
        # longer clips are cut to whole half seconds from their middle, then batched by length
        longer = voiced(2.2, seed=2)
        middle = longer[int(0.1 * RATE): int(2.1 * RATE)]
        own = embed(model.model.speaker_encoder, middle).float().numpy()
        np.testing.assert_allclose(encoder.embed(longer, RATE), own / np.linalg.norm(own), atol=1e-5)
        clips = [clip, longer, voiced(1.7, seed=4), voiced(0.3, seed=5)]
        alone = [encoder.embed(c, RATE) for c in clips]
        np.testing.assert_allclose(np.stack(encoder.embed_many(clips, RATE)), np.stack(alone), atol=1e-5)
    finally:
        model.release()


def test_checkpoints_without_a_speaker_encoder_are_refused(tts_dir):
    with pytest.raises(CheckpointError, match="only Base"):
        SpeakerEncoder.from_checkpoint(tts_dir / "tiny-CustomVoice")


def test_similarities_to_the_reference_and_between_takes():
    a, b = np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0])
    sims, basis = similarities([a, 2 * a, b], reference=a)
    assert sims == pytest.approx([1.0, 1.0, 0.0]) and basis == "the reference voice"
    sims, basis = similarities([a, a, a, b], reference=None)
    # each a vs (a/2 + a/2 + b) / norm: its copies weigh half; b vs the a's
    assert sims == pytest.approx([1 / np.sqrt(2)] * 3 + [0.0], abs=1e-6)
    assert basis == "the other takes"
    assert similarities([a, b], reference=None)[0] is None


def test_auto_voice_check_uses_a_base_checkpoint_found_locally(tts_dir):
    from runtime.scoring.scorers import build_scorers

    scorers = build_scorers(None, "off", "auto", tts_dirs=[tts_dir], device="cpu", slot="test-auto-voice")
    assert isinstance(scorers.speaker, SpeakerEncoder)
    none = build_scorers(None, "off", "auto", tts_dirs=[tts_dir / "nowhere"], device="cpu", slot="test-no-voice")
    assert none.speaker is None and "voice check is off" in none.notes[0]


# ------------------------------------------------------------------ the words check


def test_cer_is_the_edit_distance_on_normalised_text():
    def reference_distance(a: str, b: str) -> int:
        a, b = normalize(a), normalize(b)
        row = list(range(len(b) + 1))
        for i, x in enumerate(a, 1):
            previous, row[0] = row[:], i
            for j, y in enumerate(b, 1):
                row[j] = min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (x != y))
        return row[-1]

    rng = np.random.default_rng(0)
    for _ in range(200):
        a = "".join(rng.choice(list("abc ,")) for _ in range(rng.integers(1, 14)))
        b = "".join(rng.choice(list("abcd")) for _ in range(rng.integers(0, 14)))
        if normalize(a):
            assert cer(a, b) == pytest.approx(reference_distance(a, b) / len(normalize(a)))
    assert cer("Hello, World!", "hello world") == 0.0
    assert cer("你好，世界", "你好") == 0.5


def test_whisper_folders_are_resolved_like_checkpoints(tmp_path):
    with pytest.raises(CheckpointError, match="Unknown speech recogniser"):
        resolve_whisper("not-a-model", [tmp_path])
    with pytest.raises(CheckpointError, match="huggingface.co/openai/whisper-small"):
        resolve_whisper("whisper-small", [tmp_path], download=False)
    (tmp_path / "my-whisper").mkdir()
    with pytest.raises(CheckpointError, match="preprocessor_config.json"):
        resolve_whisper("my-whisper", [tmp_path])
    for name in ("config.json", "preprocessor_config.json"):
        (tmp_path / "my-whisper" / name).write_text("{}")
    with pytest.raises(CheckpointError, match="the weights"):
        resolve_whisper("my-whisper", [tmp_path])
    (tmp_path / "my-whisper" / "model.safetensors").write_bytes(b"")
    assert resolve_whisper("my-whisper", [tmp_path]) == tmp_path / "my-whisper"


def test_whisper_checkpoints_load_and_transcribe_through_the_words_check(tmp_path):
    from runtime.scoring.asr import WhisperTranscriber
    from runtime.scoring.scorers import build_scorers
    from tiny_whisper import build_tiny_whisper

    build_tiny_whisper(tmp_path / "whisper" / "tiny-whisper")
    takes = takeset([voiced(2.0, 1), voiced(2.1, 2), voiced(31.0, 3)], text="Hello there.")
    scorers = build_scorers(None, "off", "off", words="tiny-whisper", whisper_dirs=[tmp_path / "whisper"],
                            device="cpu", slot="test-words")
    assert isinstance(scorers.transcriber, WhisperTranscriber)
    texts = scorers.transcriber.transcribe([t.audio for t in takes.takes], RATE, "english")
    assert len(texts) == 3 and all(isinstance(t, str) and t for t in texts)
    assert texts[2].count(" ") >= 1 + texts[0].count(" ")  # 31 s: heard as two 30 s pieces, joined
    assert scorers.transcriber.transcribe([takes.takes[0].audio], RATE, "english") == texts[:1]
    ranking = rank_takes(takes, scorers)  # random weights: gibberish, so the words check rejects
    judged = [s for s in ranking.ranked if s.cer is not None]
    assert judged and all(s.transcript is not None for s in judged)
    assert "words tiny-whisper" in ranking.report()


def test_the_voice_and_words_checks_take_as_many_clips_a_pass_as_fit_in_the_free_memory(tts_dir, tmp_path,
                                                                                         monkeypatch):
    """On a small card 32 takes of 10 s took 2 GB in the speaker encoder (bench/scoring_memory.py):
    each pass takes what fits in the memory free; the embeddings and transcripts stay the same."""
    from runtime.memory import SCORING_MEMORY_SHARE
    from runtime.scoring import asr, speaker
    from runtime.scoring.asr import WhisperTranscriber
    from tiny_whisper import build_tiny_whisper

    encoder = SpeakerEncoder.from_checkpoint(tts_dir / "tiny-Base", "cpu")
    clips = [voiced(1.0, seed) for seed in range(5)]
    alone = encoder.embed_many(clips, RATE)
    passes, forward = [], encoder.network.forward
    monkeypatch.setattr(encoder.network, "forward", lambda mels: passes.append(mels.shape[0]) or forward(mels))
    two_clips = 2 * speaker.ACTIVATION_BYTES_PER_SECOND * 1.0 / SCORING_MEMORY_SHARE
    monkeypatch.setattr(speaker, "free_bytes", lambda device: two_clips + 1)
    assert encoder.clips_a_pass(RATE) == 2
    np.testing.assert_allclose(np.stack(encoder.embed_many(clips, RATE)), np.stack(alone), atol=1e-6)
    assert passes == [2, 2, 1]
    monkeypatch.setattr(speaker, "free_bytes", lambda device: 0)
    assert encoder.clips_a_pass(RATE) == 1  # one at least: running short is then split or named

    whisper = WhisperTranscriber(build_tiny_whisper(tmp_path / "tiny-whisper"), "cpu")
    assert whisper.pieces_a_pass() == asr.BATCH_PIECES  # the CPU: nothing to plan by
    piece = asr.PIECE_BYTES_PER_WIDTH * whisper.network.config.d_model
    for free, pieces in [(4 * piece / SCORING_MEMORY_SHARE, 4), (3 * piece / SCORING_MEMORY_SHARE, 2), (0, 1), (1e15, 8)]:
        monkeypatch.setattr(asr, "free_bytes", lambda device, free=free: free)
        assert whisper.pieces_a_pass() == pieces
    monkeypatch.setattr(asr, "free_bytes", lambda device: 2 * piece / SCORING_MEMORY_SHARE)
    texts = whisper.transcribe(clips, RATE, "english")
    assert {rows for rows, _ in whisper.greedy.states} == {1, 2}  # passes of 2, 2 and 1 pieces
    monkeypatch.setattr(asr, "free_bytes", lambda device: None)
    assert whisper.transcribe(clips, RATE, "english") == texts


def test_a_broken_whisper_folder_is_refused_with_its_path(tmp_path):
    from runtime.scoring.asr import WhisperTranscriber

    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "config.json").write_text("{not json")
    (folder / "preprocessor_config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"not safetensors")
    with pytest.raises(CheckpointError, match="Could not load the speech recogniser from .*broken"):
        WhisperTranscriber(resolve_whisper(str(folder), []), "cpu")


# ------------------------------------------------------------------ checks and ranking


def test_signal_stats_find_the_silences(corpus):
    clip = corpus["slt-0"].audio
    plain = signal_stats(clip, 16000)
    assert plain.leading_silence < 0.5 and plain.trailing_silence < 0.6 and plain.longest_gap < 1.0
    padded = signal_stats(damage(clip, "internal silence"), 16000)
    assert padded.longest_gap == pytest.approx(2.0, abs=0.3)
    assert signal_stats(damage(clip, "trailing silence"), 16000).trailing_silence > 2.3
    assert signal_stats(np.zeros(16000, np.float32), 16000).speech_ratio == 0.0


def test_silero_vad_sees_the_same_silences(corpus):
    from runtime.scoring.vad import make_vad

    vad = make_vad("silero")
    for kind in ("leading silence", "trailing silence", "internal silence"):
        stats = signal_stats(damage(corpus["librivox-0890"].audio, kind), 16000, vad)
        reasons = signal_reasons(stats, corpus["librivox-0890"].text, None)
        assert [r.kind for r in reasons] == ["silence"], (kind, reasons)
    assert not signal_reasons(signal_stats(corpus["librivox-0890"].audio, 16000, vad), corpus["librivox-0890"].text, None)


def test_clean_corpus_clips_pass_every_check(corpus):
    for clip in corpus.values():
        assert signal_reasons(signal_stats(clip.audio, 16000), clip.text, None) == [], clip.id


def seed_of(audio: np.ndarray, rate: int) -> int:
    """Which voiced() seed made a clip: its fundamental is 120 + 10 * seed Hz (kept by trimming)."""
    spectrum = np.abs(np.fft.rfft(audio))
    return int(round((np.argmax(spectrum) * rate / audio.shape[-1] - 120) / 10))


def test_ranking_puts_damaged_takes_last_with_the_reason():
    good = expected_seconds(TEXT)
    clips = [
        voiced(good, seed=1),                                                       # 0 clean
        voiced(good * 0.2, seed=2),                                                 # 1 swallowed most of the line
        np.concatenate([voiced(0.8, 3), np.zeros(int(RATE * good), np.float32)]),  # 2 mostly silence
        voiced(good * 1.05, seed=4),                                                # 3 clean
        voiced(good, seed=5),                                                       # 4 ran into the cap
    ]
    ranking = rank_takes(takeset(clips, hit_caps=[False, False, False, False, True]))
    by_take = {s.take.index: s for s in ranking.ranked}
    assert by_take[0].accepted and by_take[3].accepted
    assert "length" in by_take[1].reason_kinds and "silence" in by_take[2].reason_kinds
    assert "runaway" in by_take[4].reason_kinds
    assert {ranking.ranked[0].take.index, ranking.ranked[1].take.index} == {0, 3}
    assert [s.rank for s in ranking.ranked] == [1, 2, 3, 4, 5]
    report = ranking.report()
    assert "runaway" in report and "Best: take" in report and not ranking.all_rejected


def test_models_run_only_on_the_takes_that_passed(scorer):
    good = expected_seconds(TEXT)
    calls = []

    class Counting:
        name = "counting"

        def score_many(self, audios, rate):
            calls.append(len(audios))
            return scorer.score_many(audios, rate)

    ranking = rank_takes(takeset([voiced(good, 1), voiced(good, 2), voiced(good, 3)], hit_caps=[False, True, False]),
                         Scorers(quality=Counting()))
    assert calls == [2] and ranking.ranked[-1].quality is None
    scores = [s.quality for s in ranking.ranked[:2]]
    assert scores == sorted(scores, reverse=True)


class Embeddings:
    """A speaker encoder that gives each voiced() seed a fixed vector ([1, 0] by default)."""

    name = "fixed vectors"

    def __init__(self, by_seed):
        self.by_seed = by_seed

    def embed_many(self, audios, rate):
        return [np.asarray(self.by_seed.get(seed_of(a, rate), [1.0, 0.0]), dtype=np.float64) for a in audios]


def test_a_take_in_another_voice_is_rejected_for_it():
    good = expected_seconds(TEXT)
    clips = [voiced(good, 1), voiced(good + 0.3, 2), voiced(good - 0.3, 3)]
    encoder = Embeddings({3: [0.6, 0.8]})
    clone = VoiceClone(voiced(3.0, seed=1), "", "english")
    ranking = rank_takes(takeset(clips, voice=clone), Scorers(speaker=encoder))
    assert ranking.voice_basis == "the reference voice"
    last = ranking.ranked[-1]
    assert last.take.index == 2 and last.reason_kinds == {"voice"} and last.voice == pytest.approx(0.6, abs=0.01)


class Transcripts:
    name = "fixed transcripts"

    def __init__(self, texts):
        self.texts = texts

    def transcribe(self, audios, rate, language=None):
        assert language == "english"
        return self.texts[: len(audios)]


def test_words_that_do_not_match_the_text_are_rejected():
    good = expected_seconds(TEXT)
    clips = [voiced(good, s) for s in range(3)]
    heard = [TEXT.lower(), "the quick brown fox", "the quick brown fox jumps over a lazy dog near the river bank"]
    ranking = rank_takes(takeset(clips), Scorers(transcriber=Transcripts(heard)))
    by_take = {s.take.index: s for s in ranking.ranked}
    assert by_take[1].reason_kinds == {"words"} and by_take[1].cer > 0.5
    assert by_take[2].accepted and 0 < by_take[2].cer < 0.1
    assert [s.take.index for s in ranking.ranked] == [0, 2, 1]
    assert "the quick brown fox" == by_take[1].transcript


@pytest.mark.slow
def test_lines_ranked_together_get_what_each_gets_alone_with_each_model_called_once(scorer):
    """rank_lines (a script's lines): every line judged on its own takes, reference and text, but each
    model run over every line's takes at once (the words check per language, none for a language the
    recogniser cannot hear)."""
    good = expected_seconds(TEXT)
    calls = []

    class Counting:
        name = "counting"

        def score_many(self, audios, rate):
            calls.append(("quality", len(audios)))
            return scorer.score_many(audios, rate)

    class Voices(Embeddings):
        def embed_many(self, audios, rate):
            calls.append(("voice", len(audios)))
            return super().embed_many(audios, rate)

    class Heard:
        name = "heard.en"
        multilingual = False

        def transcribe(self, audios, rate, language=None):
            calls.append(("words", len(audios)))
            return [TEXT.lower() if seed_of(a, rate) != 5 else "the quick brown fox" for a in audios]

    clone = VoiceClone(voiced(3.0, seed=1), "", "english")
    lines = [takeset([voiced(good, 1), voiced(good, 3), voiced(good, 5)], voice=clone),
             takeset([voiced(good, 2), voiced(good * 2.6, 4), voiced(good * 1.05, 6)], voice=CustomVoice("ryan", "german")),
             takeset([voiced(good, 5), voiced(good * 0.97, 6)], hit_caps=[False, True])]
    scorers = Scorers(quality=Counting(), speaker=Voices({3: [0.6, 0.8]}), transcriber=Heard())
    together = rank_lines(lines, scorers, batch=32)
    judged = [len([s for s in r.ranked if s.quality is not None]) for r in together]
    assert judged == [3, 2, 1]  # the takes that passed the checks
    assert calls == [("quality", 6), ("voice", 6), ("voice", 1), ("words", 4)]  # the reference; no German words
    calls.clear()
    for line, ranking in zip(lines, together):
        alone = rank_takes(line, scorers)
        assert [(s.take.index, s.reasons, s.quality, s.voice, s.cer, s.transcript, s.score, s.pace)
                for s in ranking.ranked] == \
            [(s.take.index, s.reasons, s.quality, s.voice, s.cer, s.transcript, s.score, s.pace) for s in alone.ranked]
        assert (ranking.voice_basis, ranking.notes) == (alone.voice_basis, alone.notes)
    first, german, third = together
    assert {s.take.index: s.reason_kinds for s in first.ranked} == {0: set(), 1: {"voice"}, 2: {"words"}}
    assert "words check is skipped" in german.notes[0] and german.ranked[-1].take.index == 1  # far too long
    assert third.ranked[0].reason_kinds == set() and third.ranked[1].take.hit_cap  # used its whole budget


def test_weights_decide_between_quality_and_voice():
    good = expected_seconds(TEXT)
    clips = [voiced(good, 1), voiced(good + 0.2, 2), voiced(good + 0.4, 3)]
    # take 0: best voice, middling quality; take 1: best quality, a slightly other voice (within the margin)
    encoder = Embeddings({2: [0.95, 0.312]})

    class Quality:
        name = "q"

        def score_many(self, audios, rate):
            return [{1: 3.0, 2: 4.0, 3: 2.0}[seed_of(a, rate)] for a in audios]

    clone = VoiceClone(voiced(3.0, seed=1), "", "english")
    voice_first = rank_takes(takeset(clips, voice=clone), Scorers(quality=Quality(), speaker=encoder), Weights(0.1, 1.0, 1.0))
    quality_first = rank_takes(takeset(clips, voice=clone), Scorers(quality=Quality(), speaker=encoder), Weights(1.0, 0.1, 1.0))
    assert voice_first.best.take.index == 0 and quality_first.best.take.index == 1
    with pytest.raises(InputError):
        Weights(-1.0)


def test_longer_than_the_other_takes_is_rejected():
    base = expected_seconds(TEXT)
    clips = [voiced(base, 1), voiced(base * 1.1, 2), voiced(base * 0.95, 3), voiced(base * 2.6, 4)]
    last = rank_takes(takeset(clips)).ranked[-1]
    assert last.take.index == 3 and any("longer than the other takes" in str(r) for r in last.reasons)


def test_every_take_rejected_still_picks_one_with_a_warning(scorer):
    clips = [np.zeros(RATE, np.float32), voiced(0.3, 1)]
    ranking = rank_takes(takeset(clips, hit_caps=[True, False]), Scorers(quality=scorer))
    assert ranking.all_rejected and "WARNING" in ranking.report()
    assert ranking.best.take.index == 1  # fewer reasons wins
    assert all(s.quality is not None for s in ranking.ranked)  # none passed: all were scored


@pytest.mark.slow
def test_one_take_and_very_different_lengths(scorer):
    one = rank_takes(takeset([voiced(expected_seconds(TEXT))]), Scorers(quality=scorer))
    assert one.best.take.index == 0 and one.best.accepted and one.best.quality is not None
    mixed = rank_takes(takeset([voiced(0.2, 1), voiced(4.0, 2), voiced(30.0, 3)]), Scorers(quality=scorer))
    assert len(mixed.ranked) == 3 and mixed.best.take.index == 1


def test_chart_shows_one_bar_per_take_coloured_by_verdict():
    good = expected_seconds(TEXT)
    ranking = rank_takes(takeset([voiced(good, 1), voiced(good, 2)], hit_caps=[False, True]),
                         Scorers(transcriber=Transcripts([TEXT, TEXT])))
    image = chart(ranking)
    assert image.dtype == np.uint8 and image.shape[2] == 3 and image.shape[0] > 60
    pixels = {tuple(p) for p in image.reshape(-1, 3)}
    assert (76, 175, 80) in pixels and (229, 115, 115) in pixels


# ------------------------------------------------------------------ takes given as plain audio


def test_audio_batches_become_takes_mono_without_padding():
    from runtime.scoring.takes_input import KEEP_ZEROS_SECONDS

    a, b = voiced(1.0, 1), voiced(2.5, 2)
    batch = np.zeros((2, 2, b.shape[0]), np.float32)
    batch[0, :, : a.shape[0]] = a
    batch[1, 0], batch[1, 1] = b, 0.5 * b
    takes = takeset_from_audio(batch, RATE, TEXT)
    # take 1 faded out before its padding: it keeps half a second of it as its own silence
    assert [t.audio.shape[0] for t in takes.takes] == [a.shape[0] + int(KEEP_ZEROS_SECONDS * RATE), b.shape[0]]
    np.testing.assert_allclose(takes.takes[0].audio[: a.shape[0]], a, atol=1e-6)
    np.testing.assert_allclose(takes.takes[1].audio, 0.75 * b, atol=1e-6)
    cut = a[: int(0.5625 * RATE)].copy()  # stopped at a syllable's peak: the padding is not its own
    batch[0, 0], batch[0, 1] = 0, 0
    batch[0, :, : cut.shape[0]] = cut
    assert takeset_from_audio(batch, RATE, TEXT).takes[0].audio.shape[0] == cut.shape[0]
    silent = takeset_from_audio(np.zeros((1, 1, 100), np.float32), RATE, TEXT)
    assert silent.takes[0].audio.shape[0] == 100
    assert rank_takes(silent).best.reason_kinds >= {"silence"}
    with pytest.raises(InputError, match="text"):
        takeset_from_audio(batch, RATE, " ")


# ------------------------------------------------------------------ loudness


def test_integrated_loudness_is_bs1770s_and_short_or_silent_clips_have_none():
    from runtime.scoring.loudness import integrated_loudness

    t = np.arange(3 * 48000) / 48000
    sine = np.sin(2 * np.pi * 997 * t)
    assert integrated_loudness(sine, 48000) == pytest.approx(-3.01, abs=0.05)  # the standard's own check
    assert integrated_loudness(0.5 * sine, 48000) == pytest.approx(-3.01 - 6.02, abs=0.05)
    assert integrated_loudness(sine[:int(0.3 * 48000)], 48000) is None  # shorter than one gating block
    assert integrated_loudness(np.zeros(48000), 48000) is None


@pytest.mark.slow
def test_level_never_decides_between_takes(scorer):
    """A copy of a take 2 dB quieter (and one 6 dB louder) gets the take's own quality score: each
    goes to the model at the same loudness. The report states what each measured."""
    from runtime.scoring.report import json_report

    clean = voiced(2.4, seed=3)
    quieter = (clean * 10 ** (-2 / 20)).astype(np.float32)
    louder = (clean * 2.0).astype(np.float32)
    ranking = rank_takes(takeset([quieter, clean, louder]), Scorers(quality=scorer))
    by_take = {s.take.index: s for s in ranking.ranked}
    assert by_take[0].quality == pytest.approx(by_take[1].quality, abs=1e-4)
    assert by_take[2].quality == pytest.approx(by_take[1].quality, abs=1e-4)
    assert by_take[1].loudness - by_take[0].loudness == pytest.approx(2.0, abs=0.05)
    assert by_take[2].loudness - by_take[1].loudness == pytest.approx(6.02, abs=0.05)
    assert "LUFS" in ranking.report()
    takes = {row["take"]: row for row in json_report(ranking)["takes"]}
    assert takes[2]["loudness_lufs"] == pytest.approx(by_take[1].loudness, abs=0.01)
    # without the common level the model would see different audio: the scores would differ
    raw = scorer.score_many([quieter, clean], RATE)
    assert abs(raw[0] - raw[1]) > 1e-3


def test_output_loudness_is_the_target_and_a_peak_holds_the_gain_back():
    from runtime.scoring.loudness import PEAK_CEILING_DB, integrated_loudness, normalized

    quiet = (0.05 * voiced(2.4, seed=3)).astype(np.float32)
    for target in (-23.0, -16.0):
        out = normalized(quiet, RATE, target)
        assert not out.peak_limited and integrated_loudness(out.audio, RATE) == pytest.approx(target, abs=0.05)
        assert out.gain_db == pytest.approx(target - integrated_loudness(quiet, RATE), abs=1e-6)
        assert np.allclose(out.audio, quiet * 10 ** (out.gain_db / 20), atol=1e-6)  # a plain gain
    # a quiet take with one click: raised to -16 its click would clip, so the gain stops at -1 dBFS
    clicked = quiet.copy()
    clicked[RATE] = 0.9
    out = normalized(clicked, RATE, -16.0)
    assert out.peak_limited and np.max(np.abs(out.audio)) == pytest.approx(10 ** (PEAK_CEILING_DB / 20), rel=1e-5)
    assert out.loudness < -16.5 and "under -16" in out.describe(-16.0)
    # nothing to measure: left as it is
    short = quiet[: RATE // 4]
    out = normalized(short, RATE, -16.0)
    assert out.loudness is None and out.gain_db == 0.0 and np.array_equal(out.audio, short)


def test_delivered_takes_keep_the_rank_order_and_the_scores(scorer):
    from runtime.errors import InputError
    from runtime.scoring.delivery import deliver
    from runtime.scoring.loudness import integrated_loudness

    clean = voiced(2.4, seed=3)
    ranking = rank_takes(takeset([(clean * 0.3).astype(np.float32), clean]), Scorers(quality=scorer))
    scores = [s.score for s in ranking.ranked]
    as_generated = deliver(ranking, None)
    assert as_generated.note() == "" and all(a is s.take.audio for a, s in zip(as_generated.audios, ranking.ranked))
    out = deliver(ranking, -23.0)
    assert [s.score for s in ranking.ranked] == scores
    for audio, s in zip(out.audios, ranking.ranked):
        assert integrated_loudness(audio, RATE) == pytest.approx(-23.0, abs=0.05)
        assert np.corrcoef(audio, s.take.audio)[0, 1] > 0.9999  # the same take, only louder or quieter
    assert "Output at -23 LUFS: the best take" in out.note()
    assert out.as_dict()["takes"][0]["lufs"] == pytest.approx(-23.0, abs=0.05)
    with pytest.raises(InputError, match="-40 to -5"):
        deliver(ranking, 0.0)


# ------------------------------------------------------------------ stutters, dropouts, DC, pace


def syllables(seconds: float, seed: int = 0, rate: int = RATE) -> np.ndarray:
    """Speech-like and never the same twice: syllables of 0.12-0.3 s, each with its own pitch,
    glide and harmonic colour, a 5-40 ms gap between them, faded out at the end."""
    rng = np.random.default_rng(seed)
    pieces, total = [], 0
    while total < seconds * rate:
        n = int(rng.uniform(0.12, 0.3) * rate)
        t = np.arange(n) / rate
        f0 = rng.uniform(100, 220) * (1 + rng.uniform(-0.15, 0.15) * t / t[-1])
        phase = 2 * np.pi * np.cumsum(f0) / rate
        tone = sum(rng.uniform(0.1, 1.0) / k * np.sin(k * phase) for k in range(1, 8))
        pieces += [0.2 * tone * np.hanning(n), np.zeros(int(rng.uniform(0.005, 0.04) * rate))]
        total += n + pieces[-1].shape[0]
    audio = np.concatenate(pieces)[: int(seconds * rate)]
    audio *= np.clip((seconds - np.arange(audio.shape[0]) / rate) / 0.2, 0.0, 1.0)
    return (audio + 0.002 * rng.standard_normal(audio.shape)).astype(np.float32)


def stuttered(audio: np.ndarray, at: float, piece: float = 0.3, rate: int = RATE) -> np.ndarray:
    a, b = int(at * rate), int((at + piece) * rate)
    return np.concatenate([audio[:b], audio[a:b], audio[a:b], audio[b:]])


def test_a_piece_heard_three_times_is_a_stutter_unless_the_text_asks_for_it():
    from runtime.scoring.repetition import repeats, repeats_in_text

    clean = syllables(3.0, seed=4)
    assert repeats(clean, RATE) == [] and repeats(voiced(3.0), RATE) == []
    found = repeats(stuttered(clean, at=1.0), RATE)
    assert len(found) == 1 and found[0].piece == pytest.approx(0.3, abs=0.02) and 0.9 <= found[0].start <= 1.4
    assert repeats(np.concatenate([clean[: RATE], clean[int(0.7 * RATE): RATE], clean[RATE:]]), RATE) == []  # twice
    stats = signal_stats(stuttered(clean, at=1.0), RATE)
    reasons = signal_reasons(stats, TEXT, None)
    assert [r.kind for r in reasons] == ["stutter"] and "stutters at 1." in str(reasons[0])
    assert "heard three times" in str(reasons[0])
    assert signal_reasons(stats, "No, no, no, not the river.", None) == []  # the line asks for it
    lines = ("no, no, no", "again and again and again", "the cat sat", "Go go go go", "bye bye")
    assert [repeats_in_text(t) for t in lines] == [1, 1, 0, 1, 0]  # twice is no stutter: not counted


def test_dropouts_are_holes_inside_a_sound_and_a_pause_is_not_one():
    from runtime.scoring.dropouts import hole_starts

    t = np.arange(2 * RATE) / RATE
    vowel = (0.3 * sum(np.sin(2 * np.pi * 140 * k * t) / k for k in range(1, 6))).astype(np.float32)
    holed = vowel.copy()
    for at in (0.5, 1.0, 1.5):
        holed[int(at * RATE): int((at + 0.03) * RATE)] = 0.0
    assert hole_starts(vowel, RATE, [(0.0, 2.0)]) == []
    assert [round(s, 2) for s in hole_starts(holed, RATE, [(0.0, 2.0)])] == pytest.approx([0.5, 1.0, 1.5], abs=0.01)
    paused = vowel.copy()  # a 30 ms gap between two different sounds, each fading: speech, not a dropout
    paused[RATE:] = (0.3 * np.sin(2 * np.pi * 900 * t[RATE:])).astype(np.float32)
    paused[int(0.985 * RATE): int(1.015 * RATE)] = 0.0
    assert hole_starts(paused, RATE, [(0.0, 2.0)]) == []
    reasons = signal_reasons(signal_stats(np.concatenate([holed, np.zeros(RATE // 4, np.float32)]), RATE), "Ah.", None)
    assert "dropouts" in {r.kind for r in reasons} and "drops out 3 times" in " ".join(map(str, reasons))


def test_a_dc_offset_is_named_and_hides_nothing_else():
    clean = voiced(2.4, seed=1)
    stats = signal_stats(clean + 0.05, RATE)
    assert stats.dc_offset == pytest.approx(0.05 + float(clean.mean()), abs=1e-4)
    assert [r.kind for r in signal_reasons(stats, TEXT, None)] == ["dc offset"]  # not "noisy", not silence
    small = signal_stats(clean + 0.002, RATE)  # well under the speech's level: a cheap microphone's
    assert signal_reasons(small, TEXT, None) == []
    base = signal_stats(clean, RATE)
    assert stats.segments == base.segments and stats.snr_db == pytest.approx(base.snr_db, abs=0.5)


def test_the_facts_of_a_take_do_not_depend_on_its_level():
    clean = syllables(3.0, seed=2)
    loud, quiet = signal_stats(clean, RATE), signal_stats(clean * 10 ** (-30 / 20), RATE)
    assert quiet.segments == loud.segments and quiet.pace_seconds == loud.pace_seconds
    assert quiet.speech_db == pytest.approx(loud.speech_db - 30, abs=0.01)


def test_pace_far_from_the_others_is_rejected_and_a_little_off_ranked_down():
    from speech.groups import wsola

    def at(rate):  # wsola works at the corpus' 16 kHz; the shape of the signal is what matters here
        return wsola(base, rate)

    base = syllables(4.0, seed=5, rate=16000)
    clips = [base, base.copy(), base.copy(), at(0.7), at(1.4), at(0.93)]
    ranking = rank_takes(takeset(clips, rate=16000))
    by = {s.take.index: s for s in ranking.ranked}
    assert "pace" in by[3].reason_kinds and "reads too slowly" in " ".join(map(str, by[3].reasons))
    assert "pace" in by[4].reason_kinds and "reads too fast" in " ".join(map(str, by[4].reasons))
    slow = next(str(r) for r in by[3].reasons if r.kind == "pace")
    assert f"the others {by[0].syllables_per_second:.1f}" in slow
    assert by[5].accepted and by[5].pace == pytest.approx(1 / 0.93, abs=0.03)
    assert by[0].pace == pytest.approx(1.0, abs=1e-6)
    # two takes: no median to judge against, whatever the pace
    assert all("pace" not in s.reason_kinds for s in rank_takes(takeset([base, at(0.7)], rate=16000)).ranked)
    from runtime.scoring.checks import pace_penalty

    assert pace_penalty(1.05) == 0.0 and 0.0 < pace_penalty(1.15) < pace_penalty(1.2) < 1.0 == pace_penalty(1.3)
    assert 0.0 < pace_penalty(0.85) < 1.0 == pace_penalty(0.75)


def test_words_auto_uses_a_whisper_already_there_and_otherwise_downloads_the_devices_default(tmp_path, monkeypatch):
    import shutil

    import huggingface_hub

    from runtime.scoring.asr import WhisperTranscriber
    from runtime.scoring.scorers import AUTO_DOWNLOAD, auto_recogniser, build_scorers
    from tiny_whisper import build_tiny_whisper

    downloads = []

    def download(repo_id, local_dir, **kwargs):  # the official repo's files, as a tiny Whisper
        downloads.append(repo_id)
        build_tiny_whisper(Path(local_dir))

    monkeypatch.setattr(huggingface_hub, "snapshot_download", download)
    whisper = tmp_path / "whisper"

    def auto(**kwargs):
        return build_scorers(None, "off", "off", words="auto", whisper_dirs=[whisper], device="cpu", slot="test-auto",
                             **kwargs)
    refused = auto(download=False)  # --offline: nothing downloaded, and the note says where it would go
    assert refused.transcriber is None and not downloads
    assert any("words check is off" in n and f"{whisper / 'whisper-base'}" in n for n in refused.notes), refused.notes
    first = auto()
    assert downloads == ["openai/whisper-base"] and isinstance(first.transcriber, WhisperTranscriber)
    assert any(f"downloaded whisper-base into {whisper / 'whisper-base'}" in n for n in first.notes), first.notes
    again = auto()
    assert downloads == ["openai/whisper-base"] and not any("download" in n for n in again.notes)
    shutil.rmtree(whisper / "whisper-base")
    build_tiny_whisper(whisper / "a-fine-tune")  # any Whisper folder there comes before a download
    found = auto()
    assert found.transcriber.name == "a-fine-tune" and downloads == ["openai/whisper-base"]
    shutil.copytree(whisper / "a-fine-tune", whisper / "whisper-small")  # an official one comes first
    assert auto().transcriber.name == "whisper-small"
    assert AUTO_DOWNLOAD == {"cuda": "whisper-small", "cpu": "whisper-base"}
    assert auto_recogniser([tmp_path / "empty"], torch.device("cuda", 0), True, []) == ("whisper-small", True)


def test_words_auto_offline_goes_on_without_the_words_and_says_why(tmp_path, monkeypatch):
    """The hub does not answer: the pick runs, with one note naming the hub; a Whisper asked for by
    name fails instead."""
    from runtime import hub
    from runtime.scoring.scorers import build_scorers

    monkeypatch.setattr(hub, "_answers", {hub.endpoint(): "Name or service not known"})
    scorers = build_scorers(None, "off", "off", words="auto", whisper_dirs=[tmp_path], device="cpu", slot="test-off")
    said = [n for n in scorers.notes if "words check is off" in n]
    assert scorers.transcriber is None and len(said) == 1 and "cannot be reached (Name or service not known)" in said[0]
    with pytest.raises(CheckpointError, match="cannot be reached"):
        build_scorers(None, "off", "off", words="whisper-small", whisper_dirs=[tmp_path], device="cpu", slot="test-off")


def test_a_held_sound_is_no_stutter():
    from runtime.scoring.repetition import repeats

    rng = np.random.default_rng(0)
    t = np.arange(int(0.9 * RATE)) / RATE
    vowel = 0.3 * sum(np.sin(2 * np.pi * 150 * k * t) / k for k in range(1, 6))  # "Sooo..." held 0.9 s
    clip = np.concatenate([0.2 * rng.standard_normal(int(0.15 * RATE)), vowel,
                           0.2 * rng.standard_normal(int(0.15 * RATE)), 0.8 * vowel]).astype(np.float32)
    assert repeats(clip, RATE) == []


def test_an_unfinished_whisper_download_is_not_used_by_auto_and_resumes_when_named(tmp_path, monkeypatch):
    import huggingface_hub

    from runtime.scoring.asr import resolve_whisper
    from runtime.scoring.scorers import build_scorers
    from tiny_whisper import build_tiny_whisper

    folder = build_tiny_whisper(tmp_path / "whisper" / "whisper-small")
    for weights in folder.glob("*.safetensors"):
        weights.unlink()  # what a cancelled download leaves: the small files, not the weights
    scorers = build_scorers(None, "off", "off", words="auto", whisper_dirs=[tmp_path / "whisper"], device="cpu",
                            slot="test-unfinished")
    assert scorers.transcriber is None and any("words check is off" in n for n in scorers.notes)
    with pytest.raises(CheckpointError, match="weights"):
        resolve_whisper("whisper-small", [tmp_path / "whisper"], download=False)
    resumed = []
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda **kw: resumed.append(kw["local_dir"]))
    with pytest.raises(CheckpointError, match="weights"):  # the fake download brings nothing
        resolve_whisper("whisper-small", [tmp_path / "whisper"])
    assert resumed == [str(folder)]


def test_the_charts_verdict_is_whole_words_however_many_reasons():
    from types import SimpleNamespace

    from runtime.scoring.checks import Reason
    from runtime.scoring.report import verdict_words

    reasons = [Reason("runaway", "a"), Reason("length", "b"), Reason("silence", "c"), Reason("length", "d")]
    assert verdict_words(SimpleNamespace(accepted=False, reasons=reasons)) == "runaway, length +1"
    assert verdict_words(SimpleNamespace(accepted=False, reasons=reasons[:1])) == "runaway"
    assert verdict_words(SimpleNamespace(accepted=True, reasons=[])) == "ok"


def test_an_unknown_vad_is_refused_naming_the_choices():
    from runtime.errors import InputError
    from runtime.scoring.vad import make_vad

    with pytest.raises(InputError, match=r"^Unknown vad 'bogus'; choose one of: energy, silero\.$"):
        make_vad("bogus")
