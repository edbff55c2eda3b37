"""Shared fixtures: small synthetic banks written through the real BankWriter."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from curves.bank import BankWriter, CurveRecord, FamilySpec

BUDGET = {"kind": "interval", "low": 10, "high": 20}


def decaying_curve(rng: np.random.Generator, length: int = 40) -> np.ndarray:
    """A noisy power-law training curve, like the real ones."""
    s = np.arange(1, length + 1)
    return (2.0 * s ** -rng.uniform(0.2, 0.8) + rng.uniform(0.05, 0.3) + rng.normal(0, 0.02, length)).clip(0.01)


def write_bank(root: Path, families: tuple[str, ...] = ("fam_a", "fam_b"), per_family: int = 3) -> Path:
    """A valid bank with ``per_family`` test curves in each family."""
    writer = BankWriter(root)
    rng = np.random.default_rng(0)
    for name in families:
        writer.declare_family(FamilySpec(name, "id", "synthetic", "none", "none", None, BUDGET))
        for i in range(per_family):
            losses = decaying_curve(rng)
            writer.add(CurveRecord(name, "test", i, i, i, 8, 1e-3, "cpu", "synthetic", losses.size), losses)
    return root


@pytest.fixture
def tiny_bank(tmp_path: Path) -> Path:
    return write_bank(tmp_path / "bank")
