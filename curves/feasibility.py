"""Independent feasibility of random tasks drawn from a family (the Oracle's success rate).

A task (curve, ε, B) is feasible when min_{s ≤ B} L(s) ≤ ε, with L the cumulative-average loss.  For a fixed
curve and B this is a threshold on ε, so the probability over the family's ε rule has a closed form; we
average it over every budget the rule allows (uniform) and every curve.  No Monte Carlo: the figure is
exact and a test can recompute it to the digit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def budgets(rule: dict[str, Any]) -> np.ndarray:
    """All available times a budget rule can draw, each equally likely."""
    if rule["kind"] == "interval":
        return np.arange(int(rule["low"]), int(rule["high"]) + 1)
    if rule["kind"] == "set":
        return np.asarray(sorted(int(v) for v in rule["values"]))
    raise ValueError(f"unknown budget rule kind {rule['kind']!r}")


def best_losses(cumavg: Sequence[np.ndarray], rule: dict[str, Any]) -> np.ndarray:
    """(curves, budgets) matrix of min_{s ≤ B} L(s): the lowest loss each task can reach in time."""
    bs = budgets(rule)
    rows = []
    for curve in cumavg:
        if curve.size < bs.max():
            raise ValueError(f"a curve of length {curve.size} is shorter than the largest budget {bs.max()}")
        rows.append(np.minimum.accumulate(curve)[bs - 1])
    return np.asarray(rows)


def prob_eps_at_least(best: np.ndarray, eps_rule: dict[str, Any]) -> np.ndarray:
    """P(ε ≥ best) elementwise under the ε rule: uniform scale for ``scaled``, log-uniform for ``loguniform``."""
    if eps_rule["kind"] == "scaled":
        lo, hi = eps_rule["base"] * eps_rule["low"], eps_rule["base"] * eps_rule["high"]
        return np.clip((hi - best) / (hi - lo), 0.0, 1.0)
    if eps_rule["kind"] == "loguniform":
        lo, hi = np.log(eps_rule["low"]), np.log(eps_rule["high"])
        return np.clip((hi - np.log(best)) / (hi - lo), 0.0, 1.0)
    raise ValueError(f"unknown eps rule kind {eps_rule['kind']!r}")


def feasibility(cumavg: Sequence[np.ndarray], eps_rule: dict[str, Any], budget_rule: dict[str, Any]) -> float:
    """Probability that a task drawn from the family (uniform curve, then the rules) is independently feasible."""
    return float(prob_eps_at_least(best_losses(cumavg, budget_rule), eps_rule).mean())


def per_curve_feasibility(cumavg: Sequence[np.ndarray], eps_rule: dict[str, Any],
                          budget_rule: dict[str, Any]) -> np.ndarray:
    """Feasibility of each curve's tasks; its spread shows whether tasks within a family differ."""
    return prob_eps_at_least(best_losses(cumavg, budget_rule), eps_rule).mean(axis=1)


def early_feasibility(cumavg: Sequence[np.ndarray], eps_rule: dict[str, Any], batches: int = 4) -> float:
    """Probability that a random task is reached within its first ``batches`` batches.

    With the default 4 that is before any predictor has enough history to forecast it, so such a
    task's success depends on being served at all, not on which tasks an allocator prefers.  A family where
    this is large has curves that start at or below many of its ε draws: ε, not training, decides its tasks.
    """
    first = np.array([np.asarray(curve[:batches]).min() for curve in cumavg])
    return float(prob_eps_at_least(first, eps_rule).mean())


def median_loss_drop(cumavg: Sequence[np.ndarray], budget_rule: dict[str, Any], start: int = 4) -> float:
    """Median over curves of 1 − min_{s ≤ B} L(s) / L(start), with B the rule's median available time.

    How much a family's models learn within a task's window.  Near 0 the curve is flat, so whether a task
    is feasible is a coin flip on its ε draw, and no allocator can change it.
    """
    window = int(np.median(budgets(budget_rule)))
    return float(np.median([1.0 - np.asarray(c[:window]).min() / c[start - 1] for c in cumavg]))


def new_minimum_batches(cumavg: np.ndarray, low: int = 22, high: int = 35) -> np.ndarray:
    """Batches s* in [low, high] where L sets a new running minimum, i.e. L(s*) < min_{s < s*} L(s).

    A stress-test "short" task (paper §5.4) with ε = L(s*) is first reached exactly at batch s* only for
    these s*; elsewhere an earlier batch already meets ε.  Empty when the curve's early average is flat or
    rising (common with batch sizes 1–8, whose first losses are noisy).
    """
    curve = np.asarray(cumavg, dtype=np.float64)
    previous_min = np.minimum.accumulate(curve)[low - 2: high - 1]
    candidates = np.arange(low, high + 1)
    return candidates[curve[low - 1: high] < previous_min]


def weighted_median(values: np.ndarray, weights: np.ndarray) -> float:
    """The smallest value whose cumulative weight reaches half the total (NaN when the weight is zero)."""
    if weights.sum() <= 0:
        return float("nan")
    order = np.argsort(values, kind="stable")
    cumulative = np.cumsum(weights[order])
    return float(values[order][np.searchsorted(cumulative, cumulative[-1] / 2)])


def crossing_regime(cumavg: Sequence[np.ndarray], budget_rule: dict[str, Any], rule: Any,
                    early: int = 4) -> dict[str, float]:
    """Exact task statistics of a family under a per-task ε rule such as :class:`curves.targets.CrossingRule`.

    Averages over every curve, every budget the rule allows and the rule's own randomness (``rule.outcomes``):
    ``feasibility`` (share of tasks feasible alone: the Oracle), ``needed`` (median over feasible tasks of the
    batches they need alone divided by B: how much of its window a feasible task uses) and ``early`` (share
    of tasks met within ``early`` batches).
    """
    weights, ratios, hit, met_early = [], [], [], []
    bs = budgets(budget_rule)
    for curve in cumavg:
        for budget in bs:
            probability, first = rule.outcomes(curve, int(budget))
            weights.append(probability)
            ratios.append(first / budget)
            hit.append(first <= budget)
            met_early.append(first <= early)
    w, ratio, feasible = np.concatenate(weights), np.concatenate(ratios), np.concatenate(hit)
    total = w.sum()
    return {"feasibility": float((w * feasible).sum() / total),
            "needed": weighted_median(ratio[feasible], w[feasible]),
            "early": float((w * np.concatenate(met_early)).sum() / total)}
