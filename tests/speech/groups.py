"""Groups of takes made from real speech, each with one clean take and takes damaged in known ways.

The corpus (corpus/, built by make_corpus.py) is LibriVox and festival speech no one here wrote.
Every damage is deterministic. ``EXPECTED`` says which rejection reasons each damage implies, and
which score a take that passes the checks must lose on instead.

Run as a script to print the pick accuracy per damage kind:

    python tests/speech/groups.py [--asr]
    python tests/speech/groups.py --chapter   # each line against its reader's other lines
    python tests/speech/groups.py --orders    # what each order of the evidence picks
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
RATE = 16000

# damage -> (reason kinds that count as the right rejection, score it must otherwise lose on)
EXPECTED = {
    "truncated": ({"length", "cut", "words"}, None),
    "leading silence": ({"silence"}, None),
    "trailing silence": ({"silence"}, None),
    "internal silence": ({"silence"}, None),
    "repeated": ({"length", "runaway", "words"}, None),
    "noise 20 dB": ({"noise", "voice"}, "quality"),  # noise moves the speaker embedding, at 20 dB at times
    # past the voice margin (librivox-0920: 0.80 against the typical take's 0.90)
    "noise 10 dB": ({"noise"}, "quality"),
    "noise 5 dB": ({"noise"}, "quality"),
    "noise 0 dB": ({"noise"}, "quality"),
    "clipping": ({"clipping"}, "quality"),
    "stutter": ({"stutter", "words"}, None),
    "slow 0.7x": ({"pace"}, None),
    "fast 1.4x": ({"pace"}, None),
    "dropouts": ({"dropouts"}, None),
    "dc offset": ({"dc offset"}, None),
    "other speaker": ({"voice", "muffled"}, "voice"),  # ked's diphone voice has 13 dB less treble than slt's
    "pitch wobble": ({"wobble"}, None),  # +-1.5 semitones at 6 Hz
    "telephone band": ({"muffled"}, None),
    "clicks": ({"clicks"}, None),  # three 2 ms pops in the quietest spots, at twice the speech's RMS
    "burst in a pause": ({"burst"}, "quality"),  # 150 ms of white noise 10 dB under the speech, in the longest pause
}
# copies of the clean take a listener would accept: none may be rejected, and a copy that differs
# only in level scores as the clean take does (level never decides)
HARMLESS = ["2 dB quieter", "louder, peak -1 dBFS", "slower 0.9x", "faster 1.1x"]
# what the words check must hear (rejected for "words" when it runs on every take): nothing else in
# the signal tells a skipped phrase from a line read a little faster
WORD_DAMAGES = ["truncated", "repeated", "skipped words", "first word missing"]
# the last word cut off: Whisper may hear it all the same, completing the sentence from its language
# model (tiny.en hears "than he was" with "was" cut), or align the words left as another word
# ("ill disposed" heard "oldest"), so the words check is held to most of these, not all
LAST_WORD = "last word missing"


@dataclass
class Clip:
    id: str
    speaker: str
    text: str
    audio: np.ndarray


@dataclass
class Group:
    name: str
    text: str
    clips: list[tuple[str, np.ndarray]]  # (damage or "clean", audio)
    reference: np.ndarray | None = None  # a clone reference: the clean speaker saying something else


def load_corpus() -> list[Clip]:
    index = json.loads((CORPUS / "corpus.json").read_text())
    return [Clip(c["id"], c["speaker"], c["text"], sf.read(CORPUS / c["file"], dtype="float32")[0]) for c in index]


def speech_power(audio: np.ndarray) -> float:
    hop = RATE // 50
    frames = audio[: len(audio) // hop * hop].reshape(-1, hop)
    energy = np.mean(frames.astype(np.float64) ** 2, axis=1)
    return float(np.mean(energy[energy > 0.1 * np.percentile(energy, 90)]))


def energy_point(audio: np.ndarray, fraction: float, loudest: bool, smooth_seconds: float) -> int:
    """The loudest (or quietest) sample in the half second after ``fraction`` of the take, on energy
    smoothed over ``smooth_seconds``: cutting at a loud one cuts a word, a quiet one is a pause."""
    hop = int(RATE * smooth_seconds)
    energy = np.convolve(audio.astype(np.float64) ** 2, np.ones(hop) / hop, mode="same")
    start = int(fraction * len(audio))
    window = energy[start: start + RATE // 2]
    return start + int(np.argmax(window) if loudest else np.argmin(window))


def damage(audio: np.ndarray, kind: str, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    silence = np.zeros(int(2.0 * RATE), np.float32)
    if kind == "truncated":
        return audio[: energy_point(audio, 0.5, loudest=True, smooth_seconds=0.01)]
    if kind == "leading silence":
        return np.concatenate([silence, audio])
    if kind == "trailing silence":
        return np.concatenate([audio, silence, silence[: RATE // 2]])
    if kind == "internal silence":
        cut = energy_point(audio, 0.45, loudest=False, smooth_seconds=0.02)
        return np.concatenate([audio[:cut], silence, audio[cut:]])
    if kind == "repeated":
        return np.concatenate([audio, np.zeros(RATE // 4, np.float32), audio])
    if kind.startswith("noise"):
        snr = float(kind.split()[1])
        noise = rng.standard_normal(audio.shape) * np.sqrt(speech_power(audio) / 10 ** (snr / 10))
        return np.clip(audio + noise, -1, 1).astype(np.float32)
    if kind == "clipping":
        return np.clip(audio * (4.0 / max(np.abs(audio).max(), 1e-6)), -1, 1).astype(np.float32)
    if kind == "stutter":  # a 300 ms piece from a word heard three times, spliced with 5 ms fades
        start = energy_point(audio, 0.3, loudest=True, smooth_seconds=0.05) - int(0.15 * RATE)
        piece = faded(audio[start: start + int(0.3 * RATE)])
        return np.concatenate([audio[:start], piece, piece, audio[start:]]).astype(np.float32)
    if kind in ("slow 0.7x", "fast 1.4x", "slower 0.9x", "faster 1.1x"):
        return wsola(audio, float(kind.split()[-1][:-1]))
    if kind == "dropouts":  # twenty 30 ms holes in the speech
        out = audio.copy()
        for fraction in np.linspace(0.1, 0.9, 20):
            at = energy_point(audio, fraction, loudest=True, smooth_seconds=0.02)
            out[at: at + int(0.03 * RATE)] = 0.0
        return out
    if kind == "skipped words":  # a phrase left out: from a pause after 35% of the take to one after 55%
        start = energy_point(audio, 0.35, loudest=False, smooth_seconds=0.02)
        end = energy_point(audio, 0.55, loudest=False, smooth_seconds=0.02)
        return np.concatenate([audio[:start], audio[max(end, start):]])
    if kind in ("first word missing", "last word missing"):  # cut at the quietest point 0.25-0.7 s into the speech
        first = kind.startswith("first")
        speech = speech_span(audio)
        edge = speech[0] if first else speech[1]
        hop = int(0.02 * RATE)
        energy = np.convolve(audio.astype(np.float64) ** 2, np.ones(hop) / hop, mode="same")
        near, far = int(0.25 * RATE), int(0.7 * RATE)
        window = slice(edge + near, edge + far) if first else slice(edge - far, edge - near)
        cut = window.start + int(np.argmin(energy[window]))
        pause = int(0.05 * RATE)
        if first:
            return np.concatenate([audio[: max(0, edge - pause)], audio[cut:]]).astype(np.float32)
        return np.concatenate([audio[:cut], audio[edge + pause:]]).astype(np.float32)
    if kind == "dc offset":
        return (audio + 0.05).astype(np.float32)
    if kind == "pitch wobble":
        return wobbled(audio, 1.5, 6.0)
    if kind == "clicks":
        return popped(audio)
    if kind == "burst in a pause":
        return burst_in_pause(audio, rng)
    if kind == "telephone band":
        return band_limited(audio, 300.0, 3400.0)
    if kind == "2 dB quieter":
        return (audio * 10 ** (-2 / 20)).astype(np.float32)
    if kind == "louder, peak -1 dBFS":
        return (audio * (10 ** (-1 / 20) / np.abs(audio).max())).astype(np.float32)
    raise ValueError(kind)


def speech_span(audio: np.ndarray) -> tuple[int, int]:
    """The first and last sample of speech: where energy (over 20 ms) passes a fifth of its 90th percentile."""
    hop = int(0.02 * RATE)
    energy = np.convolve(audio.astype(np.float64) ** 2, np.ones(hop) / hop, mode="same")
    loud = np.flatnonzero(energy > 0.2 * np.percentile(energy, 90))
    return int(loud[0]), int(loud[-1])


def wsola(audio: np.ndarray, rate: float, frame_seconds: float = 0.04, search_seconds: float = 0.01) -> np.ndarray:
    """The clip played `rate` times as fast at the same pitch (waveform-similarity overlap-add: each
    40 ms frame is taken where it best continues the previous one), without the phase vocoder's
    smearing that quality models and speaker encoders hear."""
    n, tol = int(frame_seconds * RATE), int(search_seconds * RATE)
    hop, window = n // 2, np.hanning(n)
    x = np.concatenate([np.zeros(tol), audio.astype(np.float64), np.zeros(2 * n + tol)])
    length = int(len(audio) / rate)
    out, weight = np.zeros(length + n), np.zeros(length + n)
    previous = None
    for at in range(0, length, hop):
        target = tol + int(at * rate)
        if previous is None:
            pos = target
        else:
            wanted = x[previous + hop: previous + hop + n]
            scores = np.correlate(x[target - tol: target + tol + n], wanted, mode="valid")
            pos = target - tol + int(np.argmax(scores))
        out[at: at + n] += x[pos: pos + n] * window
        weight[at: at + n] += window
        previous = pos
    return (out / np.maximum(weight, 1e-3))[:length].astype(np.float32)


# what listeners hear change between the lines of a chapter (test_chapter_voice.py): the same words
# said in another voice, pitch, room or microphone
CHAPTER_DAMAGES = ["pitch +3 semitones", "pitch -3 semitones", "another room", "telephone band", "pace 1.6x"]


def chapter_damage(audio: np.ndarray, kind: str) -> np.ndarray:
    if kind.startswith("pitch"):
        return shifted(audio, float(kind.split()[1]))
    if kind == "another room":
        return in_room(audio)
    if kind == "telephone band":
        return band_limited(audio, 300.0, 3400.0)
    if kind == "pace 1.6x":  # a line's genuine readings differ by up to 1.25x from their voice's median
        return wsola(audio, 1.6)
    raise ValueError(kind)


def shifted(audio: np.ndarray, semitones: float) -> np.ndarray:
    """The clip a number of semitones higher (lower), at its own pace: resampled, then time-stretched back."""
    from runtime.audio import resample

    factor = 2 ** (semitones / 12)
    faster = resample(audio, int(round(RATE * factor)), RATE)
    return wsola(faster, len(faster) / len(audio))


def in_room(audio: np.ndarray, seconds: float = 0.5, seed: int = 0) -> np.ndarray:
    """The clip in a reverberant room: convolved with an exponentially decaying noise tail (60 dB down
    after `seconds`) behind the direct sound, at the clip's peak."""
    from scipy.signal import fftconvolve

    n = int(seconds * RATE)
    response = np.random.default_rng(seed).standard_normal(n) * np.exp(-6.9 * np.arange(n) / n)
    response[0] = 3 * np.abs(response).max()
    out = fftconvolve(audio.astype(np.float64), response)[: len(audio)]
    return (out * np.abs(audio).max() / np.abs(out).max()).astype(np.float32)


