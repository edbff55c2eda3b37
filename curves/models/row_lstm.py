"""An LSTM classifier that reads an image one pixel row at a time (the paper's "LSTM classifier")."""

from __future__ import annotations

import torch
from torch import nn


class RowLSTM(nn.Module):
    """Each row (all channels concatenated) is one time step; the last hidden state is classified."""

    def __init__(self, in_channels: int, image_size: int, num_classes: int, hidden: int = 64, layers: int = 1):
        super().__init__()
        self.lstm = nn.LSTM(in_channels * image_size, hidden, num_layers=layers, batch_first=True)
        self.head = nn.Linear(hidden, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.permute(0, 2, 1, 3).flatten(2)  # (N, H, C·W)
        out, _ = self.lstm(rows)
        return self.head(out[:, -1])
