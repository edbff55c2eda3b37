"""OpenSLR SLR1 YESNO corpus (``waves_yesno``): 60 recordings of 8 Hebrew yes/no words, labels in file names."""

from __future__ import annotations

import wave
from pathlib import Path

import numpy as np
import torch

from curves.data.errors import missing_under
from curves.data.logmel import fix_frames, log_mel

WORDS = 8
FRAMES = 128  # hops of 256 samples at 8 kHz: a recording's first 4.1 s (docs/research/bank_notes.md); standards: definition


def find_yesno(data_root: str | Path | None) -> Path | None:
    """The ``waves_yesno`` folder under ``data_root`` (or ``data_root`` itself), if it holds labelled wavs."""
    if data_root is None:
        return None
    for candidate in (Path(data_root) / "waves_yesno", Path(data_root)):
        if candidate.is_dir() and any(_labels(p) is not None for p in candidate.glob("*.wav")):
            return candidate
    return None


def _labels(path: Path) -> list[int] | None:
    parts = path.stem.split("_")
    if len(parts) == WORDS and all(p in ("0", "1") for p in parts):
        return [int(p) for p in parts]
    return None


def read_wav(path: Path) -> tuple[np.ndarray, int]:
    """Mono 16-bit PCM wav as float in [-1, 1] and its sample rate."""
    with wave.open(str(path)) as reader:
        if reader.getsampwidth() != 2:
            raise ValueError(f"{path}: expected 16-bit PCM, got {8 * reader.getsampwidth()}-bit")
        data = np.frombuffer(reader.readframes(reader.getnframes()), dtype="<i2").astype(np.float32) / 32768.0
        channels, rate = reader.getnchannels(), reader.getframerate()
    return data.reshape(-1, channels).mean(axis=1), rate


def load_waves_yesno(data_root: str | Path | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Standardised log-mel features (N, FRAMES, 40) and the 8 labels per recording (N, 8)."""
    folder = find_yesno(data_root)
    if folder is None:
        raise missing_under("waves_yesno/*.wav", data_root,
                            "download waves_yesno.tar.gz from https://www.openslr.org/1/")
    feats, labels = [], []
    for path in sorted(folder.glob("*.wav")):
        label = _labels(path)
        if label is None:
            continue
        samples, rate = read_wav(path)
        feats.append(fix_frames(log_mel(samples, rate, n_fft=512, hop=256), FRAMES))
        labels.append(label)
    x = np.stack(feats)
    x = (x - x.mean()) / x.std()
    return torch.from_numpy(x.astype(np.float32)), torch.tensor(labels, dtype=torch.int64)
