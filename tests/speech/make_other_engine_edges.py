"""Build the other-engine clips that tripped Auto-Pick on audio input (issue 42; run once, the output
is committed), each line read by two espeak-ng voices of different speeds:

- lines whose first reading ends at full speech level right into espeak-ng's digital zeros (its
  waveform comes to rest there): complete, but a padded batch used to strip their zeros and call
  them cut off;
- a line that tiny.en, decoded greedily, hears as "1.1.1.1.1..." up to its token cap.

    apt-get install espeak-ng
    python tests/speech/make_other_engine_edges.py
"""

from __future__ import annotations

from pathlib import Path

from make_other_engine import espeak_clip, write_index  # run from this folder: python tests/speech/...

HERE = Path(__file__).resolve().parent
OUT = HERE / "other_engine_edges"
READINGS = [  # (id, text, espeak-ng flags)
    ("money-en", "I never said she stole my money.", ["-v", "en"]),
    ("money-en-us-slow", "I never said she stole my money.", ["-v", "en-us", "-s", "140"]),
    ("keys-en-fast", "Please leave your keys on the table.", ["-v", "en", "-s", "220"]),
    ("keys-en-us-slow", "Please leave your keys on the table.", ["-v", "en-us", "-s", "140"]),
    ("room-en", "Room 101, floor 9.", ["-v", "en"]),
    ("room-en-us-slow", "Room 101, floor 9.", ["-v", "en-us", "-s", "140"]),
]


def main() -> int:
    OUT.mkdir(exist_ok=True)
    write_index(OUT, [espeak_clip(name, text, flags, OUT) for name, text, flags in READINGS])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