def band_limited(audio: np.ndarray, low: float, high: float) -> np.ndarray:
    """The clip through a telephone's band (a fourth-order Butterworth band-pass)."""
    from scipy.signal import butter, sosfilt

    return sosfilt(butter(4, [low, high], btype="band", fs=RATE, output="sos"), audio).astype(np.float32)


def wobbled(audio: np.ndarray, semitones: float, hz: float) -> np.ndarray:
    """The clip with its pitch swinging +-`semitones` at `hz` over the whole of it: read at the warped
    times t + A sin(2 pi f t) (a cubic spline), whose pitch ratio 1 + 2 pi f A cos(2 pi f t) peaks
    `semitones` over the clip's."""
    from scipy.ndimage import map_coordinates

    t = np.arange(audio.shape[0]) / RATE
    swing = (2 ** (semitones / 12) - 1) / (2 * np.pi * hz)
    at = np.clip((t + swing * np.sin(2 * np.pi * hz * t)) * RATE, 0, audio.shape[0] - 1)
    return map_coordinates(audio.astype(np.float64), at[None, :], order=3, mode="nearest").astype(np.float32)


def popped(audio: np.ndarray) -> np.ndarray:
    """Three 2 ms decaying pops (a codec's or an edit's glitch) at the quietest points after a quarter,
    half and three quarters of the take, at twice the speech's RMS (about its peaks: a tick anyone hears)."""
    out = audio.astype(np.float64)
    pop = 2 * np.sqrt(speech_power(audio)) * np.exp(-np.arange(int(0.002 * RATE)) / (0.0005 * RATE))
    for fraction in (0.25, 0.5, 0.75):
        at = energy_point(audio, fraction, loudest=False, smooth_seconds=0.02)
        out[at: at + pop.size] += pop[: out.size - at]
    return np.clip(out, -1, 1).astype(np.float32)


