"""Log-mel spectrogram in NumPy (torchaudio is not a dependency): Hann STFT → power → mel filterbank → log."""

from __future__ import annotations

import numpy as np


def hz_to_mel(hz: np.ndarray | float) -> np.ndarray:
    """HTK mel scale, 2595·log10(1 + f/700)."""
    return 2595.0 * np.log10(1.0 + np.asarray(hz, dtype=np.float64) / 700.0)


def mel_to_hz(mel: np.ndarray | float) -> np.ndarray:
    """Inverse of :func:`hz_to_mel`."""
    return 700.0 * (10.0 ** (np.asarray(mel, dtype=np.float64) / 2595.0) - 1.0)


def mel_filterbank(sample_rate: int, n_fft: int, n_mels: int, fmin: float = 20.0,
                   fmax: float | None = None) -> np.ndarray:
    """(n_mels, n_fft//2 + 1) triangular filters equally spaced on the mel scale."""
    fmax = fmax or sample_rate / 2
    freqs = np.linspace(0, sample_rate / 2, n_fft // 2 + 1)
    edges = mel_to_hz(np.linspace(hz_to_mel(fmin), hz_to_mel(fmax), n_mels + 2))
    lower, centre, upper = edges[:-2, None], edges[1:-1, None], edges[2:, None]
    rising = (freqs[None] - lower) / (centre - lower)
    falling = (upper - freqs[None]) / (upper - centre)
    return np.clip(np.minimum(rising, falling), 0.0, None)


def log_mel(wave: np.ndarray, sample_rate: int, n_fft: int = 1024, hop: int = 512, n_mels: int = 40) -> np.ndarray:
    """(frames, n_mels) float32 log-mel energies of a mono waveform (zero-padded to at least one frame)."""
    wave = np.asarray(wave, dtype=np.float64)
    if wave.size < n_fft:
        wave = np.pad(wave, (0, n_fft - wave.size))
    frames = 1 + (wave.size - n_fft) // hop
    idx = np.arange(n_fft)[None] + hop * np.arange(frames)[:, None]
    spectrum = np.abs(np.fft.rfft(wave[idx] * np.hanning(n_fft)[None], axis=1)) ** 2
    mel = spectrum @ mel_filterbank(sample_rate, n_fft, n_mels).T
    return np.log(mel + 1e-6).astype(np.float32)


def fix_frames(features: np.ndarray, frames: int) -> np.ndarray:
    """Crop or right-pad (with the minimum value, i.e. silence) to exactly ``frames`` rows."""
    if features.shape[0] >= frames:
        return features[:frames]
    pad = np.full((frames - features.shape[0], features.shape[1]), features.min(), dtype=features.dtype)
    return np.concatenate([features, pad])
