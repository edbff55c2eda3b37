"""Fairness across task families, for the episode metrics (``fairness_metrics=True``); the reward never reads it.

A task's family is the first part of its bank curve id (``family/split/index``). Over one episode:

* ``success_rate/<family>`` — the family's successes / its tasks, for every family of the bank (NaN when the
  episode had no task of it, so every episode carries the same keys);
* ``min_family_success_rate`` — the lowest of those rates over the families that had a task;
* ``jain_index`` — Jain's index (Σ x)² / (n Σ x²) of the same n rates: 1 when every family fared alike
  (all rates 0 included), 1/n when one family got every success.

Families without a task in the episode are left out of the minimum and of Jain's index; an episode without
any task has NaN for both, as its ``success_rate`` is.
"""

from __future__ import annotations

import numpy as np

MIN_KEY = "min_family_success_rate"
JAIN_KEY = "jain_index"
FAMILY_PREFIX = "success_rate/"


def jain_index(rates: np.ndarray) -> float:
    """Jain's fairness index of ``rates`` (n ≥ 1 values ≥ 0): 1 when all are equal, zeros included; NaN for none."""
    rates = np.asarray(rates, dtype=np.float64)
    if rates.size == 0:
        return float("nan")
    squares = float(np.sum(rates * rates))
    return 1.0 if squares == 0.0 else float(np.sum(rates)) ** 2 / (rates.size * squares)


def fairness_metrics(families: tuple[str, ...], family: np.ndarray, succeeded: np.ndarray) -> dict[str, float]:
    """The fairness metrics of one episode: ``family`` (n,) holds each task's index into the bank's sorted
    ``families``, ``succeeded`` (n,) whether it succeeded."""
    tasks = np.bincount(family, minlength=len(families))
    wins = np.bincount(family, weights=np.asarray(succeeded, dtype=np.float64), minlength=len(families))
    rates = np.divide(wins, tasks, out=np.full(len(families), np.nan), where=tasks > 0)
    present = rates[tasks > 0]
    metrics = {f"{FAMILY_PREFIX}{name}": float(rate) for name, rate in zip(families, rates)}
    metrics[MIN_KEY] = float(present.min()) if present.size else float("nan")
    metrics[JAIN_KEY] = jain_index(present)
    return metrics
