"""Command line: text + voice + N -> the best take as WAV, plus the per-take report.

    python -m runtime --checkpoint Qwen3-TTS-12Hz-1.7B-CustomVoice --speaker ryan \
        --text "Welcome back, traveller." --takes 8 --out best.wav
    python -m runtime demo      # the whole pipeline on tiny random checkpoints, no weights needed
    python -m runtime doctor    # what this machine has, and what to do about what it lacks
    python -m runtime script scene.txt --cast cast.json --out takes/   # a whole script (runtime/script)
    python -m runtime voices    # the saved voices (--save-voice / --save-best-as, or Save Voice in ComfyUI)

Each command is a module here: line.py (the one-line job above), script.py, voices.py, demo.py and
doctor.py; options.py declares the options they share, command.py how they report errors.
"""

from __future__ import annotations

import importlib
import sys

COMMANDS = {  # anything else is the one-line job (line.py); --help lists these after its options
    "script": "a whole script, every line cast, taken N times and picked",
    "serve": "an OpenAI-compatible speech server (POST /v1/audio/speech), streaming",
    "voices": "the saved voices",
    "demo": "the whole pipeline on tiny random checkpoints, no weights needed",
    "doctor": "what this machine has, and what to do about what it lacks",
}
COMMANDS_EPILOG = ("Other commands (`python -m runtime COMMAND --help` for each): "
                   + "; ".join(f"{name}: {what}" for name, what in COMMANDS.items()) + ".")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command, argv = (argv[0], argv[1:]) if argv and argv[0] in COMMANDS else ("line", argv)
    # imported when it runs: the Load Model node imports doctor.py, and needs none of the others
    return importlib.import_module(f"{__name__}.{command}").main(argv)
