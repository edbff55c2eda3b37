"""Word tokenisation and fixed-length id tensors shared by the text sources."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

import torch

PAD, UNK = 0, 1
_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")


def tokenize(text: str) -> list[str]:
    """Lower-cased words (apostrophes kept inside words); punctuation and digits dropped."""
    return _WORD.findall(text.lower())


def build_vocab(docs: Sequence[list[str]], size: int) -> dict[str, int]:
    """The ``size - 2`` most frequent words (ties broken alphabetically, so the vocabulary is deterministic)."""
    counts = Counter(word for doc in docs for word in doc)
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[: size - 2]
    return {word: i + 2 for i, (word, _) in enumerate(ranked)}


def encode(docs: Sequence[list[str]], vocab: dict[str, int], max_len: int) -> torch.Tensor:
    """(N, max_len) int64 ids, truncated to the first ``max_len`` words and right-padded with PAD."""
    out = torch.full((len(docs), max_len), PAD, dtype=torch.int64)
    for row, doc in enumerate(docs):
        ids = [vocab.get(word, UNK) for word in doc[:max_len]]
        if ids:
            out[row, : len(ids)] = torch.tensor(ids)
    return out
