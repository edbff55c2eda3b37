"""Deterministic per-curve recipes: every random choice of a curve derives from (family, split, index).

Hashing the curve's identity (rather than drawing from one global stream) means any single curve can be
regenerated, skipped or generated out of order without changing any other curve — the property that makes
generation resumable and the shipped bank reproducible.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

LR_RANGE = (3e-4, 3e-3)  # paper Appendix A.2: base learning rate log-uniform on [3e-4, 3e-3]


@dataclass(frozen=True)
class Recipe:
    """The random part of one training run: initialisation seed, data-order seed, batch size, learning rate."""

    seed: int
    data_seed: int
    batch_size: int
    lr: float


def curve_entropy(family: str, split: str, index: int) -> int:
    """A 64-bit integer fixed by the curve's identity alone (SHA-256, so stable across Python versions)."""
    digest = hashlib.sha256(f"mara-curve/{family}/{split}/{index}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


def draw_recipe(family: str, split: str, index: int, batch_sizes: Sequence[int],
                lr_range: tuple[float, float] = LR_RANGE) -> Recipe:
    """Draw the recipe of curve ``family/split/index``: batch size uniform on ``batch_sizes``, lr log-uniform."""
    rng = np.random.default_rng(curve_entropy(family, split, index))
    seed, data_seed = (int(v) for v in rng.integers(0, 2**31 - 1, size=2))
    batch_size = int(batch_sizes[int(rng.integers(len(batch_sizes)))])
    low, high = lr_range
    lr = float(math.exp(rng.uniform(math.log(low), math.log(high))))
    return Recipe(seed=seed, data_seed=data_seed, batch_size=batch_size, lr=lr)
