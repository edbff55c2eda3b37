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

from mara_agents.predictors.base import Prediction, PredictorQuery, capped_remaining, row_parts

GAMMA = 0.9
RIDGE = 1e-6
_NUMPY_PAIRWISE_BLOCK = 128  # the longest row NumPy sums without splitting it (PW_BLOCKSIZE)
_MAX_LOG_BATCHES = 50.0  # exp(50) batches is "never"; keeps exp() finite before the cap is applied


@dataclass(frozen=True)
class _Design:
    """Everything of the fit that depends only on how many points a row has observed, per count n = 0..width:
    the normalised weights, the observed mask, x̄, x − x̄ on observed points and Σw(x−x̄)²."""

    weights: np.ndarray
    observed: np.ndarray
    x_mean: np.ndarray
    dx: np.ndarray
    sxx: np.ndarray


@lru_cache(maxsize=4)
def _design(width: int, gamma: float) -> _Design:
    """The fit's count-only terms for every count, computed once per (width, γ) with the very operations the
    fit would apply to each row (each is a function of the row alone), so gathering them gives the same bits."""
    length = np.arange(width + 1)
    position = np.arange(1, width + 1)[None, :]
    raised = np.where(position <= length[:, None],
                      gamma ** np.maximum(length[:, None] - position, 0).astype(np.float64), 0.0)
    total = raised.sum(axis=1, keepdims=True)
    weights = raised / np.where(total > 0, total, 1.0)
    observed = weights > 0
    x = np.broadcast_to(np.log(np.arange(1, width + 1, dtype=np.float64)), weights.shape)
    x_mean = (weights * x).sum(axis=1)
    dx = np.where(observed, x - x_mean[:, None], 0.0)
    design = _Design(weights, observed, x_mean, dx, (weights * dx * dx).sum(axis=1))
    for table in (design.weights, design.observed, design.x_mean, design.dx, design.sxx):
        table.flags.writeable = False
    return design


def _rows(length: np.ndarray, width: int) -> np.ndarray:
    """``length`` as table rows, refusing counts the history cannot hold."""
    length = np.asarray(length, dtype=np.int64)
    if length.size and (length.min() < 0 or length.max() > width):
        raise ValueError(f"observed counts must lie in [0, {width}] (the history width), got "
                         f"{int(length.min())}..{int(length.max())}")
    return length


def forgetting_weights(length: np.ndarray, width: int, gamma: float = GAMMA) -> np.ndarray:
    """w_i = γ^(n−i) for the i-th of n observed points (i = 1..n), 0 on padding; rows sum to 1.

    Normalising the weights makes the ridge λ independent of how many points a task has observed.
    """
    return _design(width, gamma).weights[_rows(length, width)]


def summed_width(width: int, needed: int) -> int:
    """The narrowest prefix of a row of ``width`` entries, covering the first ``needed``, whose NumPy sum
    equals the whole row's bit for bit whenever the entries past ``needed`` are zero.

    NumPy sums a contiguous float row pairwise: a row of more than 128 entries is split at half its length,
    rounded down to a multiple of 8, and the two halves are summed the same way; a row of 8 to 128 entries is
    added into 8 interleaved partial sums, combined as a tree, and the entries past the last whole group of
    8 are added after.  A prefix that is a left half in that recursion, or a multiple of 8 within the final
    block's whole groups, sees the same additions in the same order; the zeros it leaves out add nothing.
    ``tests/predictors/test_wls.py`` checks this against ``np.sum`` for every ``needed`` at several widths.
    """
    while width > _NUMPY_PAIRWISE_BLOCK:
        half = width // 2 - (width // 2) % 8
        if needed > half:
            return width
        width = half
    whole_groups = width - width % 8
    if width < 8 or needed > whole_groups:
        return width
    return max(8, -(-needed // 8) * 8)


def fit_power_law(history: np.ndarray, length: np.ndarray, gamma: float = GAMMA,
                  ridge: float = RIDGE) -> tuple[np.ndarray, np.ndarray]:
    """Weighted ridge fit of log L = log a − b log s; returns (log a, b), one per row.

    With weighted means x̄, ȳ of x = log s, y = log L, the closed form is
    −b = Σw(x−x̄)(y−ȳ) / (Σw(x−x̄)² + λ) and log a = ȳ + b x̄.  The terms that depend only on the observed
    count (w, x̄, x − x̄, Σw(x−x̄)²) are looked up per count (:func:`_design`); only the y terms are computed.

    Only the first :func:`summed_width` columns are read: every term past the longest row is an exact zero,
    and NumPy's pairwise sums over that prefix add the same numbers in the same tree as over the whole width,
    so the result is bit-identical to the full-width computation at a fraction of its cost (most histories
    are far shorter than the bank's longest curve).
    """
    width = history.shape[1]
    rows = _rows(length, width)
    design = _design(width, gamma)
    cut = summed_width(width, int(rows.max(initial=0)))
    weights, observed, dx = (table[:, :cut][rows] for table in (design.weights, design.observed, design.dx))
    y = np.log(np.where(observed, history[:, :cut], 1.0).astype(np.float64))
    y_mean = (weights * y).sum(axis=1)
    dy = np.where(observed, y - y_mean[:, None], 0.0)
    slope = (weights * dx * dy).sum(axis=1) / (design.sxx[rows] + ridge)
    b = -slope
    return y_mean + b * design.x_mean[rows], b


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
        remaining = np.empty(len(query))
        for rows in row_parts(np.arange(len(query))):  # each row's fit is its own: parts give the same bits
            log_a, b = fit_power_law(query.history[rows], query.length[rows], self.gamma, self.ridge)
            remaining[rows] = power_law_crossing(log_a, b, query.eps[rows].astype(np.float64)) - query.length[rows]
        return Prediction(remaining=capped_remaining(remaining, query))
