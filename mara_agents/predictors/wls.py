"""LARA's weighted-least-squares demand estimator (paper §2 and §5.1).

The cumulative-average loss is modelled as a negative power of the batch count,

    log L(s) = log a − b log s,

fitted to the observed points s = 1..n by exponentially weighted least squares: the i-th of n points has
weight γ^(n−i) (most recent weight 1, γ = 0.9, Appendix A.2), with a small ridge λ on the slope.  The
demand is the batch where the fitted curve meets ε,

    remaining = (a / ε)^(1/b) − n,

and a fit with b ≤ 0 (a flat or rising curve never meets ε) returns the cap.  All of it is closed form and
vectorised over tasks.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from mara_agents.predictors.base import Prediction, PredictorQuery, capped_remaining

GAMMA = 0.9
RIDGE = 1e-6
_MAX_LOG_BATCHES = 50.0  # exp(50) batches is "never"; keeps exp() finite before the cap is applied


@lru_cache(maxsize=8)
def _decay_table(width: int, gamma: float) -> np.ndarray:
    """γ^0 … γ^(width−1), computed once per (width, γ) and shared read-only."""
    table = gamma ** np.arange(width, dtype=np.float64)
    table.flags.writeable = False
    return table


def forgetting_weights(length: np.ndarray, width: int, gamma: float = GAMMA) -> np.ndarray:
    """w_i = γ^(n−i) for the i-th of n observed points (i = 1..n), 0 on padding; rows sum to 1.

    Normalising the weights makes the ridge λ independent of how many points a task has observed.  The powers
    are looked up in a table rather than raised per entry: the same values, bit for bit, at half the cost.
    """
    age = length[:, None] - np.arange(1, width + 1)[None, :]
    weights = np.where(age >= 0, _decay_table(width, gamma)[np.maximum(age, 0)], 0.0)
    total = weights.sum(axis=1, keepdims=True)
    return weights / np.where(total > 0, total, 1.0)


def fit_power_law(history: np.ndarray, length: np.ndarray, gamma: float = GAMMA,
                  ridge: float = RIDGE) -> tuple[np.ndarray, np.ndarray]:
    """Weighted ridge fit of log L = log a − b log s; returns (log a, b), one per row.

    With weighted means x̄, ȳ of x = log s, y = log L, the closed form is
    −b = Σw(x−x̄)(y−ȳ) / (Σw(x−x̄)² + λ) and log a = ȳ + b x̄.
    """
    width = history.shape[1]
    weights = forgetting_weights(length, width, gamma)
    observed = weights > 0
    x = np.broadcast_to(np.log(np.arange(1, width + 1, dtype=np.float64)), history.shape)
    y = np.log(np.where(observed, history, 1.0).astype(np.float64))
    x_mean = (weights * x).sum(axis=1)
    y_mean = (weights * y).sum(axis=1)
    dx = np.where(observed, x - x_mean[:, None], 0.0)
    dy = np.where(observed, y - y_mean[:, None], 0.0)
    slope = (weights * dx * dy).sum(axis=1) / ((weights * dx * dx).sum(axis=1) + ridge)
    b = -slope
    return y_mean + b * x_mean, b


def power_law_crossing(log_a: np.ndarray, b: np.ndarray, eps: np.ndarray) -> np.ndarray:
    """s* = (a/ε)^(1/b), the batch where the fitted curve reaches ε; +inf where b ≤ 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        log_s = (log_a - np.log(eps)) / b
    return np.where(b > 0, np.exp(np.minimum(log_s, _MAX_LOG_BATCHES)), np.inf)


@dataclass(frozen=True)
class WLSPredictor:
    """LARA's estimator behind the batched :class:`~mara_agents.predictors.base.Predictor` interface."""

    gamma: float = GAMMA
    ridge: float = RIDGE

    def predict(self, query: PredictorQuery) -> Prediction:
        """remaining = (a/ε)^(1/b) − n per task, capped (b ≤ 0 or < 4 observations → cap)."""
        log_a, b = fit_power_law(query.history, query.length, self.gamma, self.ridge)
        remaining = power_law_crossing(log_a, b, query.eps.astype(np.float64)) - query.length
        return Prediction(remaining=capped_remaining(remaining, query))
