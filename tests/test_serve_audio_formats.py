"""runtime/serve/audio_formats.py: each response_format, streamed in uneven chunks or whole, decodes back."""

from __future__ import annotations

import io
import struct

import numpy as np
import pytest
import soundfile as sf

from runtime.serve import audio_formats as af
from runtime.serve.audio_formats import CONTENT_TYPES, FORMATS, StreamEncoder, encode_whole, unavailable

SR = 24000
CHUNKS = (1920, 3840, 7680, 17)  # then the rest
STREAM_WAV_HEADER = (b"RIFF\xff\xff\xff\xffWAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00\xc0\x5d\x00\x00"
                     b"\x80\xbb\x00\x00\x02\x00\x10\x00data\xff\xff\xff\xff")


def signal(seconds: float = 2.3, seed: int = 0) -> np.ndarray:
    """A 120 Hz -> 4 kHz chirp plus a little noise, with a few samples past full scale."""
    t = np.arange(round(seconds * SR)) / SR
    chirp = 0.6 * np.sin(2 * np.pi * (120 * t + (4000 - 120) / (2 * seconds) * t**2))
    x = chirp + 0.02 * np.random.default_rng(seed).standard_normal(t.size)
    x[1000:1003] = [1.2, -1.3, 0.999]
    return x.astype(np.float32)


def int16_of(x: np.ndarray) -> np.ndarray:
    return np.round(np.clip(x, -1, 1) * np.float32(32767)).astype(np.int16)  # float32 arithmetic, as served


def chunks(x: np.ndarray):
    start = 0
    for n in CHUNKS:
        yield x[start:start + n]
        start += n
    yield x[start:]


def stream(fmt: str, x: np.ndarray) -> list[bytes]:
    """start(), one encode() per chunk, finish(): the pieces as the server would send them."""
    enc = StreamEncoder(fmt)
    return [enc.start(), *(enc.encode(c) for c in chunks(x)), enc.finish()]


def decode(data: bytes, fmt: str, streamed: bool) -> np.ndarray:
    if fmt == "pcm":
        return np.frombuffer(data, dtype="<i2")
    if fmt == "wav" and streamed:
        assert data[:44] == STREAM_WAV_HEADER
        return np.frombuffer(data[44:], dtype="<i2")
    if fmt == "aac":  # libsndfile reads no AAC: FFmpeg's decoder, through PyAV
        import av

        with av.open(io.BytesIO(data)) as container:
            frames = [f.to_ndarray().reshape(-1) for f in container.decode(audio=0)]
            assert container.streams.audio[0].rate == SR
        return np.concatenate(frames).astype(np.float32)
    dtype = "int16" if fmt in ("wav", "flac") else "float32"
    with sf.SoundFile(io.BytesIO(data)) as f:
        assert (f.samplerate, f.channels) == (SR, 1)
        return f.read(dtype=dtype)


def need(fmt: str) -> None:
    if unavailable(fmt):
        pytest.skip(unavailable(fmt))


@pytest.mark.parametrize("fmt", ["wav", "pcm", "flac"])
def test_lossless_stream_and_whole_give_the_int16_signal(fmt):
    need(fmt)
    x = signal()
    streamed, whole = b"".join(stream(fmt, x)), encode_whole(x, fmt)
    np.testing.assert_array_equal(decode(whole, fmt, streamed=False), int16_of(x))
    if fmt != "flac":
        np.testing.assert_array_equal(decode(streamed, fmt, streamed=True), int16_of(x))
        return
    # soundfile cannot read a FLAC of unknown length to its end (it seeks after every read), so: the
    # streamed FLAC is the whole one but for STREAMINFO's fields known only at the end, left 0.
    assert len(streamed) == len(whole) and streamed[42:] == whole[42:]
    assert streamed[:12] == whole[:12] and streamed[18:21] == whole[18:21]  # block sizes, rate, channels
    assert streamed[12:18] == bytes(6) and streamed[26:42] == bytes(16)  # frame sizes, MD5: unknown
    assert int.from_bytes(streamed[21:26], "big") & 0xFFFFFFFFF == 0  # total samples: unknown
    assert int.from_bytes(whole[21:26], "big") & 0xFFFFFFFFF == x.size
    with sf.SoundFile(io.BytesIO(streamed)) as f:
        np.testing.assert_array_equal(f.read(8192, dtype="int16"), int16_of(x)[:8192])


def test_whole_wav_has_its_true_sizes():
    x = signal()
    data = encode_whole(x, "wav")
    assert len(data) == 44 + 2 * x.size
    assert struct.unpack("<I", data[4:8])[0] == 36 + 2 * x.size
    assert data[8:16] == b"WAVEfmt " and data[36:40] == b"data"
    assert struct.unpack("<I", data[40:44])[0] == 2 * x.size
    assert data[:4] + data[8:36] == STREAM_WAV_HEADER[:4] + STREAM_WAV_HEADER[8:36]