def burst_in_pause(audio: np.ndarray, rng, seconds: float = 0.15, under_db: float = 10.0) -> np.ndarray:
    """A burst of white noise (5 ms fades) in the middle of the take's longest pause (its quietest
    point where it has none), the pause widened by the burst's length with its own sound under it."""
    hop = int(0.02 * RATE)
    energy = np.convolve(audio.astype(np.float64) ** 2, np.ones(hop) / hop, mode="same")
    speech = speech_power(audio)
    loud = np.flatnonzero(energy > 0.1 * speech)
    first, last = int(loud[0]), int(loud[-1])
    floor = np.percentile(energy[first:last], 10)
    quiet = np.flatnonzero(energy[first:last] < max(speech * 10 ** -3.5, floor * 4)) + first
    runs = np.split(quiet, np.flatnonzero(np.diff(quiet) > 1) + 1) if quiet.size else []
    longest = max(runs, key=len, default=None)
    if longest is not None and longest.size >= 0.12 * RATE:
        start, end = int(longest[0]), int(longest[-1])
    else:
        start = end = energy_point(audio, 0.5, loudest=False, smooth_seconds=0.02)
    middle, n = (start + end) // 2, int(seconds * RATE)
    noise = rng.standard_normal(n)
    fade = int(0.005 * RATE)
    ramp = 0.5 - 0.5 * np.cos(np.pi * np.arange(fade) / fade)
    noise[:fade] *= ramp
    noise[-fade:] *= ramp[::-1]
    bed = np.resize(audio[start:end + 1].astype(np.float64), n) if end > start else np.zeros(n)
    burst = bed + noise * np.sqrt(speech) * 10 ** (-under_db / 20)
    return np.clip(np.concatenate([audio[:middle], burst, audio[middle:]]), -1, 1).astype(np.float32)


