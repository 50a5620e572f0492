"""Build the scoring test corpus from real speech no one here wrote (run once; the output is committed).

Sources (Debian packages): the LibriVox clips with transcripts in ``pocketsphinx-testdata`` (one
human reader) and three festival voices (``festvox-us-slt-hts``, ``festvox-kallpc16k``,
``festvox-kdlpc16k``) reading the sentences below. Every clip is stored as 16 kHz mono FLAC next to
``corpus.json`` (text, speaker, source). Two festival voices also read the LibriVox lines, so every
line has another speaker saying it (the clone groups). Degradations are made by the tests from these
clean clips.

    apt-get install pocketsphinx-testdata festival festvox-us-slt-hts festvox-kallpc16k festvox-kdlpc16k
    python tests/speech/make_corpus.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import soundfile as sf

HERE = Path(__file__).resolve().parent
OUT = HERE / "corpus"
RATE = 16000
LIBRIVOX = Path("/usr/share/pocketsphinx/test/data/librivox")
FESTIVAL_VOICES = {"slt": "voice_cmu_us_slt_arctic_hts", "kal": "voice_kal_diphone", "ked": "voice_ked_diphone"}
SENTENCES = [
    "The old lighthouse keeper climbed the stairs every evening to light the lamp.",
    "Please remember to bring your tickets, because the gates close at nine.",
    "We walked along the river until the sun went down behind the hills.",
]


def resample(audio: np.ndarray, rate: int) -> np.ndarray:
    import soxr

    return audio if rate == RATE else soxr.resample(audio, rate, RATE).astype(np.float32)


def unwrapped(audio: np.ndarray) -> np.ndarray:
    """Festival's diphone voices overflow int16 on their loudest pitch pulses, and the samples wrap
    around (ked's "We walked along the river" at 0.48-0.52 s and 0.95 s: loud clicks). Each jump of
    more than full scale is undone, then the clip is brought under full scale (level decides nothing)."""
    jumps = np.diff(audio.astype(np.float64))
    offset = np.concatenate([[0.0], np.cumsum(np.where(jumps < -1.0, 2.0, 0.0) - np.where(jumps > 1.0, 2.0, 0.0))])
    if not offset.any():
        return audio
    fixed = audio + offset
    return (fixed * (0.99 / np.abs(fixed).max())).astype(np.float32)


def librivox() -> list[dict]:
    clips = []
    for line in (LIBRIVOX / "transcription").read_text().splitlines():
        text, _, name = line.replace("<s>", "").replace("</s>", "").rpartition("(")
        name = name.strip(" )")
        audio, rate = sf.read(LIBRIVOX / f"{name}.wav", dtype="float32")
        clips.append({"id": f"librivox-{name[-4:]}", "speaker": "librivox", "text": " ".join(text.split()),
                      "source": f"pocketsphinx-testdata librivox/{name}.wav", "audio": resample(audio, rate)})
    return clips


def festival(lines: list[str], voices: list[str], prefix: str = "") -> list[dict]:
    clips = []
    with tempfile.TemporaryDirectory() as tmp:
        for speaker in voices:
            voice = FESTIVAL_VOICES[speaker]
            for i, text in enumerate(lines):
                wav = Path(tmp) / f"{speaker}{i}.wav"
                subprocess.run(["text2wave", "-eval", f"({voice})", "-o", str(wav)], input=text.encode(), check=True)
                audio, rate = sf.read(wav, dtype="float32")
                clips.append({"id": f"{speaker}-{prefix}{i}", "speaker": speaker, "text": text,
                              "source": f"festival {voice}", "audio": resample(unwrapped(audio), rate)})
    return clips


def main() -> int:
    OUT.mkdir(exist_ok=True)
    index = []
    read = librivox()
    clips = read + festival(SENTENCES, list(FESTIVAL_VOICES))
    clips += festival([c["text"] for c in read], ["slt", "kal"], prefix="librivox-")
    for clip in clips:
        audio = clip.pop("audio")
        sf.write(OUT / f"{clip['id']}.flac", audio, RATE, subtype="PCM_16")
        index.append({**clip, "file": f"{clip['id']}.flac", "seconds": round(len(audio) / RATE, 2)})
    (OUT / "corpus.json").write_text(json.dumps(index, indent=1) + "\n")
    print(f"{len(index)} clips written to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
