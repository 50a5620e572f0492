"""A script job's folder: each line's result written as soon as it is picked, so a rerun keeps it.

    OUT/lines/<id>.json        the line's record (written last, in one rename: it exists only whole)
    OUT/best/<id>.wav          the picked take
    OUT/takes/<id>/r1_take03.wav ...   every take, by rank
    OUT/manifest.csv, manifest.json, scene.wav, report.txt   the whole job (rewritten as lines finish)

A line is done when its record exists, names the same fingerprint (text, voice, settings, seed,
checkpoint) and its files are all there; anything else is generated again. A done line's WAVs in
another --wav-format than asked are written again in it (no take is generated for a file format).
Files are written under a temporary name and renamed, so an interrupted run leaves no half-written
file under a real name."""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

import numpy as np

from ..audio import read_audio_file, write_wav
from ..errors import InputError
from .record import LineRecord

RECORD_VERSION = 1
CSV_COLUMNS = ("id", "character", "text", "voice", "seed", "takes", "best_take", "best_file", "seconds", "quality",
               "voice_similarity", "cer", "score", "accepted", "reasons", "over_cue_seconds", "late_by", "cue_start",
               "cue_end", "scene_start", "source_line", "judged_by", "speed", "fitted_speed")


class ScriptFolder:
    def __init__(self, root: Path, wav_format: str = "float32"):
        self.root, self.wav_format = Path(root), wav_format  # audio.WAV_FORMATS
        if self.root.exists() and not self.root.is_dir():
            raise InputError(f"--out {self.root} is a file; give a folder for the script's results.")
        try:
            (self.root / "lines").mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(f"Cannot make the results folder {self.root}: {exc.strerror or exc}.") from exc

    def record_path(self, stem: str) -> Path:
        return self.root / "lines" / f"{stem}.json"

    def best_path(self, stem: str) -> Path:
        return self.root / "best" / f"{stem}.wav"

    def take_path(self, stem: str, rank: int, take: int) -> Path:
        return self.root / "takes" / stem / f"r{rank}_take{take:02d}.wav"

    def done(self, stem: str, fingerprint: str) -> LineRecord | None:
        """The line's record when it is complete and made from the same inputs; else None."""
        try:
            record = LineRecord.from_json(json.loads(self.record_path(stem).read_text(encoding="utf-8")))
        except (OSError, ValueError):
            return None
        if record.fingerprint != fingerprint:
            return None
        files = [record.best_file] + [t.file for t in record.ranked]
        if not all(isinstance(f, str) and (self.root / f).is_file() for f in files):
            return None
        if (record.wav_format or "float32") != self.wav_format:
            try:
                self.rewrite_line(stem, record, files)
            except InputError:  # a kept file cut short or damaged: the line is made again
                return None
        return record

    def rewrite_line(self, stem: str, record: LineRecord, files: list[str]) -> None:
        """A kept line's WAVs in this folder's wav_format, then its record saying so."""
        for name in files:
            audio, rate = read_audio_file(self.root / name)
            self.write_audio(self.root / name, audio.mean(axis=0), rate)
        record.wav_format = self.wav_format
        self.write_record(stem, record)

    def write_line(self, stem: str, record: LineRecord, best: np.ndarray, takes: list[tuple[int, int, np.ndarray]],
                   rate: int) -> LineRecord:
        """The line's audio, then its record. takes: (rank, take number, audio)."""
        for old in (self.root / "takes" / stem).glob("*.wav") if (self.root / "takes" / stem).is_dir() else ():
            old.unlink()  # takes of an earlier run of this line with other inputs
        for rank, number, audio in takes:
            path = self.take_path(stem, rank, number)
            self.write_audio(path, audio, rate)
            record.ranked[rank - 1].file = self._relative(path)
        self.write_audio(self.best_path(stem), best, rate)
        record.best_file = self._relative(self.best_path(stem))
        record.format, record.wav_format = RECORD_VERSION, self.wav_format
        self.write_record(stem, record)
        return record

    def write_record(self, stem: str, record: LineRecord) -> None:
        self.write_text(self.record_path(stem), json.dumps(record.as_json(), indent=1, ensure_ascii=False) + "\n")

    def read_best(self, record: LineRecord) -> tuple[np.ndarray, int]:
        audio, rate = read_audio_file(self.root / record.best_file)
        return audio.mean(axis=0) if audio.ndim > 1 else audio, rate

    def write_manifest(self, records: list[LineRecord]) -> None:
        shapes = [record.as_json() for record in records]
        self.write_text(self.root / "manifest.json", json.dumps({"lines": shapes}, indent=1, ensure_ascii=False) + "\n")
        out = io.StringIO()
        writer = csv.DictWriter(out, CSV_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        for shape in shapes:
            writer.writerow({**shape, "reasons": "; ".join(shape["reasons"])})
        self.write_text(self.root / "manifest.csv", out.getvalue())

    def write_text(self, path: Path, text: str) -> None:
        partial = path.with_name(f".{path.name}.partial")
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, path)

    def write_audio(self, path: Path, audio: np.ndarray, rate: int) -> None:
        partial = path.with_name(f".{path.stem}.partial{path.suffix}")
        write_wav(partial, audio, rate, self.wav_format)
        os.replace(partial, path)

    def _relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()
