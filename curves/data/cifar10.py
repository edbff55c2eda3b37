"""CIFAR-10 from the official "python version" batches (``cifar-10-batches-py`` under ``--data-root``)."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import torch

from curves.data.errors import missing_under

FOLDER = "cifar-10-batches-py"
MEAN = np.array([0.4914, 0.4822, 0.4465], dtype=np.float32)
STD = np.array([0.2470, 0.2435, 0.2616], dtype=np.float32)


def find_cifar10(data_root: str | Path | None) -> Path | None:
    """The ``cifar-10-batches-py`` folder under ``data_root`` (or ``data_root`` itself), if present."""
    if data_root is None:
        return None
    root = Path(data_root)
    for candidate in (root / FOLDER, root):
        if (candidate / "data_batch_1").is_file():
            return candidate
    return None


def load_cifar10(data_root: str | Path | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Standardised training images (N, 3, 32, 32) float32 and labels (N,) int64 from all data_batch_* files."""
    folder = find_cifar10(data_root)
    if folder is None:
        raise missing_under(f"CIFAR-10 python batches ({FOLDER}/data_batch_1..5)", data_root,
                            "download cifar-10-python.tar.gz from https://www.cs.toronto.edu/~kriz/cifar.html")
    images, labels = [], []
    for path in sorted(folder.glob("data_batch_*")):
        with open(path, "rb") as handle:
            batch = pickle.load(handle, encoding="bytes")
        images.append(np.asarray(batch[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32))
        labels.append(np.asarray(batch[b"labels"], dtype=np.int64))
    x = np.concatenate(images).astype(np.float32) / 255.0
    x = (x - MEAN[:, None, None]) / STD[:, None, None]
    return torch.from_numpy(x), torch.from_numpy(np.concatenate(labels))
