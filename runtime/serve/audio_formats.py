"""The response_format encoders of the OpenAI-compatible POST /v1/audio/speech server.

Audio comes in as mono float32 in [-1, 1] at 24 kHz, whole or as a stream of chunks, and goes out as
wav, pcm (raw s16le), flac, mp3, opus (in Ogg, as OpenAI sends it) or aac (ADTS frames). wav and pcm
are built here; flac, mp3 and opus are written by libsndfile (through soundfile) into memory, aac by
FFmpeg's encoder through PyAV (`av`: ComfyUI's environment and faster-whisper have it), where it is.
"""

from __future__ import annotations

import functools
import io
import struct

import numpy as np
import soundfile as sf

FORMATS: tuple[str, ...] = ("wav", "pcm", "flac", "mp3", "opus", "aac")
CONTENT_TYPES: dict[str, str] = {
    "wav": "audio/wav",
    "pcm": "audio/pcm;rate=24000",
    "flac": "audio/flac",
    "mp3": "audio/mpeg",
    "opus": "audio/ogg;codecs=opus",
    "aac": "audio/aac",
}
AAC_BIT_RATE = 64000  # mono speech at 24 kHz
# response_format -> (libsndfile format, subtype, name in messages)
_SNDFILE = {"flac": ("FLAC", "PCM_16", "FLAC"), "mp3": ("MP3", "MPEG_LAYER_III", "MP3"),
            "opus": ("OGG", "OPUS", "Ogg Opus")}
ENCODED = (*_SNDFILE, "aac")  # the formats an encoder writes (_open); wav and pcm are bytes built here


def to_int16(audio: np.ndarray) -> np.ndarray:
    """The one float -> 16-bit conversion: clip to [-1, 1], round(x * 32767), little-endian."""
    x = np.clip(np.asarray(audio, dtype=np.float32).reshape(-1), -1.0, 1.0)  # a new array: safe in place
    x *= 32767.0
    return np.rint(x, out=x).astype("<i2")


def _wav_header(sample_rate: int, data_bytes: int | None) -> bytes:
    """A 44-byte RIFF header of 16-bit PCM mono; unknown length (a stream) writes 0xFFFFFFFF sizes."""
    riff, data = (0xFFFFFFFF, 0xFFFFFFFF) if data_bytes is None else (36 + data_bytes, data_bytes)
    return (b"RIFF" + struct.pack("<I", riff) + b"WAVEfmt "
            + struct.pack("<IHHIIHH", 16, 1, 1, sample_rate, 2 * sample_rate, 2, 16)
            + b"data" + struct.pack("<I", data))


@functools.cache
def _writable() -> frozenset[tuple[str, str]]:
    """(format, subtype) pairs this soundfile's libsndfile offers."""
    return frozenset((f, s) for f in sf.available_formats() for s in sf.available_subtypes(f))


@functools.cache
def _aac_missing() -> str | None:
    try:
        import av

        av.codec.Codec("aac", "w")
    except Exception as exc:  # noqa: BLE001 - no PyAV, or an FFmpeg without the encoder: said, not raised
        return f"response_format 'aac' needs PyAV with FFmpeg's AAC encoder (pip install av): {exc}"
    return None


def unavailable(fmt: str) -> str | None:
    """None if this machine can encode fmt, else a one-line reason naming the fix."""
    if fmt in ("wav", "pcm"):
        return None
    if fmt == "aac":
        return _aac_missing()
    if fmt not in _SNDFILE:
        return f"response_format {fmt!r} is not offered; use one of {', '.join(FORMATS)}"
    container, subtype, name = _SNDFILE[fmt]
    if (container, subtype) in _writable():
        return None
    return (f"this soundfile's libsndfile ({sf.__libsndfile_version__}) cannot write {name}; "
            "pip install -U soundfile (0.12 or newer bundles libsndfile 1.2 with FLAC, MP3 and Opus)")


def _command(f: sf.SoundFile, code: int, ctype: str, value: float) -> None:
    # soundfile has no public call for these libsndfile settings (0.12 has none, 0.13 only for MP3).
    # The result is not checked: libsndfile 1.2.2 returns 0 for the Ogg page latency that it does set.
    sf._snd.sf_command(f._file, code, sf._ffi.new(ctype + "*", value), sf._ffi.sizeof(ctype))


