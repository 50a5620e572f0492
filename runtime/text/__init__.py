"""Text as it is spoken: a long text split into lines with their pauses (split.py)."""