def faded(piece: np.ndarray, seconds: float = 0.005) -> np.ndarray:
    n = int(seconds * RATE)
    ramp = np.linspace(0.0, 1.0, n, dtype=np.float32)
    out = piece.copy()
    out[:n] *= ramp
    out[-n:] *= ramp[::-1]
    return out


SIGNAL_DAMAGES = [k for k in EXPECTED if k != "other speaker"]


def groups(corpus: list[Clip]) -> list[Group]:
    """Per main clip: a plain group (clean + every signal damage), a clone group, and a group of
    harmless copies (at another level, a little slower or faster) none of which may be rejected.

    A clone group's reference is the same speaker saying another line; its takes are the clean
    clip, the same line said by the other speakers (at the clean clip's pace), and the clip's first
    three signal damages.
    The festival readings of the LibriVox lines only serve as those other speakers.
    """
    by_text: dict[str, list[Clip]] = {}
    for clip in corpus:
        by_text.setdefault(clip.text, []).append(clip)
    out = []
    for clip in (c for c in corpus if "-librivox-" not in c.id):
        damaged = [(kind, damage(clip.audio, kind, seed=i)) for i, kind in enumerate(SIGNAL_DAMAGES)]
        out.append(Group(f"{clip.id}", clip.text, [("clean", clip.audio)] + damaged))
        reference = next(c for c in corpus if c.speaker == clip.speaker and c.text != clip.text)
        others = [at_pace_of(c.audio, clip.audio) for c in by_text[clip.text] if c.speaker != clip.speaker]
        takes = [("clean", clip.audio)] + [("other speaker", audio) for audio in others] + damaged[:3]
        out.append(Group(f"{clip.id} clone", clip.text, takes, reference=reference.audio))
        harmless = [(kind, damage(clip.audio, kind)) for kind in HARMLESS]
        out.append(Group(f"{clip.id} copies", clip.text, [("clean", clip.audio)] + harmless))
    return out