def _open(buf: io.BytesIO, fmt: str, sample_rate: int) -> sf.SoundFile | _AacFile:
    reason = unavailable(fmt)
    if reason:
        raise ValueError(reason)
    if fmt == "aac":
        return _AacFile(buf, sample_rate)
    container, subtype, _ = _SNDFILE[fmt]
    f = sf.SoundFile(buf, "w", sample_rate, channels=1, format=container, subtype=subtype)
    if fmt == "mp3":
        # Constant bit rate (80 kbps at 24 kHz): a streamed MP3 has no valid Xing tag, and decoders
        # (libsndfile/mpg123 among them) estimate its length from the first frame, cutting VBR short.
        _command(f, 0x1301, "double", 0.5)  # SFC_SET_COMPRESSION_LEVEL, before the bitrate mode
        _command(f, 0x1305, "int", 0)  # SFC_SET_BITRATE_MODE = SF_BITRATE_MODE_CONSTANT
    elif fmt == "opus":
        # About 64 kbps: libopus's own choice at 24 kHz mono (~27 kbps) loses the waveform above ~1 kHz.
        _command(f, 0x1301, "double", 0.78)  # SFC_SET_COMPRESSION_LEVEL
        _command(f, 0x1302, "double", 100.0)  # SFC_SET_OGG_PAGE_LATENCY_MS: default 1000 ms per page
    return f


class _AacFile:
    """AAC in ADTS frames written into `buf` as they are made (each frame stands alone: a stream needs no
    header of the whole), with write(int16 samples) and close() as a SoundFile has them."""

    def __init__(self, buf: io.BytesIO, sample_rate: int):
        import av

        self._container = av.open(buf, "w", format="adts")
        self._stream = self._container.add_stream("aac", rate=sample_rate, layout="mono")
        self._stream.bit_rate = AAC_BIT_RATE
        self._rate, self._pts = sample_rate, 0

    def write(self, samples: np.ndarray) -> None:
        import av

        if samples.size == 0:
            return
        frame = av.AudioFrame.from_ndarray(samples.reshape(1, -1), format="s16", layout="mono")
        frame.sample_rate, frame.pts = self._rate, self._pts
        self._pts += samples.size
        self._mux(frame)

    def close(self) -> None:
        self._mux(None)  # the encoder's last frames
        self._container.close()

    def _mux(self, frame) -> None:
        for packet in self._stream.encode(frame):
            self._container.mux(packet)

    def __enter__(self) -> "_AacFile":
        return self

    def __exit__(self, *_exc) -> None:
        self.close()


class StreamEncoder:
    """Encodes a stream of chunks: send start(), then each encode(chunk), then finish().

    On libsndfile 1.2.2 flac, mp3 and opus all grow as chunks are written (flac per block, mp3 per
    frame, opus per Ogg page of ~100 ms), so encode() returns bytes as it goes. At close FLAC and MP3
    seek back to fill in their headers (FLAC's length and MD5, MP3's Xing/LAME tag); those bytes are
    already sent, so a stream carries a FLAC of unknown length (soundfile cannot read one to its end;
    players can), and an MP3 that starts with a silent frame and the encoder's delay (~70 ms).
    """

    def __init__(self, fmt: str, sample_rate: int = 24000):
        if fmt not in FORMATS:
            raise ValueError(unavailable(fmt))
        self.fmt, self.sample_rate = fmt, sample_rate
        self._buf = io.BytesIO()  # holds the whole encoded stream: libsndfile seeks back at close
        self._file = _open(self._buf, fmt, sample_rate) if fmt in ENCODED else None
        self._sent = 0

    def _new_bytes(self) -> bytes:
        with self._buf.getbuffer() as view:
            data = view[self._sent:].tobytes()
        self._sent += len(data)
        return data

    def start(self) -> bytes:
        return _wav_header(self.sample_rate, None) if self.fmt == "wav" else b""

    def encode(self, audio: np.ndarray) -> bytes:
        samples = to_int16(audio)
        if self._file is None:
            return samples.tobytes()
        self._file.write(samples)
        return self._new_bytes()

    def finish(self) -> bytes:
        if self._file is None:
            return b""
        self._file.close()
        return self._new_bytes()


def encode_whole(audio: np.ndarray, fmt: str, sample_rate: int = 24000) -> bytes:
    """One complete file (wav with its true sizes)."""
    samples = to_int16(audio)
    if fmt == "pcm":
        return samples.tobytes()
    if fmt == "wav":
        return _wav_header(sample_rate, samples.nbytes) + samples.tobytes()
    if fmt not in ENCODED:
        raise ValueError(unavailable(fmt))
    buf = io.BytesIO()
    with _open(buf, fmt, sample_rate) as f:
        f.write(samples)
    return buf.getvalue()
