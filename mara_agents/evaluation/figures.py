"""Figure 4 (load generalisation) drawn from its grid: mean lines with ±1 sample-std bands."""

from __future__ import annotations

import math
from pathlib import Path

from mara_agents.evaluation.experiments import TASKS_COLUMN
from mara_agents.evaluation.grid import Grid
from mara_agents.evaluation.stats import Stat

BOUND_STYLE = {"Oracle": ("black", "--"), "Clairvoyant": ("dimgrey", ":")}


def plot_load_generalisation(grid: Grid, loads: list[float], path: Path) -> Path:
    """One line per method and bound over the loads (columns that hold no statistic are left out)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.0, 4.0))
    for col in grid.cols:
        stats = [grid.get(row, col) for row in grid.rows]
        if col == TASKS_COLUMN or not all(isinstance(s, Stat) for s in stats):
            continue
        mean = [s.mean for s in stats]
        std = [0.0 if math.isnan(s.std) else s.std for s in stats]
        colour, style = BOUND_STYLE.get(col, (None, "-"))
        line, = ax.plot(loads, mean, marker="o", linestyle=style, color=colour, label=col)
        ax.fill_between(loads, [m - s for m, s in zip(mean, std)], [m + s for m, s in zip(mean, std)],
                        color=line.get_color(), alpha=0.15, linewidth=0)
    ax.set(xlabel="arrival probability p", ylabel="success rate (%)", xticks=loads,
           title="Load generalisation (p = 0.04 checkpoints)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=150, metadata={"Software": None})
    plt.close(fig)
    return path
