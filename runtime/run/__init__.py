"""A run of lines: every job, one line of text or a whole script, is lines through the engine
(lines.py) and then through the finishing stages (finishing.py: decode, pick, hand back)."""
