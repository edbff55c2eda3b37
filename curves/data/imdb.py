"""IMDB movie reviews (Maas et al. 2011) from the ``aclImdb`` folder: binary sentiment on the train split."""

from __future__ import annotations

from pathlib import Path

import torch

from curves.data.errors import missing_under
from curves.data.text import build_vocab, encode, tokenize

VOCAB_SIZE = 20000
MAX_LEN = 256


def find_imdb(data_root: str | Path | None) -> Path | None:
    """The ``aclImdb`` folder under ``data_root`` (or ``data_root`` itself), if it has train/pos and train/neg."""
    if data_root is None:
        return None
    for candidate in (Path(data_root) / "aclImdb", Path(data_root)):
        if (candidate / "train" / "pos").is_dir() and (candidate / "train" / "neg").is_dir():
            return candidate
    return None


def load_imdb(data_root: str | Path | None) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Token ids (N, MAX_LEN), labels (0 = negative, 1 = positive) and the vocabulary size."""
    folder = find_imdb(data_root)
    if folder is None:
        raise missing_under("aclImdb/train/{pos,neg}", data_root,
                            "download aclImdb_v1.tar.gz from https://ai.stanford.edu/~amaas/data/sentiment/")
    docs, labels = [], []
    for label, sub in ((0, "neg"), (1, "pos")):
        for path in sorted((folder / "train" / sub).glob("*.txt")):
            docs.append(tokenize(path.read_text(encoding="utf-8", errors="replace").replace("<br />", " ")))
            labels.append(label)
    vocab = build_vocab(docs, VOCAB_SIZE)
    return encode(docs, vocab, MAX_LEN), torch.tensor(labels, dtype=torch.int64), VOCAB_SIZE