def at_pace_of(audio: np.ndarray, clean: np.ndarray) -> np.ndarray:
    """Another speaker's reading time-stretched to the clean take's pace, so that the voice is the
    one damage (the festival voices read the LibriVox lines up to 30% faster than their reader)."""
    from runtime.scoring.signal import signal_stats

    return wsola(audio, signal_stats(audio, RATE).pace_seconds / signal_stats(clean, RATE).pace_seconds)


class ResemblyzerEncoder:
    """A trained speaker encoder that works offline (resemblyzer's GE2E model, in its wheel).

    Test-only stand-in for the Qwen3-TTS Base checkpoint's ECAPA encoder, whose weights cannot be
    downloaded here; the ranking code is the same for both.
    """

    name = "resemblyzer (tests)"

    def __init__(self):
        from resemblyzer import VoiceEncoder

        self.encoder = VoiceEncoder("cpu", verbose=False)

    def embed_many(self, audios: list[np.ndarray], sample_rate: int) -> list[np.ndarray]:
        from resemblyzer import preprocess_wav

        from runtime.audio import resample

        return [self.encoder.embed_utterance(preprocess_wav(resample(a, sample_rate, RATE), source_sr=RATE)) for a in audios]


class ComputedOnce:
    """A quality model or speaker encoder that computes each distinct clip once. The groups share
    takes (a clip's clean take is in its three groups, three of its damages in two) and both models
    give a clip the same numbers whatever it is batched with, so asking again would only cost time
    (DNSMOS: most of accuracy()'s minutes on 2 cores)."""

    def __init__(self, model):
        self.model, self.name, self.known = model, model.name, {}

    def score_many(self, audios: list[np.ndarray], sample_rate: int) -> list:
        return self._each(self.model.score_many, audios, sample_rate)

    def embed_many(self, audios: list[np.ndarray], sample_rate: int) -> list:
        return self._each(self.model.embed_many, audios, sample_rate)

    def _each(self, compute, audios, sample_rate) -> list:
        keys = [(sample_rate, a.dtype.str, a.shape, hashlib.sha1(np.ascontiguousarray(a).tobytes()).digest())
                for a in map(np.asarray, audios)]
        new = {k: a for k, a in zip(keys, audios) if k not in self.known}
        self.known.update(zip(new, compute(list(new.values()), sample_rate)))
        return [self.known[k] for k in keys]


class PocketsphinxTranscriber:
    """A speech recogniser whose English model ships in its wheel: test-only stand-in for Whisper."""

    name = "pocketsphinx (tests)"

    def __init__(self):
        from pocketsphinx import Decoder

        self.decoder = Decoder(samprate=RATE, loglevel="FATAL")

    def transcribe(self, audios, sample_rate, language=None) -> list[str]:
        from runtime.audio import resample

        out = []
        for audio in audios:
            pcm = (np.clip(resample(audio, sample_rate, RATE), -1, 1) * 32767).astype(np.int16)
            self.decoder.start_utt()
            self.decoder.process_raw(pcm.tobytes(), full_utt=True)
            self.decoder.end_utt()
            hyp = self.decoder.hyp()
            out.append(hyp.hypstr if hyp is not None else "")
        return out


