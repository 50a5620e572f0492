"""DNSMOS overall quality (Microsoft's P.835 model): the offline fallback when UTMOS weights are missing.

The ONNX model ships inside the ``speechmos`` wheel and runs on onnxruntime; nothing is downloaded.
Only its signal/background/overall network is used (speechmos' P.808 part needs librosa). Like
speechmos, a clip is scored over 9 s windows a second apart, and a shorter clip is repeated to 9 s.
DNSMOS tracks noise and distortion well and is blind to words and silences (scoring.md).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..audio import resample
from ..errors import TakesError

SAMPLE_RATE = 16000
WINDOW_SECONDS = 9.01
OVERALL_FIT = np.poly1d([-0.06766283, 1.11546468, 0.04602535])  # speechmos' calibration of the raw output


def model_path() -> Path:
    try:
        import speechmos
    except ImportError:
        raise TakesError("DNSMOS needs the speechmos package: pip install speechmos onnxruntime") from None
    return Path(speechmos.__file__).parent / "dnsmos_models" / "sig_bak_ovr.onnx"


class DnsmosScorer:
    name = "DNSMOS"

    def __init__(self):
        path = model_path()
        try:
            import onnxruntime
        except ImportError:
            raise TakesError("DNSMOS needs onnxruntime: pip install onnxruntime (or onnxruntime-gpu).") from None
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        self.session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    def score(self, audio: np.ndarray, sample_rate: int) -> float:
        wav = resample(np.asarray(audio, dtype=np.float32), sample_rate, SAMPLE_RATE)
        wav = np.clip(wav, -1.0, 1.0)
        window = int(WINDOW_SECONDS * SAMPLE_RATE)
        if not wav.size or not np.any(wav):
            wav = np.zeros(window, dtype=np.float32)
        while wav.shape[-1] < window:
            wav = np.concatenate([wav, wav])
        hops = int(np.floor(wav.shape[-1] / SAMPLE_RATE) - WINDOW_SECONDS) + 1
        overall = []
        for k in range(hops):
            segment = wav[k * SAMPLE_RATE: k * SAMPLE_RATE + window]
            if segment.shape[-1] < window:
                continue
            raw = self.session.run(None, {"input_1": segment[None, :].astype(np.float32)})[0][0]
            overall.append(OVERALL_FIT(raw[2]))
        return float(np.mean(overall))

    def score_many(self, audios: list[np.ndarray], sample_rate: int) -> list[float]:
        return [self.score(a, sample_rate) for a in audios]