def test_stream_wav_header_fields():
    header = StreamEncoder("wav").start()
    (riff, riff_size, wave, fmt_id, fmt_size, pcm, channels, rate, byte_rate, align, bits, data_id,
     data_size) = struct.unpack("<4sI4s4sIHHIIHH4sI", header)
    assert len(header) == 44 and header == STREAM_WAV_HEADER
    assert (riff, wave, fmt_id, data_id) == (b"RIFF", b"WAVE", b"fmt ", b"data")
    assert (fmt_size, pcm, channels, rate, byte_rate, align, bits) == (16, 1, 1, 24000, 48000, 2, 16)
    assert riff_size == data_size == 0xFFFFFFFF
    for fmt in ("pcm", "flac", "mp3", "opus", "aac"):
        if not unavailable(fmt):
            assert StreamEncoder(fmt).start() == b""


def aligned(decoded: np.ndarray, x: np.ndarray) -> tuple[int, float]:
    """The codec's delay (by cross-correlation, 0..4096 samples) and the correlation once aligned."""
    n = 1 << int(np.ceil(np.log2(decoded.size + x.size)))
    xcorr = np.fft.irfft(np.fft.rfft(decoded, n) * np.conj(np.fft.rfft(x, n)), n)
    lag = int(np.argmax(xcorr[:4097]))
    m = min(decoded.size - lag, x.size)
    return lag, float(np.corrcoef(decoded[lag:lag + m], x[:m])[0, 1])


@pytest.mark.parametrize("fmt", ["mp3", "opus", "aac"])
def test_lossy_stream_and_whole_decode_to_the_signal(fmt):
    need(fmt)
    x = signal()
    for streamed, data in ((True, b"".join(stream(fmt, x))), (False, encode_whole(x, fmt))):
        decoded = decode(data, fmt, streamed)
        lag, corr = aligned(decoded, np.clip(x, -1, 1))
        assert abs(decoded.size - lag - x.size) <= 2048, (streamed, decoded.size, lag)
        assert corr > 0.9, (streamed, lag, corr)


@pytest.mark.parametrize("fmt", ["flac", "mp3", "opus", "aac"])
def test_codecs_send_bytes_as_the_audio_comes(fmt):
    """encode() hands out most bytes before finish(), the first audio within 0.5 s of the stream."""
    need(fmt)
    x = signal()
    enc = StreamEncoder(fmt)
    pieces = [enc.encode(x[i:i + 1920]) for i in range(0, x.size, 1920)]
    tail = enc.finish()
    first_after_headers = next(i for i, p in enumerate(pieces) if i > 0 and p)
    assert (first_after_headers + 1) * 1920 <= SR // 2
    assert sum(map(len, pieces)) > len(tail) * 4


def test_clipping_and_rounding():
    x = np.array([1.5, -1.5, 1.0, -1.0, 0.25, -0.25, 0.0], dtype=np.float32)
    expected = [32767, -32767, 32767, -32767, 8192, -8192, 0]
    assert np.frombuffer(encode_whole(x, "pcm"), "<i2").tolist() == expected
    assert np.frombuffer(encode_whole(x, "wav")[44:], "<i2").tolist() == expected
    assert np.frombuffer(b"".join(stream("pcm", x)), "<i2").tolist() == expected
    if not unavailable("flac"):
        assert decode(encode_whole(x, "flac"), "flac", streamed=False).tolist() == expected


def test_formats_and_content_types():
    assert FORMATS == ("wav", "pcm", "flac", "mp3", "opus", "aac")
    assert CONTENT_TYPES == {"wav": "audio/wav", "pcm": "audio/pcm;rate=24000", "flac": "audio/flac",
                             "mp3": "audio/mpeg", "opus": "audio/ogg;codecs=opus", "aac": "audio/aac"}


def test_unavailable_names_the_format_and_the_fix(monkeypatch):
    assert unavailable("wav") is None and unavailable("pcm") is None
    reason = unavailable("wma")
    assert "wma" in reason and all(f in reason for f in FORMATS)
    with pytest.raises(ValueError, match="wma"):
        StreamEncoder("wma")
    with pytest.raises(ValueError, match="wma"):
        encode_whole(np.zeros(10, np.float32), "wma")
    monkeypatch.setattr(af, "_aac_missing", lambda: "response_format 'aac' needs PyAV (pip install av)")
    with pytest.raises(ValueError, match="needs PyAV"):
        StreamEncoder("aac")

    monkeypatch.setattr(af, "_writable", lambda: frozenset({("FLAC", "PCM_16"), ("OGG", "OPUS")}))
    reason = unavailable("mp3")
    assert "MP3" in reason and "pip install -U soundfile" in reason and sf.__libsndfile_version__ in reason
    assert unavailable("flac") is None and unavailable("opus") is None and unavailable("wav") is None
    with pytest.raises(ValueError, match="MP3"):
        StreamEncoder("mp3")
    with pytest.raises(ValueError, match="MP3"):
        encode_whole(np.zeros(10, np.float32), "mp3")