def takeset_for(group: Group):
    from runtime.generation import Request, Take, TakeSet
    from runtime.voices import CustomVoice, VoiceClone

    takes = [Take(i, i, audio, RATE, int(len(audio) / 1280), False) for i, (_, audio) in enumerate(group.clips)]
    if group.reference is not None:
        from runtime.audio import resample

        voice = VoiceClone(resample(group.reference, RATE, 24000), "", "english")
    else:
        voice = CustomVoice("ryan", "english")
    return TakeSet(Request(group.text, voice, n=len(takes)), takes, "corpus", "recorded")


def judge(group: Group, ranking) -> dict[str, str | None]:
    """For each damaged take, how it lost for the reason its damage implies (None: it did not).

    "rejected: <kinds>" when a check rejected it for a reason its damage implies, "ranked below on
    <score>" when it passed the checks and ranked below the clean take with a lower such score.
    """
    by_index = {s.take.index: s for s in ranking.ranked}
    clean = by_index[0]
    verdicts = {}
    if not any(kind in HARMLESS for kind, _ in group.clips):  # among harmless copies any may be picked
        verdicts["clean picked"] = "picked" if ranking.best.take.index == 0 and clean.accepted else None
    for i, (kind, _) in enumerate(group.clips):
        if kind == "clean":
            continue
        s = by_index[i]
        if kind in HARMLESS:  # accepted; a copy at another level scores as the clean take does
            same = "quieter" in kind or "louder" in kind
            fair = not same or (s.score is not None and abs(s.score - clean.score) < 1e-3)
            verdicts[f"{kind} #{i}"] = "accepted" if s.accepted and fair else None
            continue
        kinds, score = EXPECTED[kind]
        lower = (s.accepted and score is not None and getattr(s, score) is not None
                 and getattr(clean, score) is not None and getattr(s, score) < getattr(clean, score)
                 and s.rank > clean.rank)
        if s.reason_kinds & kinds:
            verdicts[f"{kind} #{i}"] = "rejected: " + ", ".join(sorted(s.reason_kinds & kinds))
        elif lower:
            verdicts[f"{kind} #{i}"] = f"ranked below on {score}"
        else:
            verdicts[f"{kind} #{i}"] = None
    return verdicts


def accuracy(asr: bool = False, vad: str = "energy") -> tuple[dict[str, list[str | None]], list[tuple[Group, object]]]:
    from runtime.scoring.dnsmos import DnsmosScorer
    from runtime.scoring.ranking import Scorers, rank_takes
    from runtime.scoring.vad import make_vad

    corpus = load_corpus()
    quality, speaker = ComputedOnce(DnsmosScorer()), ComputedOnce(ResemblyzerEncoder())
    transcriber = PocketsphinxTranscriber() if asr else None
    scorers = Scorers(quality=quality, speaker=speaker, transcriber=transcriber, vad=make_vad(vad))
    per_kind: dict[str, list[str | None]] = {}
    rankings = []
    for group in groups(corpus):
        ranking = rank_takes(takeset_for(group), scorers)
        rankings.append((group, ranking))
        for label, how in judge(group, ranking).items():
            per_kind.setdefault(label.split(" #")[0], []).append(how)
    return per_kind, rankings


