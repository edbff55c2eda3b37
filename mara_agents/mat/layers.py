"""The Transformer layers MAT is built of (paper §4.2): attention with a boolean mask, the encoder block, and
the decoder block with its node-by-node step (earlier nodes' keys and values cached), all pre-LayerNorm."""

from __future__ import annotations

import math

import torch
from torch import nn


class Attention(nn.Module):
    """Multi-head scaled dot-product attention with a boolean ``allowed`` (B, Lq, Lk) mask."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        if dim % heads:
            raise ValueError(f"dim ({dim}) must be divisible by heads ({heads})")
        self.heads = heads
        self.query = nn.Linear(dim, dim)
        self.key_value = nn.Linear(dim, 2 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, memory: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
        return self.attend(x, *self.keys_values(memory), allowed)

    def keys_values(self, memory: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-head keys and values (B, heads, L, head_dim) of ``memory``; computed once and reused when
        decoding node by node."""
        batch, length, dim = memory.shape
        k, v = self.key_value(memory).view(batch, length, 2, self.heads, dim // self.heads).unbind(2)
        return k.transpose(1, 2), v.transpose(1, 2)

    def attend(self, x: torch.Tensor, k: torch.Tensor, v: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
        """Queries from ``x`` (B, Lq, D) attend to precomputed keys/values; ``allowed`` (B, Lq, Lk) or None."""
        batch, length, dim = x.shape
        head_dim = dim // self.heads
        q = self.query(x).view(batch, length, self.heads, head_dim).transpose(1, 2)
        scores = q @ k.transpose(2, 3) / math.sqrt(head_dim)
        if allowed is not None:
            scores = scores.masked_fill(~allowed[:, None], float("-inf"))
        mixed = torch.softmax(scores, dim=-1) @ v
        return self.out(mixed.transpose(1, 2).reshape(batch, length, dim))


def feed_forward(dim: int) -> nn.Sequential:
    """The block's position-wise MLP."""
    return nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))


class EncoderBlock(nn.Module):
    """Pre-LN self-attention + MLP."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.norm_attn, self.attn = nn.LayerNorm(dim), Attention(dim, heads)
        self.norm_mlp, self.mlp = nn.LayerNorm(dim), feed_forward(dim)

    def forward(self, x: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
        h = self.norm_attn(x)
        x = x + self.attn(h, h, allowed)
        return x + self.mlp(self.norm_mlp(x))


class DecoderBlock(nn.Module):
    """Pre-LN causal self-attention over nodes, cross-attention to the encoder, MLP."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.norm_self, self.self_attn = nn.LayerNorm(dim), Attention(dim, heads)
        self.norm_cross, self.cross_attn = nn.LayerNorm(dim), Attention(dim, heads)
        self.norm_mlp, self.mlp = nn.LayerNorm(dim), feed_forward(dim)

    def forward(self, x: torch.Tensor, memory: torch.Tensor, causal: torch.Tensor,
                visible: torch.Tensor) -> torch.Tensor:
        h = self.norm_self(x)
        x = x + self.self_attn(h, h, causal)
        return self.cross_and_mlp(x, self.cross_attn.keys_values(memory), visible)

    def step(self, x: torch.Tensor, past: list[tuple[torch.Tensor, torch.Tensor]],
             memory_kv: tuple[torch.Tensor, torch.Tensor], visible: torch.Tensor) -> torch.Tensor:
        """The next node's row (B, 1, D) given the earlier rows' self-attention keys/values ``past`` (this
        row's are appended): the same computation as row i of :meth:`forward`, without redoing rows < i."""
        h = self.norm_self(x)
        past.append(self.self_attn.keys_values(h))
        keys, values = (torch.cat(parts, dim=2) for parts in zip(*past))
        x = x + self.self_attn.attend(h, keys, values, None)  # every earlier node is visible: causal
        return self.cross_and_mlp(x, memory_kv, visible)

    def cross_and_mlp(self, x: torch.Tensor, memory_kv: tuple[torch.Tensor, torch.Tensor],
                      visible: torch.Tensor) -> torch.Tensor:
        """Cross-attention to the encoder's keys/values, then the MLP."""
        x = x + self.cross_attn.attend(self.norm_cross(x), *memory_kv, visible)
        return x + self.mlp(self.norm_mlp(x))


def run_encoder(blocks: nn.ModuleList, norm: nn.LayerNorm, tokens: torch.Tensor,
                present: torch.Tensor) -> torch.Tensor:
    """``blocks`` then ``norm`` over (B, 1 + K, D) tokens, the global token first; empty slots are masked
    as keys (:func:`visible_keys`)."""
    allowed = visible_keys(present).expand(-1, tokens.shape[1], -1)
    for block in blocks:
        tokens = block(tokens, allowed)
    return norm(tokens)


def visible_keys(present: torch.Tensor) -> torch.Tensor:
    """(B, 1, 1 + K) keys that may be attended: the global token always, occupied slots."""
    always = torch.ones_like(present[:, :1])
    return torch.cat([always, present], dim=1)[:, None, :]
