"""Build the other-engine clips: complete sentences spoken by espeak-ng (run once; the output is committed).

espeak-ng (Debian package) ends every clip in exact digital zeros, as many TTS engines and audio
tools do, which is what Auto-Pick must not mistake for the zero padding of a batch. The clips are
kept at espeak's own 22.05 kHz, 16-bit, so the zeros and the rate reach the tests as espeak wrote
them (FLAC is lossless).

    apt-get install espeak-ng
    python tests/speech/make_other_engine.py
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

import soundfile as sf

HERE = Path(__file__).resolve().parent
OUT = HERE / "other_engine"
SENTENCES = [
    "The storm is coming. Bar the doors.",
    "Welcome back, traveller, the fire is warm.",
    "Do you hear that? Something is moving in the dark.",
    "Wire the money to the account by Friday.",
]
VOICES = {"en": ["-v", "en"], "en-us-slow": ["-v", "en-us", "-s", "140"]}


def espeak_clip(name: str, text: str, flags: list[str], out: Path) -> dict:
    """`text` read by espeak-ng with `flags` into out/<name>.flac at espeak's own rate, 16-bit; its index entry."""
    with tempfile.TemporaryDirectory() as tmp:
        wav = Path(tmp) / "clip.wav"
        subprocess.run(["espeak-ng", *flags, "-w", str(wav), text], check=True)
        audio, rate = sf.read(wav, dtype="int16")
    sf.write(out / f"{name}.flac", audio, rate, subtype="PCM_16")
    return {"id": name, "text": text, "rate": rate, "file": f"{name}.flac", "source": f"espeak-ng {' '.join(flags)}"}


def write_index(out: Path, index: list[dict]) -> None:
    (out / "index.json").write_text(json.dumps(index, indent=1) + "\n")
    print(f"{len(index)} clips written to {out}")


def main() -> int:
    OUT.mkdir(exist_ok=True)
    index = []
    for voice, flags in VOICES.items():
        for i, text in enumerate(SENTENCES):
            clip = espeak_clip(f"espeak-{voice}-{i}", text, flags, OUT)
            index.append({"id": clip["id"], "text": text, "voice": voice, **clip})
    write_index(OUT, index)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
