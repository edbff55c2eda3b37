"""Transformer-encoder classifier over log-mel frames that labels every word of a fixed-length utterance."""

from __future__ import annotations

import math

import torch
from torch import nn


def sinusoidal_positions(length: int, dim: int) -> torch.Tensor:
    """The fixed sine/cosine position code of Vaswani et al. (2017), (length, dim); dim must be even."""
    pos = torch.arange(length, dtype=torch.float32)[:, None]
    freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
    code = torch.zeros(length, dim)
    code[:, 0::2] = torch.sin(pos * freq)
    code[:, 1::2] = torch.cos(pos * freq)
    return code


class AudioTransformer(nn.Module):
    """Frames → linear → pre-norm Transformer encoder → one learned query per word attends over the frames →
    (N, classes, words) logits.  Word k has no fixed time (speech rate varies), so each word gets its own
    attention read-out rather than a shared mean pool.  The output layout lets ``cross_entropy(logits, labels)``
    with labels (N, words) average over all words.
    """

    def __init__(self, frames: int, n_mels: int, words: int, num_classes: int = 2, dim: int = 32, depth: int = 2,
                 heads: int = 2, mlp: int = 64):
        super().__init__()
        self.words, self.num_classes = words, num_classes
        self.proj = nn.Linear(n_mels, dim)
        self.register_buffer("pos", sinusoidal_positions(frames, dim), persistent=False)
        layer = nn.TransformerEncoderLayer(dim, heads, mlp, dropout=0.0, activation="gelu", batch_first=True,
                                           norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.queries = nn.Parameter(torch.randn(words, dim) * dim**-0.5)
        self.readout = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = self.norm(self.encoder(self.proj(x) + self.pos[: x.shape[1]]))
        queries = self.queries.unsqueeze(0).expand(x.shape[0], -1, -1)
        per_word, _ = self.readout(queries, tokens, tokens, need_weights=False)
        return self.head(per_word).transpose(1, 2)
