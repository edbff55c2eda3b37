"""Tiny synthetic curve banks for the predictor tests (real banks are far too large for unit tests)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from curves.bank import BankWriter, CurveRecord, FamilySpec

BUDGET = {"kind": "interval", "low": 20, "high": 30}
OOD_BUDGET = {"kind": "set", "values": [20, 25, 30]}


def synthetic_losses(rng: np.random.Generator, length: int, shape: str) -> np.ndarray:
    """Noisy per-batch losses: a power-law decay, or a plateau followed by a drop."""
    s = np.arange(1, length + 1, dtype=np.float64)
    scale, rate = rng.uniform(1.5, 2.5), rng.uniform(0.3, 0.8)
    if shape == "power":
        mean = scale * s ** -rate + 0.05
    else:
        knee = rng.uniform(5, 20)
        mean = scale * (1.0 - 0.8 / (1.0 + np.exp(-(s - knee) / 3.0))) + 0.05
    return mean * np.exp(rng.normal(0.0, 0.05, length))


def build_bank(root: Path, per_split: int = 4, seed: int = 0) -> Path:
    """Two ID families (power, plateau) and two OOD families (an RL "dagger" one and a "vit" one)."""
    rng = np.random.default_rng(seed)
    writer = BankWriter(root)
    families = [("power_toy", "id", "power", {"kind": "scaled", "base": 0.6, "low": 0.9, "high": 1.1}, BUDGET),
                ("plateau_toy", "id", "plateau", {"kind": "scaled", "base": 1.0, "low": 0.9, "high": 1.1}, BUDGET),
                ("dagger_toy", "ood", "plateau", {"kind": "loguniform", "low": 0.8, "high": 1.2}, OOD_BUDGET),
                ("vit_toy", "ood", "power", {"kind": "loguniform", "low": 0.5, "high": 0.7}, OOD_BUDGET)]
    for name, role, shape, eps, budget in families:
        writer.declare_family(FamilySpec(name, role, "synthetic", "none", shape, eps, budget))
        length = 2 * 30
        for split in ("train", "val", "test"):
            for index in range(per_split):
                record = CurveRecord(name, split, index, seed=index, data_seed=index,
                                     batch_size=int(rng.choice([16, 32, 64])), lr=float(rng.uniform(3e-4, 3e-3)),
                                     preset="test", source="synthetic", length=length)
                writer.add(record, synthetic_losses(rng, length, shape))
    return root


@pytest.fixture(scope="session")
def tiny_bank(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 48-curve synthetic bank shared by the tests (read-only)."""
    return build_bank(tmp_path_factory.mktemp("bank"))
