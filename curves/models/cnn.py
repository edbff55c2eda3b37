"""A small two-block convolutional classifier (the paper's "CNN classifier")."""

from __future__ import annotations

from torch import nn


class SmallCNN(nn.Sequential):
    """conv-relu-pool ×2 then a two-layer MLP head; ``width`` is the first block's channel count."""

    def __init__(self, in_channels: int, image_size: int, num_classes: int, width: int = 16, hidden: int = 64):
        side = image_size // 4
        super().__init__(
            nn.Conv2d(in_channels, width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(2 * width * side * side, hidden), nn.ReLU(), nn.Linear(hidden, num_classes))
