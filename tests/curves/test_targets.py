"""The per-task crossing rule for target losses (curves.targets) and its exact statistics."""

import numpy as np
import pytest

from curves.calibrate import calibrate_crossing
from curves.feasibility import crossing_regime
from curves.targets import CrossingRule, first_crossing

RULE = CrossingRule(low=0.4, high=1.26)


def falling_curve(length: int = 700) -> np.ndarray:
    return 2.0 * np.arange(1, length + 1) ** -0.3 + 0.1


def test_first_crossing_finds_the_first_batch_at_or_below_each_target():
    curve = np.array([1.0, 0.8, 0.9, 0.7, 0.75])
    assert first_crossing(curve, [0.9, 0.8, 0.75, 0.7, 0.5]).tolist() == [2, 2, 4, 4, 6]


def test_on_a_falling_curve_the_target_is_first_met_at_the_drawn_batch():
    curve = falling_curve()
    for u in (0.4, 0.7, 1.0, 1.2):
        eps = RULE.target(curve, 300, u)
        assert first_crossing(curve, eps) == round(u * 300)


def test_targets_stay_below_the_loss_of_the_first_four_batches():
    rng = np.random.default_rng(0)
    curve = np.concatenate([[0.3, 0.9, 1.0, 0.95], falling_curve(600) + 0.5])  # a lucky, low first batch
    targets = [RULE.sample(curve, 300, rng) for _ in range(200)]
    assert max(targets) <= 0.99 * 0.3
    assert all(first_crossing(curve, eps) > 4 for eps in targets)


def test_exact_outcomes_are_a_distribution_that_matches_sampling():
    curve = falling_curve() * np.random.default_rng(1).lognormal(0, 0.02, 700)
    probability, first = RULE.outcomes(curve, 300)
    assert probability.sum() == pytest.approx(1.0)
    exact = float(probability[first <= 300].sum())
    rng = np.random.default_rng(2)
    sampled = np.mean([first_crossing(curve, RULE.sample(curve, 300, rng)) <= 300 for _ in range(4000)])
    assert sampled == pytest.approx(exact, abs=0.03)


def test_regime_of_falling_curves_matches_the_construction():
    regime = crossing_regime([falling_curve()], {"kind": "interval", "low": 290, "high": 310}, RULE)
    assert regime["feasibility"] == pytest.approx(0.6 / 0.86, abs=0.01)
    assert regime["needed"] == pytest.approx(0.70, abs=0.01)
    assert regime["early"] == 0.0


def test_calibration_finds_the_upper_fraction_for_seventy_percent():
    curves = [falling_curve() * scale for scale in (0.9, 1.0, 1.1)]
    budget = {"kind": "interval", "low": 290, "high": 310}
    params = calibrate_crossing(curves, budget)
    assert crossing_regime(curves, budget, CrossingRule(**params))["feasibility"] == pytest.approx(0.70, abs=0.005)
    assert params["high"] == pytest.approx(1.257, abs=0.01)


def test_a_flat_family_gets_no_upper_fraction_below_one():
    flat = [np.full(700, 1.0) for _ in range(3)]  # never falls below its first batches: never feasible
    assert calibrate_crossing(flat, {"kind": "interval", "low": 290, "high": 310})["high"] == 1.0


@pytest.mark.parametrize("kwargs", [{"low": 0.0}, {"low": 1.2, "high": 1.0}, {"early_margin": 1.0},
                                    {"early_batches": 0}])
def test_bad_rules_are_refused(kwargs):
    with pytest.raises(ValueError, match="crossing rule"):
        CrossingRule(**kwargs)
