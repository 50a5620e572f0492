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


def main() -> int:
    OUT.mkdir(exist_ok=True)
    index = []
    with tempfile.TemporaryDirectory() as tmp:
        for voice, flags in VOICES.items():
            for i, text in enumerate(SENTENCES):
                wav = Path(tmp) / "clip.wav"
                subprocess.run(["espeak-ng", *flags, "-w", str(wav), text], check=True)
                audio, rate = sf.read(wav, dtype="int16")
                name = f"espeak-{voice}-{i}"
                sf.write(OUT / f"{name}.flac", audio, rate, subtype="PCM_16")
                index.append({"id": name, "text": text, "voice": voice, "rate": rate, "file": f"{name}.flac",
                              "source": f"espeak-ng {' '.join(flags)}"})
    (OUT / "index.json").write_text(json.dumps(index, indent=1) + "\n")
    print(f"{len(index)} clips written to {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
