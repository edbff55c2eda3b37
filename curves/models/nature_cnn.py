"""The DQN "Nature" CNN (Mnih et al. 2015) over stacked grayscale frames, used as a DAgger policy."""

from __future__ import annotations

import torch
from torch import nn


class NatureCNN(nn.Sequential):
    """conv 8×8/4 → conv 4×4/2 → conv 3×3/1 → fc → action logits; ``widths`` = (c1, c2, c3, fc), input side×side."""

    def __init__(self, frames: int, num_actions: int, widths: tuple[int, int, int, int] = (32, 64, 64, 512),
                 side: int = 84):
        c1, c2, c3, fc = widths
        out = ((side - 8) // 4 + 1 - 4) // 2 + 1 - 2
        super().__init__(
            nn.Conv2d(frames, c1, 8, 4), nn.ReLU(),
            nn.Conv2d(c1, c2, 4, 2), nn.ReLU(),
            nn.Conv2d(c2, c3, 3, 1), nn.ReLU(),
            nn.Flatten(), nn.Linear(c3 * out * out, fc), nn.ReLU(), nn.Linear(fc, num_actions))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.float() / 255.0)
