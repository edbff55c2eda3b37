"""SimpleViT (Beyer et al. 2022, "Better plain ViT baselines"): fixed 2-D sin-cos positions, mean pooling."""

from __future__ import annotations

import torch
from torch import nn


def sincos_2d(side: int, dim: int, temperature: float = 10000.0) -> torch.Tensor:
    """Fixed 2-D sine-cosine position embedding, (side², dim); dim must be divisible by 4."""
    y, x = torch.meshgrid(torch.arange(side), torch.arange(side), indexing="ij")
    omega = 1.0 / temperature ** (torch.arange(dim // 4) / (dim // 4 - 1))
    y = y.flatten()[:, None] * omega[None]
    x = x.flatten()[:, None] * omega[None]
    return torch.cat((x.sin(), x.cos(), y.sin(), y.cos()), dim=1).float()


class SimpleViT(nn.Module):
    """Patchify → linear → pre-norm Transformer encoder → mean over patches → linear head."""

    def __init__(self, in_channels: int, image_size: int, num_classes: int, patch: int = 7, dim: int = 64,
                 depth: int = 2, heads: int = 4, mlp: int = 128):
        super().__init__()
        if image_size % patch:
            raise ValueError(f"image size {image_size} is not a multiple of patch size {patch}")
        self.patch = patch
        patch_dim = in_channels * patch * patch
        self.embed = nn.Sequential(nn.LayerNorm(patch_dim), nn.Linear(patch_dim, dim), nn.LayerNorm(dim))
        self.register_buffer("pos", sincos_2d(image_size // patch, dim), persistent=False)
        layer = nn.TransformerEncoderLayer(dim, heads, mlp, dropout=0.0, activation="gelu", batch_first=True,
                                           norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, c, h, w = x.shape
        p = self.patch
        grid = x.reshape(n, c, h // p, p, w // p, p).permute(0, 2, 4, 1, 3, 5)
        patches = grid.reshape(n, (h // p) * (w // p), c * p * p)
        tokens = self.encoder(self.embed(patches) + self.pos)
        return self.head(self.norm(tokens.mean(dim=1)))
