"""Crossing decode: from sampled future trajectories to one remaining-batch estimate (paper §4.1, end).

Each sampled trajectory L̂(s_0..s_J) is scanned for its first ε crossing; linear interpolation inside the
crossing interval gives the crossing position in samples, which is converted back to batches.  A
trajectory that never crosses is capped at the horizon, and the median over the N samples is the estimate.
"""

from __future__ import annotations

import numpy as np


def first_crossing(trajectories: np.ndarray, boundaries: np.ndarray, eps: np.ndarray) -> np.ndarray:
    """Samples at which each trajectory first reaches ε, by linear interpolation; NaN if it never does.

    ``trajectories`` is (n, N, J+1) with L̂ at ``boundaries`` (n, J+1); ``eps`` is (n,).  A trajectory that
    starts at or below ε crosses at s_0.
    """
    below = trajectories <= eps[:, None, None]
    j = np.argmax(below, axis=-1)                        # first index at or below ε (0 if there is none)
    crossed = np.take_along_axis(below, j[..., None], axis=-1)[..., 0]
    prev = np.maximum(j - 1, 0)
    l_prev = np.take_along_axis(trajectories, prev[..., None], axis=-1)[..., 0]
    l_next = np.take_along_axis(trajectories, j[..., None], axis=-1)[..., 0]
    task = np.arange(boundaries.shape[0])[:, None]
    s_prev, s_next = boundaries[task, prev], boundaries[task, j]
    drop = l_prev - l_next
    with np.errstate(divide="ignore", invalid="ignore"):
        fraction = np.where(drop > 0, (l_prev - eps[:, None]) / drop, 1.0)
    position = s_prev + np.clip(fraction, 0.0, 1.0) * (s_next - s_prev)
    return np.where(crossed, position, np.nan)


def remaining_batches(crossing: np.ndarray, prefix_samples: np.ndarray, horizon_batches: np.ndarray,
                      batch_size: np.ndarray) -> np.ndarray:
    """(crossing − S_0)/batch size per sample; non-crossers (NaN) are capped at the horizon.  (n, N)."""
    batches = (crossing - prefix_samples[:, None]) / batch_size[:, None]
    return np.where(np.isnan(crossing), horizon_batches[:, None], batches)


def median_estimate(per_sample: np.ndarray) -> np.ndarray:
    """The robust scalar estimate: the median over the N sampled trajectories.  (n,)."""
    return np.median(per_sample, axis=1)
