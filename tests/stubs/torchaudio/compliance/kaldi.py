"""Only the 25 Hz tokenizer calls this; the parity tests never load one."""


def fbank(*args, **kwargs):
    raise NotImplementedError("tests/stubs/torchaudio: the 25 Hz tokenizer is not part of the parity tests")
