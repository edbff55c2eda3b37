"""Per-family outcomes: which families' tasks a method completes, from the per-task outcomes of each episode.

Every played episode's row carries ``families``: ``{family: [tasks, successes]}`` (the family is the first
part of a task's bank curve id, ``family/split/index``); the bounds' rows carry the same for the Oracle and
the Clairvoyant schedule.  :func:`family_table` turns them into the method × family table: per run (training
seed × evaluation root) the family's tasks are pooled over the run's episodes in the selected cells, and the
table shows the mean ± sample std of that share over runs, as the paper's statistic does for whole episodes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from mara_agents.evaluation.grid import Grid
from mara_agents.evaluation.stats import Cell, Stat
from mara_env.workload import Episode

FamilyCounts = dict[str, list[int]]  # family → [tasks, successes]
TASKS_COLUMN = "Tasks per run"


def family_of(curve_id: str) -> str:
    """The family of a bank curve id (``family/split/index``)."""
    return curve_id.split("/", 1)[0]


def family_counts(curve_ids: Sequence[str], won: Iterable[bool]) -> FamilyCounts:
    """Tasks and successes per family of one episode, families in sorted order."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for curve_id, success in zip(curve_ids, won):
        entry = counts[family_of(curve_id)]
        entry[0] += 1
        entry[1] += int(bool(success))
    return dict(sorted(counts.items()))


def vector_played_families(env: Any, row: int, episode: Episode) -> FamilyCounts:
    """Per-family outcomes of ``episode``, which sub-env ``row`` of a native ``MARA-v0`` vector env has just
    finished (read before the sub-env restarts)."""
    return family_counts(episode.curve, [outcome == "succeeded" for outcome in env.task_outcomes(row)])


def family_runs(rows: Iterable[dict[str, Any]], method: str, cells: Sequence[Cell],
                family: str) -> dict[tuple, tuple[int, int]]:
    """Per run: (tasks, successes) of ``family`` pooled over the run's episodes in ``cells``."""
    wanted = set(cells)
    runs: dict[tuple, list[int]] = defaultdict(lambda: [0, 0])
    for row in rows:
        if row["method"] != method or (row["task_set"], row["load"]) not in wanted or not row.get("families"):
            continue
        tasks, successes = row["families"].get(family, (0, 0))
        runs[row["seed"], row["root"]][0] += tasks
        runs[row["seed"], row["root"]][1] += successes
    return {run: (tasks, successes) for run, (tasks, successes) in runs.items()}


def family_stat(rows: Iterable[dict[str, Any]], method: str, cells: Sequence[Cell], family: str,
                metric: str = "share") -> Stat | None:
    """Mean ± sample std over runs of the family's success share (%, ``metric="share"``) or of its number of
    tasks (``metric="tasks"``); runs without the family's tasks are left out."""
    runs = sorted(family_runs(rows, method, cells, family).items(), key=repr)
    data = np.array([100.0 * won / tasks if metric == "share" else tasks for _, (tasks, won) in runs if tasks],
                    dtype=float)
    if data.size == 0:
        return None
    return Stat(float(data.mean()), float(data.std(ddof=1)) if data.size > 1 else float("nan"), int(data.size))


def families_in(rows: Iterable[dict[str, Any]], cells: Sequence[Cell]) -> list[str]:
    """Every family with a task in ``cells``, sorted."""
    wanted = set(cells)
    return sorted({family for row in rows if (row["task_set"], row["load"]) in wanted
                   for family in (row.get("families") or {})})


def family_table(title: str, methods: Sequence[str], labels: Sequence[str], cells: Sequence[Cell],
                 rows: list[dict[str, Any]], skipped: set[str], note: str) -> Grid:
    """A row per family, a column per method (``labels`` in the same order; the bounds are methods here too),
    and the family's tasks per run, counted from the first method's rows."""
    families = families_in(rows, cells)
    grid = Grid("families", title, "Family", families, [*labels, TASKS_COLUMN], decimals={TASKS_COLUMN: 1},
                note=note)
    for family in families:
        for method, label in zip(methods, labels):
            grid.set(family, label, "skipped" if method in skipped else family_stat(rows, method, cells, family))
        grid.set(family, TASKS_COLUMN, family_stat(rows, methods[-1], cells, family, metric="tasks"))
    return grid
