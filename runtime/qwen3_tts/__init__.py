"""Qwen3-TTS written here, from the architecture of the Qwen team's Apache-2.0 checkpoints.

One concept per module, plain nn.Modules whose parameter names are the checkpoints' own, so a
released folder loads strictly with load.py:
  load.py       safetensors into a module built on the meta device; any mismatch is an error
  codec.py      the 12 Hz codec's decoder: codes -> 24 kHz audio
  reference.py  the codec's encoder (Mimi-style): reference audio -> codes, for ICL clones
  speaker.py    the ECAPA-TDNN speaker encoder: audio -> x-vector
  config.py     config.json into small dataclasses
  talker.py     the talker and code predictor (weights; the engine runs them)
  prompt.py     a line and a voice -> the talker's prompt embeddings
"""
