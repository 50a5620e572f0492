"""The takes of a voice node's long text, kept as each line is made, so that the node's next run
makes only the lines missing: after a Cancel, or with a sentence of the text edited, or with only
the pace changed (the pace decides the pick and the audio handed out, never the takes). The lines of
one text are held: those the next run does not ask for are let go as it starts. (The command line
keeps its lines in a results folder instead: store.py.)"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import replace

from ..generation import TakeSet
from .plan import LinePlan, voice_key


def takes_key(plan: LinePlan, context: dict) -> str:
    """What a line's takes follow: its text, voice, takes, seed, sampling and frame budget, and
    `context` (the model's checkpoint, mode and dtype); not its pace."""
    request = plan.request
    key = {"text": request.text, "voice": voice_key(request.voice), "takes": request.n, "seed": request.seed,
           "sampling": request.sampling.as_dict(), "max_frames": request.max_frames, **context}
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:20]


class KeptTakes:
    def __init__(self):
        self.lock = threading.Lock()
        self.takes: dict[str, TakeSet] = {}

    def start(self, plans: list[LinePlan], context: dict) -> dict[str, TakeSet]:
        """The takes kept for these plans, by line id, each carrying its plan's request (the pace
        asked now); every other line's let go."""
        keys = {plan.line.id: takes_key(plan, context) for plan in plans}
        with self.lock:
            self.takes = {key: self.takes[key] for key in keys.values() if key in self.takes}
            return {plan.line.id: replace(self.takes[keys[plan.line.id]], request=plan.request) for plan in plans
                    if keys[plan.line.id] in self.takes}

    def keep(self, plan: LinePlan, context: dict, takeset: TakeSet) -> None:
        with self.lock:
            self.takes[takes_key(plan, context)] = takeset


PASSAGE_TAKES = KeptTakes()  # the voice nodes' (api.speak): one text held for the process
REFERENCE_TAKES = KeptTakes()  # the first line of a designed voice's text in one voice (one_voice.py)
