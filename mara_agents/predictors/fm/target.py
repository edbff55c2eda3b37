"""The fixed-length trajectory target of the flow-matching predictor (paper §4.1, Eqs. 4–6).

Positions are *processed samples* S = batches × batch size.  Because L(s) is a cumulative average,
C(s) = s·L(s) is the cumulative loss sum; it is known at every batch boundary and linearly interpolated in
between.  A future segment of h samples after the prefix end S_0 is summarised by the exact average loss of
J = 32 equal-width intervals, as log ratios to the current loss, and the inverse transform rebuilds
L̂(s_j) while keeping C(S_0) exactly.  All functions are vectorised NumPy over a leading task axis.
"""

from __future__ import annotations

import numpy as np

BINS = 32     # H in the paper: coordinates of the target vector
DELTA = 1e-4  # δ in Eq. (5): keeps the log finite for losses near zero


def bin_boundaries(prefix_samples: np.ndarray, horizon_samples: np.ndarray, bins: int = BINS) -> np.ndarray:
    """Eq. (4): s_j = S_0 + j·h/J for j = 0..J; returns (n, J+1)."""
    fraction = np.arange(bins + 1, dtype=np.float64) / bins
    return prefix_samples[:, None] + horizon_samples[:, None] * fraction[None, :]


def cumulative_loss_sum(cumavg: np.ndarray, length: np.ndarray, batch_size: np.ndarray,
                        samples: np.ndarray) -> np.ndarray:
    """C(s) = s·L(s), linearly interpolated between batch boundaries (C(0) = 0).

    ``cumavg`` is (n, T) zero padded with ``length`` valid entries per row; ``samples`` is (n, m).  Positions
    beyond the last observation are clamped to it (callers only query inside the known curve).
    """
    n, width = cumavg.shape
    batches_done = np.arange(width + 1, dtype=np.float64)
    sums = np.zeros((n, width + 1))
    sums[:, 1:] = cumavg * batches_done[None, 1:]          # C at batch b, in units of batch-losses
    position = np.clip(samples / batch_size[:, None], 0.0, length[:, None].astype(np.float64))
    lower = np.minimum(np.floor(position).astype(np.int64), np.maximum(length[:, None] - 1, 0))
    upper = np.minimum(lower + 1, length[:, None])
    weight = position - lower
    c_lower = np.take_along_axis(sums, lower, axis=1)
    c_upper = np.take_along_axis(sums, upper, axis=1)
    return batch_size[:, None] * (c_lower + weight * (c_upper - c_lower))


def interval_averages(sums: np.ndarray, boundaries: np.ndarray) -> np.ndarray:
    """Eq. (5), left: ℓ̄_j = (C(s_j) − C(s_{j−1})) / (s_j − s_{j−1}) for j = 1..J."""
    return np.diff(sums, axis=1) / np.diff(boundaries, axis=1)


def log_ratio_target(averages: np.ndarray, current_loss: np.ndarray, delta: float = DELTA) -> np.ndarray:
    """Eq. (5), right: y_j = log((ℓ̄_j + δ) / (L(S_0) + δ))."""
    return np.log((averages + delta) / (current_loss[:, None] + delta))


def inverse_log_ratio(target: np.ndarray, current_loss: np.ndarray, delta: float = DELTA) -> np.ndarray:
    """The inverse of Eq. (5): ℓ̄̂_j = exp(y_j)·(L(S_0) + δ) − δ.  ``target`` may carry extra sample axes."""
    scale = (current_loss + delta).reshape(current_loss.shape + (1,) * (target.ndim - 1))
    return np.exp(target) * scale - delta


def reconstruct_cumavg(averages: np.ndarray, boundaries: np.ndarray, current_loss: np.ndarray) -> np.ndarray:
    """Eq. (6): Ĉ(s_j) = C(S_0) + Σ_{r≤j} (s_r − s_{r−1}) ℓ̄̂_r and L̂(s_j) = Ĉ(s_j)/s_j for j = 0..J.

    ``averages`` is (n, ..., J) and ``boundaries`` (n, J+1); the result (n, ..., J+1) starts at L(S_0).
    """
    extra = (1,) * (averages.ndim - 2)
    widths = np.diff(boundaries, axis=1).reshape((boundaries.shape[0],) + extra + (-1,))
    start = (boundaries[:, 0] * current_loss).reshape((-1,) + extra + (1,))
    sums = np.concatenate([np.broadcast_to(start, averages.shape[:-1] + (1,)),
                           start + np.cumsum(widths * averages, axis=-1)], axis=-1)
    return sums / boundaries.reshape((boundaries.shape[0],) + extra + (-1,))


def trajectory_target(cumavg: np.ndarray, length: np.ndarray, batch_size: np.ndarray, prefix: np.ndarray,
                      horizon: np.ndarray, bins: int = BINS, delta: float = DELTA) -> np.ndarray:
    """Eqs. (4)–(5) end to end: the (n, J) target of a prefix of ``prefix`` batches and a horizon of
    ``horizon`` batches, read from the stored curves ``cumavg`` (which must extend to prefix + horizon)."""
    boundaries = bin_boundaries(prefix * batch_size, horizon * batch_size, bins)
    sums = cumulative_loss_sum(cumavg, length, batch_size, boundaries)
    current = cumavg[np.arange(cumavg.shape[0]), prefix - 1]
    return log_ratio_target(interval_averages(sums, boundaries), current, delta)
