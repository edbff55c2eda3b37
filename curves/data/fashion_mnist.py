"""Fashion-MNIST (Xiao et al. 2017) from the Debian package ``dataset-fashion-mnist``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from curves.data.errors import DataMissingError
from curves.data.idx import read_idx

DEFAULT_DIR = Path("/usr/share/datasets/fashion-mnist")
INSTALL_HINT = "sudo apt-get install dataset-fashion-mnist   (or pass --data-root with the four IDX files)"
# Per-pixel statistics of the training set; standardising keeps Adam's early steps comparable across models.
MEAN, STD = 0.2860, 0.3530


def _find(directory: Path, stem: str) -> Path:
    for name in (f"{stem}.gz", stem):
        if (directory / name).is_file():
            return directory / name
    raise DataMissingError(f"Fashion-MNIST file {stem}[.gz] not found in {directory}. Install it with: {INSTALL_HINT}")


def load_fashion_mnist(directory: str | Path | None = None, train: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Standardised images (N, 1, 28, 28) float32 and labels (N,) int64 of the train (60k) or test (10k) set."""
    directory = Path(directory) if directory is not None else DEFAULT_DIR
    prefix = "train" if train else "t10k"
    images = read_idx(_find(directory, f"{prefix}-images-idx3-ubyte"))
    labels = read_idx(_find(directory, f"{prefix}-labels-idx1-ubyte"))
    if images.shape[0] != labels.shape[0]:
        raise ValueError(f"{directory}: {images.shape[0]} images but {labels.shape[0]} labels")
    x = (images.astype(np.float32) / 255.0 - MEAN) / STD
    return torch.from_numpy(x[:, None].copy()), torch.from_numpy(labels.astype(np.int64))
