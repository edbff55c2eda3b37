"""Attention LSTM text classifier (the paper's "Attention LSTM"): embeddings → LSTM → additive attention pool."""

from __future__ import annotations

import torch
from torch import nn

PAD = 0


class AttentionLSTM(nn.Module):
    """Attention over LSTM states, with padding positions masked out, then a linear classifier."""

    def __init__(self, vocab_size: int, num_classes: int, embed: int = 32, hidden: int = 32, layers: int = 1):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, embed, padding_idx=PAD)
        self.lstm = nn.LSTM(embed, hidden, num_layers=layers, batch_first=True)
        self.score = nn.Sequential(nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, 1, bias=False))
        self.head = nn.Linear(hidden, num_classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        states, _ = self.lstm(self.embed(tokens))
        scores = self.score(states).squeeze(-1).masked_fill(tokens == PAD, float("-inf"))
        empty = (tokens == PAD).all(dim=1, keepdim=True)  # an all-padding row would give NaN weights
        weights = torch.softmax(scores.masked_fill(empty, 0.0), dim=1)
        return self.head((weights.unsqueeze(-1) * states).sum(dim=1))