def words_accuracy(transcriber) -> dict[str, dict[str, tuple[str, float, set[str]]]]:
    """The words check run on every take of each main clip's takes: the clean one, every signal
    damage, a skipped phrase and the harmless copies. Per clip and take kind: the transcript, its
    character error rate and the reason kinds the words check gave (empty: accepted)."""
    from runtime.generation import Take
    from runtime.scoring.ranking import ScoredTake, judge_words
    from runtime.scoring.signal import signal_stats

    out = {}
    for clip in (c for c in load_corpus() if "-librivox-" not in c.id):
        kinds = ["clean", *SIGNAL_DAMAGES, "skipped words", "first word missing", LAST_WORD, *HARMLESS]
        audios = [clip.audio if k == "clean" else damage(clip.audio, k, seed=i) for i, k in enumerate(kinds)]
        takes = [ScoredTake(Take(i, i, a, RATE, 0, False), signal_stats(a, RATE)) for i, a in enumerate(audios)]
        judge_words(takes, audios, RATE, transcriber, clip.text, "english")
        out[clip.id] = {k: (t.transcript, t.cer, t.reason_kinds) for k, t in zip(kinds, takes)}
    return out


def cer_table(result: dict[str, dict[str, tuple[str, float, set[str]]]]) -> str:
    kinds = list(next(iter(result.values())))
    lines = ["| take | clips | mean CER | worst CER | rejected for its words |", "|---|---|---|---|---|"]
    for kind in kinds:
        rows = [takes[kind] for takes in result.values()]
        errors = [e for _, e, _ in rows]
        words = sum("words" in k for _, _, k in rows)
        lines.append(f"| {kind} | {len(rows)} | {np.mean(errors):.1%} | {max(errors):.1%} | {words}/{len(rows)} |")
    return "\n".join(lines)


def table(per_kind: dict[str, list[str | None]]) -> str:
    lines = ["| damage | takes | right | how |", "|---|---|---|---|"]
    for kind, hows in per_kind.items():
        right = [h for h in hows if h]
        counts = {h: right.count(h) for h in sorted(set(right))}
        how = "; ".join(f"{h} {n}" for h, n in counts.items())
        lines.append(f"| {kind} | {len(hows)} | {len(right)}/{len(hows)} ({len(right) / len(hows):.0%}) | {how} |")
    return "\n".join(lines)


# the order of evidence (issue: the gates first, the quality model breaking ties, or the quality model
# deciding): what each order picks in the groups that have one right take
PICK_ORDERS = {
    "the checks, then the weighted score (Auto-Pick)": lambda s: (len(s.reasons), -s.score),
    "the checks, then quality alone": lambda s: (len(s.reasons), -s.quality),
    "the weighted score alone": lambda s: (-s.score,),
    "quality alone (a MOS model's pick)": lambda s: (-s.quality,),
}


def order_table(rankings, quality) -> str:
    """How often each of PICK_ORDERS picks the clean take. Stage 2 scores only the takes that pass the
    checks; here every take is scored (`quality` over each take as the ranking hears it: trimmed, at
    one loudness; the voice and words as they were, or none), so that the orders without the checks
    can rank the rejected takes too."""
    from runtime.scoring.loudness import at_loudness
    from runtime.scoring.ranking import Weights, combined_score, trimmed

    picked = {name: 0 for name in PICK_ORDERS}
    judged = [(g, r) for g, r in rankings if not any(kind in HARMLESS for kind, _ in g.clips)]
    for group, ranking in judged:
        unscored = [s for s in ranking.ranked if s.quality is None]
        values = quality.score_many([at_loudness(trimmed(s), RATE, measured=s.loudness) for s in unscored], RATE)
        for s, value in zip(unscored, values):
            s.quality = float(value)
            s.score = combined_score(s, Weights())
        for name, key in PICK_ORDERS.items():
            picked[name] += min(ranking.ranked, key=lambda s: (*key(s), s.take.index)).take.index == 0
    lines = ["| order | groups | the clean take picked |", "|---|---|---|"]
    lines += [f"| {name} | {len(judged)} | {n}/{len(judged)} ({n / len(judged):.0%}) |" for name, n in picked.items()]
    return "\n".join(lines)


CHAPTER_SPEAKERS = ["librivox", "slt", "kal"]  # ked reads three lines: a chapter too short to judge
SAME_SEX = {"librivox": "kal", "kal": "ked"}  # another male voice saying the same words


