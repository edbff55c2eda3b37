"""Named data sources: one loader per dataset, cached per process, returning a :class:`Supervised` set."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from curves.data import cifar10, espeak_yesno, fashion_mnist, imdb, kjv, waves_yesno


@dataclass
class Supervised:
    """An in-memory classification set: inputs, integer labels, and shape facts the model builders need."""

    inputs: torch.Tensor
    labels: torch.Tensor
    info: dict[str, Any] = field(default_factory=dict)
    description: str = ""


def _fashion_mnist(data_root: Path | None) -> Supervised:
    directory = None
    if data_root is not None and (data_root / "fashion-mnist").is_dir():
        directory = data_root / "fashion-mnist"
    x, y = fashion_mnist.load_fashion_mnist(directory, train=True)
    where = directory or fashion_mnist.DEFAULT_DIR
    return Supervised(x, y, {"in_channels": 1, "image_size": 28, "num_classes": 10}, f"fashion-mnist train ({where})")


def _cifar10(data_root: Path | None) -> Supervised:
    x, y = cifar10.load_cifar10(data_root)
    return Supervised(x, y, {"in_channels": 3, "image_size": 32, "num_classes": 10}, "cifar-10 train (data_batch_1-5)")


def _kjv(data_root: Path | None) -> Supervised:
    x, y, vocab = kjv.load_kjv_testaments()
    info = {"vocab_size": vocab, "num_classes": 2}
    return Supervised(x, y, info, "KJV Bible verses, Old vs New Testament (balanced)")


def _imdb(data_root: Path | None) -> Supervised:
    x, y, vocab = imdb.load_imdb(data_root)
    return Supervised(x, y, {"vocab_size": vocab, "num_classes": 2}, "aclImdb train reviews")


def _espeak_yesno(data_root: Path | None) -> Supervised:
    x, y = espeak_yesno.load_espeak_yesno()
    info = {"frames": x.shape[1], "n_mels": x.shape[2], "words": y.shape[1]}
    return Supervised(x, y, info, "espeak-ng synthetic spoken yes/no words")


def _waves_yesno(data_root: Path | None) -> Supervised:
    x, y = waves_yesno.load_waves_yesno(data_root)
    info = {"frames": x.shape[1], "n_mels": x.shape[2], "words": y.shape[1]}
    return Supervised(x, y, info, "OpenSLR waves_yesno")


LOADERS: dict[str, Callable[[Path | None], Supervised]] = {
    "fashion-mnist": _fashion_mnist,
    "cifar10": _cifar10,
    "kjv": _kjv,
    "imdb": _imdb,
    "espeak-yesno": _espeak_yesno,
    "waves-yesno": _waves_yesno,
}
_CACHE: dict[tuple[str, str], Supervised] = {}


def register(name: str, loader: Callable[[Path | None], Supervised]) -> None:
    """Add a data source (used by the text and audio modules)."""
    LOADERS[name] = loader


def load_source(name: str, data_root: str | Path | None = None) -> Supervised:
    """Load (once per process) the data source ``name``; raises DataMissingError with a set-up hint."""
    key = (name, str(data_root))
    if key not in _CACHE:
        _CACHE[key] = LOADERS[name](Path(data_root) if data_root is not None else None)
    return _CACHE[key]
