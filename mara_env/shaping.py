"""The paper's objective-preserving progress shaping (paper §4.3, Eqs. 13–15), one function per formula.

Both the single environment (:mod:`mara_env.simulator`) and the batched one (:mod:`mara_env.vector_env`) call
these functions, so the two give bit-identical rewards.
"""

from __future__ import annotations

import numpy as np


def log_progress(first_loss: np.ndarray, loss: np.ndarray, eps: np.ndarray) -> np.ndarray:
    """Task progress q_k (paper Eq. 13), elementwise over broadcastable arrays.

    q_k = clip(log(L_k0 / max(L_k, ε_k)) / log(L_k0 / ε_k), 0, 1), and q_k = 1 when L_k0 ≤ ε_k. L_k0 is the
    loss at the task's first batch; a task that has not run a batch yet has q_k = 0 (the caller applies this,
    since it depends on the batch count, not on the losses).
    """
    span = np.log(np.maximum(first_loss / eps, 1.0 + 1e-12))
    q = np.minimum(np.maximum(np.log(first_loss / np.maximum(loss, eps)) / span, 0.0), 1.0)  # np.clip, cheaper
    return np.where(first_loss <= eps, 1.0, q)


def potential(active_progress: np.ndarray) -> float:
    """Φ_t = Σ_{k ∈ A_t} q_k(t), the state potential defined with paper Eq. 13.

    ``active_progress`` lists q_k of the active tasks in slot order; queued tasks are not active and do not
    count. The sum is NumPy's own reduction over that compact vector, which fixes the rounding.
    """
    return float(np.add.reduce(active_progress))


def potential_batch(progress: np.ndarray, active: np.ndarray) -> np.ndarray:
    """Φ_t for a batch of episodes: ``progress`` and ``active`` are (N, K) per-slot arrays.

    Each row's result equals :func:`potential` of that row's active entries in slot order, bit for bit, so
    the batched simulator's rewards are the single one's. NumPy adds fewer than 8 terms left to right, which
    a running sum over the whole row reproduces (inactive slots add an exact 0). A row with 8 or more active
    entries has them packed to the front, in slot order, and is summed by NumPy itself over exactly those
    entries.
    """
    rows, width = active.shape
    masked = np.where(active, progress, 0.0)
    if width == 0:
        return np.zeros(rows)
    phi = np.cumsum(masked, axis=1)[:, -1]
    place = np.cumsum(active, axis=1)  # an active entry's rank among its row's active entries, from 1
    counts = place[:, -1]
    long_rows = counts >= 8
    if long_rows.any():
        flat_place = place + (np.arange(rows) * width - 1)[:, None]
        packed = np.zeros((rows, width))
        packed.reshape(-1)[flat_place[active]] = masked[active]
        phi = np.where(long_rows, _packed_sum(packed, counts), phi)
    return phi


def _packed_sum(packed: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """NumPy's sum of each row's first ``counts`` entries (its active ones, packed to the front); rows with
    fewer than 8 give values :func:`potential_batch` does not use."""
    if packed.shape[1] < 16:
        # NumPy adds 8 to 15 terms as one block of 8 and then the rest left to right, so the zeros after a
        # row's active entries add exactly nothing: one call sums every row.
        return packed.sum(axis=1)
    total = np.zeros(packed.shape[0])
    for count in np.unique(counts[counts >= 8]).tolist():  # rows of one length are one contiguous reduction
        same = counts == count
        total[same] = packed[same, :count].sum(axis=1)
    return total


def shaped_reward(successes: np.ndarray | int, phi_before: np.ndarray | float, phi_after: np.ndarray | float,
                  beta: float) -> np.ndarray | float:
    """r_t = r_t^success + β (Φ_{t+1} − Φ_t) (paper Eq. 14).

    Succeeded and expired tasks leave before Φ_{t+1} is taken and new tasks enter with q = 0, so Φ is zero
    at both episode ends and the undiscounted return telescopes to the number of successful tasks (paper
    Eq. 15): shaping changes credit assignment, not the objective.
    """
    return successes + beta * (phi_after - phi_before)
