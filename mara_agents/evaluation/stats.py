"""The paper's statistic (§5.1): per-episode value → mean over a run's episodes → mean ± sample std over runs.

A *run* is one (training seed, evaluation root) pair: 15 runs for MAT methods with 3 seeds × 5 roots, 5 runs
(roots) for methods and bounds without a training seed.  When several (task set, load) cells are combined
(Table 2's Average, Figure 4, Table 4), each run first averages its episodes within every cell and then gives
the cells equal weight, so task sets with more tasks do not dominate; runs missing a cell are left out.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as scipy_stats

Cell = tuple[str, float | None]  # (task set, load)


@dataclass(frozen=True)
class Stat:
    """Mean ± sample standard deviation over ``runs`` runs (std is NaN with fewer than two runs)."""

    mean: float
    std: float
    runs: int

    def to_json(self) -> dict[str, float | int | None]:
        return {"mean": _finite(self.mean), "std": _finite(self.std), "runs": self.runs}


def _finite(value: float) -> float | None:
    return None if math.isnan(value) else round(value, 10)


def run_values(rows: Iterable[dict[str, Any]], method: str, cells: Sequence[Cell], metric: str) -> dict[tuple, float]:
    """Each run's value: episode mean within each cell, then the equal-weight mean over ``cells``."""
    wanted = set(cells)
    per_cell: dict[tuple, dict[Cell, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        cell = (row["task_set"], row["load"])
        if row["method"] == method and cell in wanted and row.get(metric) is not None:
            per_cell[row["seed"], row["root"]][cell].append(float(row[metric]))
    values = {}
    for run, by_cell in per_cell.items():
        if set(by_cell) == wanted:
            means = [_nanmean(by_cell[cell]) for cell in cells]
            values[run] = _nanmean(means)
    return values


def paper_stat(rows: Iterable[dict[str, Any]], method: str, cells: Sequence[Cell], metric: str = "success_rate",
               scale: float = 100.0) -> Stat | None:
    """The paper's mean ± sample std of ``metric`` (× ``scale``) for one method over ``cells``; None if no run."""
    values = run_values(rows, method, cells, metric)
    data = scale * np.array([values[run] for run in sorted(values, key=repr)], dtype=float)  # fixed order: same sums
    return _stat_over_runs(data)


def paired_difference(rows: Iterable[dict[str, Any]], first: str, second: str, cells: Sequence[Cell],
                      scale: float = 100.0, metric: str = "success_rate") -> Stat | None:
    """``first`` − ``second`` paired by evaluation root: mean ± sample std over the roots both played.

    Both methods play the same episodes of a root, so the per-root difference removes the workload's own
    variation, which dominates the spread of :func:`paper_stat`.  A method with training seeds is first
    averaged over its seeds within the root.
    """
    return _stat_over_runs(root_differences(rows, first, second, cells, scale, metric))


def root_differences(rows: Iterable[dict[str, Any]], first: str, second: str, cells: Sequence[Cell],
                     scale: float = 100.0, metric: str = "success_rate") -> np.ndarray:
    """The per-root differences ``first`` − ``second`` of ``metric`` × ``scale`` that :func:`paired_difference`
    summarises, in root order, over the roots both methods played."""
    rows = list(rows)
    per_root = []
    for method in (first, second):
        by_root: dict[Any, list[float]] = defaultdict(list)
        for (_, root), value in run_values(rows, method, cells, metric).items():
            by_root[root].append(value)
        per_root.append({root: _nanmean(values) for root, values in by_root.items()})
    roots = sorted(set(per_root[0]) & set(per_root[1]), key=repr)
    return scale * np.array([per_root[0][r] - per_root[1][r] for r in roots], dtype=float)


def _stat_over_runs(data: np.ndarray) -> Stat | None:
    """Mean ± sample std of the runs' finite values; None if there is none."""
    data = data[~np.isnan(data)]
    if data.size == 0:
        return None
    return Stat(float(data.mean()), float(data.std(ddof=1)) if data.size > 1 else float("nan"), int(data.size))


def _nanmean(values: Sequence[float]) -> float:
    array = np.asarray(values, dtype=float)
    return float(array[~np.isnan(array)].mean()) if np.any(~np.isnan(array)) else float("nan")


def half_width(values: Sequence[float]) -> float:
    """The half-width of the mean's t confidence interval at level 0.95 (NaN for fewer than two values)."""
    if len(values) < 2:
        return float("nan")
    return float(scipy_stats.t.ppf(0.975, len(values) - 1) * np.std(values, ddof=1) / np.sqrt(len(values)))
