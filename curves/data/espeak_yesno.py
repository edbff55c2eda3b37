"""A synthetic stand-in for the YESNO corpus: isolated "yes"/"no" words spoken by espeak-ng.

OpenSLR's waves_yesno holds 60 recordings of 8 yes/no words by one speaker; here each clip is one word (why:
``docs/research/bank_notes.md``), and the model's per-word read-out is used with ``words = 1``.  Clips vary
voice (8 English accents × 11 voice variants), pitch, speed and amplitude, and get white noise at a random
SNR, so the task is not trivially separable.  Features are log-mel (40 bands, a hop of 1,024 samples at
22,050 Hz) standardised over the set; clips are cached under ~/.cache/mara-curves because synthesis takes a
few seconds.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import wave
from pathlib import Path

import numpy as np
import torch

from curves.data.errors import DataMissingError
from curves.data.logmel import fix_frames, log_mel

INSTALL_HINT = "sudo apt-get install espeak-ng"
ACCENTS = ["en-us", "en-gb", "en-gb-scotland", "en-gb-x-rp", "en-gb-x-gbclan", "en-gb-x-gbcwmd", "en-029", "en-us-nyc"]
VARIANTS = ["", "+m1", "+m2", "+m3", "+m4", "+m5", "+f1", "+f2", "+f3", "+f4", "+croak"]
WORDS = 1
FRAMES = 32  # hops of 1,024 samples at 22,050 Hz: 1.5 s, longer than the slowest single word; standards: definition
N_CLIPS = 1000
SEED = 0
VERSION = 2


def synthesize(text: str, voice: str, pitch: int, speed: int, amplitude: int) -> tuple[np.ndarray, int]:
    """Speak ``text`` with espeak-ng and return (mono float waveform in [-1, 1], sample rate)."""
    program = shutil.which("espeak-ng")
    if program is None:
        raise DataMissingError(f"espeak-ng is not installed. Install it with: {INSTALL_HINT}")
    raw = subprocess.run([program, "-v", voice, "-p", str(pitch), "-s", str(speed), "-a", str(amplitude), "--stdout",
                          text], capture_output=True, check=True).stdout
    with wave.open(io.BytesIO(raw)) as reader:  # espeak streams a header with a bogus length; read what is there
        rate = reader.getframerate()
    samples = np.frombuffer(raw[44:], dtype="<i2").astype(np.float32) / 32768.0
    return samples, rate


def make_clip(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """One random clip: (FRAMES, 40) log-mel features and its WORDS labels (1 = yes)."""
    labels = rng.integers(0, 2, size=WORDS)
    text = ", ".join("yes" if v else "no" for v in labels)
    voice = ACCENTS[rng.integers(len(ACCENTS))] + VARIANTS[rng.integers(len(VARIANTS))]
    pitch, speed, amplitude = int(rng.integers(20, 80)), int(rng.integers(150, 260)), int(rng.integers(60, 180))
    wave_, rate = synthesize(text, voice, pitch, speed, amplitude)
    snr_db = rng.uniform(-5.0, 15.0)
    power = float(np.mean(wave_**2)) + 1e-12
    noisy = wave_ + rng.normal(0.0, np.sqrt(power / 10 ** (snr_db / 10)), size=wave_.shape)
    return fix_frames(log_mel(noisy, rate, n_fft=1024, hop=1024), FRAMES), labels


def _cache_path() -> Path:
    key = hashlib.sha256(f"{VERSION}/{WORDS}/{N_CLIPS}/{SEED}/{FRAMES}/{ACCENTS}/{VARIANTS}".encode()).hexdigest()[:12]
    base = Path(os.environ.get("MARA_CURVES_CACHE", Path.home() / ".cache" / "mara-curves"))
    return base / f"espeak_yesno_{key}.npz"


def load_espeak_yesno() -> tuple[torch.Tensor, torch.Tensor]:
    """Standardised features (N, FRAMES, 40) float32 and labels (N, WORDS) int64, synthesised once and cached."""
    path = _cache_path()
    if not path.is_file():
        rng = np.random.default_rng(SEED)
        clips = [make_clip(rng) for _ in range(N_CLIPS)]
        feats = np.stack([c[0] for c in clips])
        feats = (feats - feats.mean()) / feats.std()
        labels = np.stack([c[1] for c in clips]).astype(np.int64)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp.npz")
        np.savez_compressed(tmp, features=feats.astype(np.float32), labels=labels)
        os.replace(tmp, path)
    with np.load(path) as data:
        return torch.from_numpy(data["features"]), torch.from_numpy(data["labels"])
