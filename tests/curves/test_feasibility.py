"""The closed-form feasibility agrees with sampling tasks, and calibration hits its target."""

from __future__ import annotations

import numpy as np
import pytest

from curves.bank import cumulative_average
from curves.calibrate import calibrate_id, calibrate_ood
from curves.feasibility import early_feasibility, feasibility, median_loss_drop, new_minimum_batches

BUDGET = {"kind": "interval", "low": 10, "high": 20}
OOD_BUDGET = {"kind": "set", "values": [10, 14, 20]}


def _curves(n: int = 12, length: int = 40) -> list[np.ndarray]:
    """Cumulative averages of noisy power-law curves with varied exponents and floors."""
    rng = np.random.default_rng(1)
    s = np.arange(1, length + 1)
    return [cumulative_average(2.0 * s ** -rng.uniform(0.2, 0.8) + rng.uniform(0.05, 0.3) + rng.normal(0, 0.02, length))
            for _ in range(n)]


def _sampled(curves: list[np.ndarray], draw_eps, budgets: np.ndarray, n: int = 40_000) -> float:
    rng = np.random.default_rng(2)
    hits = 0
    for _ in range(n):
        curve = curves[rng.integers(len(curves))]
        b = budgets[rng.integers(len(budgets))]
        hits += curve[:b].min() <= draw_eps(rng)
    return hits / n


def test_scaled_rule_matches_sampling() -> None:
    curves = _curves()
    rule = {"kind": "scaled", "base": float(np.median([c[15] for c in curves])), "low": 0.9, "high": 1.1}
    exact = feasibility(curves, rule, BUDGET)
    sampled = _sampled(curves, lambda r: rule["base"] * r.uniform(0.9, 1.1), np.arange(10, 21))
    assert abs(exact - sampled) < 0.01


def test_loguniform_rule_matches_sampling() -> None:
    curves = _curves()
    rule = {"kind": "loguniform", "low": 0.4, "high": 0.9}
    exact = feasibility(curves, rule, OOD_BUDGET)
    sampled = _sampled(curves, lambda r: float(np.exp(r.uniform(np.log(0.4), np.log(0.9)))), np.array([10, 14, 20]))
    assert abs(exact - sampled) < 0.01


def test_calibration_reaches_seventy_percent() -> None:
    curves = _curves()
    assert abs(feasibility(curves, calibrate_id(curves, BUDGET), BUDGET) - 0.70) < 0.005
    ood = calibrate_ood(curves, OOD_BUDGET)
    assert ood["low"] < ood["high"]
    assert abs(feasibility(curves, ood, OOD_BUDGET) - 0.70) < 0.005


def test_new_minimum_batches_finds_first_crossings() -> None:
    curve = np.array([5.0] * 21 + [4.0, 4.5, 3.0] + [3.5] * 11 + [1.0])
    assert new_minimum_batches(curve).tolist() == [22, 24]
    assert new_minimum_batches(np.linspace(1, 2, 40)).size == 0


def test_early_feasibility_matches_sampling_and_flags_flat_curves() -> None:
    curves = _curves()
    early_rule = {"kind": "scaled", "base": float(np.median([c[3] for c in curves])), "low": 0.9, "high": 1.1}
    exact = early_feasibility(curves, early_rule)
    sampled = _sampled(curves, lambda r: early_rule["base"] * r.uniform(0.9, 1.1), np.array([4]))
    assert 0.2 < exact < 0.8 and abs(exact - sampled) < 0.01
    late_rule = {**early_rule, "base": float(np.median([c[15] for c in curves]))}
    assert early_feasibility(curves, late_rule) == 0.0  # falling curves reach no ε near L(16) in 4 batches
    flat = [np.full(40, 1.0)]
    assert early_feasibility(flat, {"kind": "scaled", "base": 1.0, "low": 0.9, "high": 1.1}) == pytest.approx(0.5)


def test_median_loss_drop_measures_learning_in_the_window() -> None:
    falling = np.concatenate([np.full(4, 2.0), np.linspace(2.0, 0.5, 36)])
    flat = np.full(40, 2.0)
    assert median_loss_drop([falling], BUDGET) == 1.0 - falling[:15].min() / 2.0  # median budget 15
    assert median_loss_drop([flat, flat, falling], BUDGET) == 0.0
