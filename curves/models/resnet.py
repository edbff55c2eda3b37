"""ResNet-18/34 (He et al. 2016) with the small-image stem used for CIFAR-sized inputs.

The stem is a single 3×3 stride-1 convolution (no 7×7 conv or max-pool), the standard adaptation for
28–32 px images.  ``width`` is the first stage's channel count: 64 is the standard network; the cpu preset
narrows it and uses ``stem_stride=2`` (stages at 14, 7, 4, 2 px for 28 px input) so a bank regenerates on a
laptop CPU while keeping the depth and block structure.
"""

from __future__ import annotations

import torch
from torch import nn

DEPTHS = {18: (2, 2, 2, 2), 34: (3, 4, 6, 3)}


class BasicBlock(nn.Module):
    """Two 3×3 conv-BN layers with an identity (or 1×1 projection) shortcut."""

    def __init__(self, in_ch: int, out_ch: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, out_ch, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_ch)
        self.conv2 = nn.Conv2d(out_ch, out_ch, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_ch)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or in_ch != out_ch:
            self.shortcut = nn.Sequential(nn.Conv2d(in_ch, out_ch, 1, stride, bias=False), nn.BatchNorm2d(out_ch))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class ResNet(nn.Module):
    """ResNet with four stages of widths w, 2w, 4w, 8w; ``depth`` is 18 or 34."""

    def __init__(self, depth: int, in_channels: int, num_classes: int, width: int = 64, stem_stride: int = 1):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(in_channels, width, 3, stem_stride, 1, bias=False), nn.BatchNorm2d(width),
                                  nn.ReLU())
        stages, ch = [], width
        for i, blocks in enumerate(DEPTHS[depth]):
            out = width * 2**i
            for b in range(blocks):
                stages.append(BasicBlock(ch, out, 2 if (b == 0 and i > 0) else 1))
                ch = out
        self.stages = nn.Sequential(*stages)
        self.head = nn.Linear(ch, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.stages(self.stem(x)).mean(dim=(2, 3)))
