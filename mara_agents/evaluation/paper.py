"""The paper's published numbers (typed once into ``paper_numbers.json``) set beside ours, cell by cell."""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path
from typing import Any

from mara_agents.evaluation.grid import Grid
from mara_agents.evaluation.stats import Stat

PAPER_NUMBERS = Path(__file__).with_name("paper_numbers.json")
EXPERIMENT_LABELS = {"table1": "Table 1", "table2": "Table 2", "table3": "Table 3", "fig4": "Figure 4",
                     "table4": "Table 4", "table5": "Table 5"}


@lru_cache(maxsize=1)
def paper_numbers() -> dict[str, Any]:
    """``experiments → {cite, cells: row → col → value or [mean, std]}`` as typed from the paper."""
    return json.loads(PAPER_NUMBERS.read_text())["experiments"]


def published_stat(value: float | list[float]) -> Stat:
    """A published cell as a statistic (std NaN where the paper prints only a mean)."""
    mean, std = (value[0], value[1]) if isinstance(value, list) else (value, math.nan)
    return Stat(float(mean), float(std), 0)


def comparison(grids: dict[str, Grid], comparable: set[str]) -> Grid:
    """Paper vs ours for every published cell of the ``comparable`` grids (same task sets and load).

    Cells of experiments, loads or methods that were not run, or not at the paper's settings, are left out;
    cells we could not fill (a skipped method) show "skipped" or "—".
    """
    grid = Grid("compare", "Paper vs ours: every published cell next to our number", "Experiment · row · column",
                [], ["Paper", "Ours", "Ours − paper"],
                note="Paper numbers are typed from the paper (mara_agents/evaluation/paper_numbers.json, which "
                     "cites each table). Ours use this repository's curve bank, workloads and checkpoints, so "
                     "differences measure the reproduction, not only noise.")
    for name, published in paper_numbers().items():
        if name not in grids or name not in comparable:
            continue
        ours = grids[name]
        for row, cols in published["cells"].items():
            for col, value in cols.items():
                if row not in ours.rows or col not in ours.cols:
                    continue  # not part of this run (e.g. a load or method that was not selected)
                label = f"{EXPERIMENT_LABELS[name]} · {row} · {col}"
                paper, mine = published_stat(value), ours.get(row, col)
                grid.rows.append(label)
                grid.decimals[label] = ours.decimals.get(col, 2)
                grid.set(label, "Paper", paper)
                grid.set(label, "Ours", mine)
                if isinstance(mine, Stat) and not math.isnan(mine.mean):
                    grid.set(label, "Ours − paper", Stat(mine.mean - paper.mean, math.nan, mine.runs))
    return grid
