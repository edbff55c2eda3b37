"""Target losses placed on each task's own curve: the default ε rule of the MARA benchmark ("crossing").

The paper (Table 6) draws ε per family, ``base × U[0.9, 1.1]``.  On our bank one base per family cannot put
the crossings of feasible tasks late in their windows: the runs of one family differ widely in speed (batch
size and learning rate spread them), so a family-level ε is reached early by fast runs and never by slow
ones.  Capacity then rarely binds and allocators differ only in how early they drop hopeless tasks.  The
paper's regime — most tasks feasible alone, feasible tasks needing most of their window, FIFO far under the
Oracle — needs the crossing placed per task.  So each task draws a crossing fraction ``u ~ U[low, high]``
and takes

    ε = min( L(s*),  (1 − margin) · min_{s ≤ 4} L(s) ),    s* = round(u · B),

with L the task's cumulative-average loss and B its available time.  If L fell steadily, the task would
first reach ε at s* and be feasible alone exactly when u ≤ 1 — a share (1 − low) / (high − low) of the tasks,
which the defaults set near the paper's 0.7 — and a feasible task would need the fraction u ∈ [low, 1] of its
window.  The cap keeps every target below the task's loss over its first four batches, so no task is met
before a predictor can see it (a target met on arrival is no task); noisy early averages (batch sizes 1–8)
would otherwise make many such tasks.  Because real curves
are not monotone, the exact outcome distribution is computed by :meth:`CrossingRule.outcomes`, not assumed.

The paper-literal per-family rule stays available as the task sets ``id_paper``, ``rl_ood_paper`` and
``vit_ood_paper`` (``mara_env.tasksets``), calibrated by :mod:`curves.calibrate`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


def first_crossing(cumavg: np.ndarray, eps: np.ndarray | float) -> np.ndarray:
    """The first batch s (1-based) with L(s) ≤ ε, for each ε; ``len(cumavg) + 1`` where L never reaches it."""
    running_min = np.minimum.accumulate(np.asarray(cumavg, dtype=np.float64))
    # running_min is non-increasing, so -running_min is sorted and the first s with running_min ≤ ε is a
    # binary search.
    return np.searchsorted(-running_min, -np.asarray(eps, dtype=np.float64), side="left") + 1


@dataclass(frozen=True)
class CrossingRule:
    """ε per task from its own curve: ``min(L(round(u·B)), (1 − margin)·min L(1..early))``, u ~ U[low, high]."""

    low: float = 0.4
    """Smallest crossing fraction u: feasible tasks need at least about this share of their window."""
    high: float = 1.26
    """Largest crossing fraction; (1 − low) / (high − low) ≈ 0.70 of tasks have u ≤ 1."""
    early_batches: int = 4
    """Targets stay below the loss over this many first batches (the predictors' warm-up)."""
    early_margin: float = 0.01
    """Relative distance kept below that early loss."""

    def __post_init__(self) -> None:
        if not 0.0 < self.low < self.high:
            raise ValueError(f"crossing rule needs 0 < low < high, got low={self.low!r}, high={self.high!r}")
        if self.early_batches < 1 or not 0.0 <= self.early_margin < 1.0:
            raise ValueError(f"crossing rule needs early_batches >= 1 and 0 <= early_margin < 1, got "
                             f"{self.early_batches!r}, {self.early_margin!r}")

    def crossing_batch(self, u: float, budget: int, length: int) -> int:
        """s* = round(u · B), kept inside the recorded curve."""
        return min(max(math.floor(u * budget + 0.5), 1), length)

    def target(self, cumavg: np.ndarray, budget: int, u: float) -> float:
        """The ε of a task with curve ``cumavg``, available time ``budget`` and crossing fraction ``u``."""
        curve = np.asarray(cumavg, dtype=np.float64)
        cap = (1.0 - self.early_margin) * min(curve[: self.early_batches].tolist())  # curves are finite
        return min(float(curve[self.crossing_batch(u, budget, curve.size) - 1]), cap)

    def sample(self, cumavg: np.ndarray, budget: int, rng: np.random.Generator) -> float:
        """Draw u ~ U[low, high] from ``rng`` (one draw) and return the task's ε."""
        return self.target(cumavg, budget, float(rng.uniform(self.low, self.high)))

    def outcomes(self, cumavg: np.ndarray, budget: int) -> tuple[np.ndarray, np.ndarray]:
        """Exact distribution of the first-crossing batch of a task with this curve and budget.

        Returns ``(probability, first)``: u takes each value s* = round(u·B) with the probability of its
        rounding interval inside [low, high]; ``first[i]`` is the batch at which that ε is first reached
        (``len(cumavg) + 1`` if never).  Feasible alone ⇔ first ≤ B.
        """
        curve = np.asarray(cumavg, dtype=np.float64)
        s = np.arange(int(np.floor(self.low * budget + 0.5)), int(np.floor(self.high * budget + 0.5)) + 1)
        lower = np.maximum(self.low, (s - 0.5) / budget)
        upper = np.minimum(self.high, (s + 0.5) / budget)
        probability = np.clip(upper - lower, 0.0, None) / (self.high - self.low)
        cap = (1.0 - self.early_margin) * curve[: self.early_batches].min()
        eps = np.minimum(curve[np.clip(s, 1, curve.size) - 1], cap)
        return probability, first_crossing(curve, eps)


CROSSING = CrossingRule()
"""The benchmark's default ε rule (chosen on train/val curves; ``docs/research/workloads_rules.md`` records how)."""