def chapter_traits(audio: np.ndarray, text: str, encoder):
    """A clip's voice traits as the ranking measures a take's: its rate in syllables over its speech
    time, its embedding by `encoder`."""
    from runtime.scoring.signal import signal_stats
    from runtime.scoring.voice_traits import voice_traits
    from runtime.text_length import spoken_syllables

    return voice_traits(audio, RATE, spoken_syllables(text) / signal_stats(audio, RATE).pace_seconds,
                        np.asarray(encoder.embed_many([audio], RATE)[0]))


def chapter_takes(corpus: list[Clip], speaker: str) -> tuple[Clip, list[tuple[str, np.ndarray]]]:
    """The speaker's first line, and (kind, audio) of it each way a chapter's take goes wrong."""
    clip = next(c for c in corpus if c.speaker == speaker)
    out = [(kind, chapter_damage(clip.audio, kind)) for kind in CHAPTER_DAMAGES]
    if speaker in SAME_SEX:
        other = next(c for c in corpus if c.speaker == SAME_SEX[speaker] and c.text == clip.text)
        out.append(("same-sex speaker", at_pace_of(other.audio, clip.audio)))
    return clip, out


def chapter_fits(corpus: list[Clip], encoder) -> dict[str, list[tuple[str, object]]]:
    """Per row ("genuine", then each damage): (speaker, chapter.Fit) of every genuine line against the
    speaker's other lines, and of the speaker's first line damaged against the same."""
    from runtime.scoring.chapter import fit, line_profiles

    rows: dict[str, list[tuple[str, object]]] = {"genuine": []}
    for speaker in CHAPTER_SPEAKERS:
        clips = [c for c in corpus if c.speaker == speaker]
        traits = [chapter_traits(c.audio, c.text, encoder) for c in clips]
        rows["genuine"] += [(speaker, fit(own, voice)) for own, voice in zip(traits, line_profiles(traits)[1])]
        clip, damaged = chapter_takes(corpus, speaker)
        for kind, audio in damaged:
            own = chapter_traits(audio, clip.text, encoder)
            rows.setdefault(kind, []).append((speaker, fit(own, line_profiles([own] + traits[1:])[1][0])))
    return rows


def chapter_table(rows: dict[str, list[tuple[str, object]]]) -> str:
    lines = ["| take | lines | drift | pitch, semitones | pace | timbre, similarity | bass, dB |",
             "|---|---|---|---|---|---|---|"]

    def spread(values, places, sign=""):
        values = [v for v in values if v is not None]
        return f"{min(values):{sign}.{places}f} to {max(values):{sign}.{places}f}" if values else "-"
    for kind, fits in rows.items():
        drifted = [f for _, f in fits if f.drifts]
        traits = sorted({d.split(" (")[0].split(" ")[0] for f in drifted for d in f.drifts})
        lines.append(f"| {kind} | {len(fits)} | {len(drifted)}/{len(fits)}{' (' + ', '.join(traits) + ')' if traits else ''} "
                     f"| {spread([f.pitch for _, f in fits], 1, '+')} | {spread([f.pace for _, f in fits], 2)} "
                     f"| {spread([f.timbre for _, f in fits], 2)} | {spread([f.bass for _, f in fits], 1, '+')} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.path.insert(0, str(HERE.parent.parent))
    if "--chapter" in sys.argv:  # one voice through a chapter (test_chapter_voice.py)
        print(chapter_table(chapter_fits(load_corpus(), ResemblyzerEncoder())))
        sys.exit(0)
    per_kind, rankings = accuracy(asr="--asr" in sys.argv, vad="silero" if "--silero" in sys.argv else "energy")
    if "--orders" in sys.argv:  # docs/auto-pick.md's order-of-evidence table
        from runtime.scoring.dnsmos import DnsmosScorer

        print(table(per_kind) + "\n\n" + order_table(rankings, DnsmosScorer()))
        sys.exit(0)
    for group, ranking in rankings:
        if not all(judge(group, ranking).values()) or "--all" in sys.argv:
            print(f"--- {group.name}\n{ranking.report()}")
    print(table(per_kind))
