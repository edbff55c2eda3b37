"""The batched predictor interface shared by WLS and FM (paper §4.1).

A predictor answers one question for many tasks at once: *how many more optimization batches does each
task need before its cumulative-average loss reaches its threshold ε?*  Every array in a query has one row
per task, so a whole observation (all K slots, or all slots of a vector of environments) is one call.

Both predictors need :data:`MIN_OBSERVATIONS` loss observations.  Before that, and whenever a model has no
usable answer, a predictor returns the task's remaining *generation cap* — the furthest a forecast may
look: the recorded curve's end (in the environment 2·B − s, see :mod:`mara_agents.predictors.demand`).
Every estimate is clipped to ``[0, cap]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from mara_env.config import MARAConfig

# Paper §4.1: "before four history points are available ... return the cap".  The env's warm-up count is the
# same rule (its ``warmup`` feature and "ready" metric), so both read one default.
MIN_OBSERVATIONS: int = MARAConfig.__dataclass_fields__["warmup_observations"].default


@dataclass(frozen=True)
class PredictorQuery:
    """A batch of n tasks to predict for.

    Attributes:
        history: (n, H) cumulative-average losses L(1..len), zero padded on the right.
        length: (n,) number of observed losses per task (0 for a task that has not run yet).
        batch_size: (n,) samples per optimization batch (processed samples = batches × batch size).
        lr: (n,) learning rate.
        eps: (n,) target loss ε; only the decoding step reads it.
        cap: (n,) remaining generation cap in batches: the largest answer a predictor may give.
    """

    history: np.ndarray
    length: np.ndarray
    batch_size: np.ndarray
    lr: np.ndarray
    eps: np.ndarray
    cap: np.ndarray

    def __post_init__(self) -> None:
        if self.history.ndim != 2:
            raise ValueError(f"history must be (n, H), got shape {self.history.shape}")
        n, width = self.history.shape
        for name in ("length", "batch_size", "lr", "eps", "cap"):
            shape = getattr(self, name).shape
            if shape != (n,):
                raise ValueError(f"{name} must have shape ({n},) to match history, got {shape}")
        if np.any(self.length < 0) or np.any(self.length > width):
            raise ValueError(f"length must lie in [0, {width}] (the history width)")
        if np.any(self.cap < 0):
            raise ValueError("cap must be non-negative")

    def __len__(self) -> int:
        return int(self.length.shape[0])

    @property
    def current_loss(self) -> np.ndarray:
        """L(s) at the last observation, 0 for tasks without observations."""
        last = np.maximum(self.length - 1, 0)
        loss = self.history[np.arange(len(self)), last].astype(np.float64)
        return np.where(self.length > 0, loss, 0.0)

    @property
    def ready(self) -> np.ndarray:
        """Tasks a model predicts for: enough observations and a positive cap."""
        return (self.length >= MIN_OBSERVATIONS) & (self.cap > 0)

    def subset(self, rows: np.ndarray, width: int | None = None) -> PredictorQuery:
        """The query restricted to ``rows`` (a boolean mask or index array), and its history to the first
        ``width`` columns when given (at least the longest selected history, so nothing observed is lost)."""
        history = self.history[rows] if width is None else self.history[rows, :width]
        return PredictorQuery(history, self.length[rows], self.batch_size[rows], self.lr[rows],
                              self.eps[rows], self.cap[rows])


@dataclass(frozen=True)
class Prediction:
    """Remaining-batch estimates, and for FM the sampled futures they were decoded from.

    Attributes:
        remaining: (n,) float64 estimated remaining batches, in ``[0, cap]``.
        trajectories: (n, N, J+1) sampled future cumulative-average losses L̂(s_0..s_J) (FM only; NaN rows
            for tasks that were not ready).
        grid: (n, J+1) the bin boundaries s_j of those trajectories, in batches (FM only).
        samples: (n, N) float64 remaining-batch estimate of each sampled trajectory, clipped to ``[0, cap]``
            like ``remaining``, whose median (before clipping) ``remaining`` is; NaN rows for tasks that were
            not ready (FM only: the spread of the forecast, for callers that want more than its median).
    """

    remaining: np.ndarray
    trajectories: np.ndarray | None = None
    grid: np.ndarray | None = None
    samples: np.ndarray | None = None


@runtime_checkable
class Predictor(Protocol):
    """Anything that maps a batch of tasks to remaining-batch estimates in one call."""

    def predict(self, query: PredictorQuery) -> Prediction:
        """Estimate the remaining batches of every task in ``query``."""
        ...


def capped_remaining(estimate: np.ndarray, query: PredictorQuery) -> np.ndarray:
    """The returned estimate: the cap before 4 observations or where ``estimate`` is not finite, otherwise
    ``estimate`` clipped to ``[0, cap]`` (paper §4.1, last paragraph).  ``estimate`` is (n,) or has extra
    trailing axes (one estimate per sample: (n, N)); each row is capped by its task's cap."""
    extra = (1,) * (estimate.ndim - 1)
    cap = query.cap.astype(np.float64).reshape(-1, *extra)
    usable = query.ready.reshape(-1, *extra) & np.isfinite(estimate)
    return np.where(usable, np.clip(np.nan_to_num(estimate, nan=0.0), 0.0, cap), cap)


# Rows per batch from which a neural predictor's answer for a row no longer depends on the rows beside it: smaller
# batches take other matrix-multiply kernels, whose last bits differ (mara_agents/predictors/shared.py checks it).
MIN_INVARIANT_BATCH = 3
ROWS_PER_PASS = 512  # rows a predictor computes at once: bounds the transient arrays of a large query


def row_parts(rows: np.ndarray, limit: int | None = None) -> list[np.ndarray]:
    """``rows`` in consecutive, near-equal parts of at most ``limit`` rows (default :data:`ROWS_PER_PASS`;
    no part when ``rows`` is empty).

    Near-equal, so that no part is a remainder of one or two rows: some batched kernels give other last bits
    for those (see :mod:`mara_agents.predictors.shared`).
    """
    limit = ROWS_PER_PASS if limit is None else limit
    return np.array_split(rows, -(-rows.size // limit)) if rows.size else []
