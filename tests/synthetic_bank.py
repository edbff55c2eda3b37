"""A small synthetic curve bank for tests: noisy power laws with plateaus, written in the real bank format."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from curves.bank import BankWriter, CurveRecord, FamilySpec

ID_BUDGET = {"kind": "interval", "low": 285, "high": 315}
OOD_BUDGET = {"kind": "set", "values": [285, 295, 305, 315]}
CROSSING = {"low": 0.4, "high": 1.26, "early_batches": 4, "early_margin": 0.01}
FAMILIES = tuple(dataclasses.replace(spec, crossing=CROSSING) for spec in (
    FamilySpec("toy_fast", "id", "image", "synthetic", "power law", {"kind": "scaled", "base": 0.55, "low": 0.9,
                                                                     "high": 1.1}, ID_BUDGET),
    FamilySpec("toy_slow", "id", "text", "synthetic", "power law", {"kind": "scaled", "base": 0.9, "low": 0.9,
                                                                    "high": 1.1}, ID_BUDGET),
    FamilySpec("toy_rl", "ood", "rl", "synthetic", "power law", {"kind": "loguniform", "low": 0.6, "high": 0.9},
               OOD_BUDGET),
    FamilySpec("toy_vit", "ood", "image", "synthetic", "power law", {"kind": "loguniform", "low": 0.6,
                                                                     "high": 0.9}, OOD_BUDGET),
))


def synthetic_losses(rng: np.random.Generator, length: int) -> np.ndarray:
    """Per-batch losses a·s^-b + c with multiplicative noise: different rates, floors and noise levels."""
    s = np.arange(1, length + 1)
    a, b, c = rng.uniform(1.5, 2.5), rng.uniform(0.2, 0.8), rng.uniform(0.05, 0.4)
    return (a * s ** -b + c) * rng.lognormal(0.0, rng.uniform(0.05, 0.3), size=length)


def build_synthetic_bank(root: Path, per_split: int = 12, length: int = 640, seed: int = 0) -> Path:
    """Write a bank with ``per_split`` curves per family and split (OOD families get no train split)."""
    writer = BankWriter(root)
    rng = np.random.default_rng(seed)
    for spec in FAMILIES:
        writer.declare_family(spec)
        splits = ("train", "val", "test") if spec.role == "id" else ("val", "test")
        for split in splits:
            for index in range(per_split):
                losses = synthetic_losses(rng, length)
                record = CurveRecord(spec.name, split, index, seed=index, data_seed=index,
                                     batch_size=int(rng.choice([16, 32, 64])), lr=float(rng.uniform(3e-4, 3e-3)),
                                     preset="synthetic", source="synthetic", length=length)
                writer.add(record, losses)
    return root
