"""``evaluate.py abandon``: every hand-written allocator with and without its abandon rule, beside the Oracle and
the Clairvoyant bound, on the ID test workloads at each selected load.

Every method plays ``MARA-v0`` with ``abandon=True`` and ``fairness_metrics=True`` through the one harness
(:func:`~mara_agents.evaluation.harness.evaluate`), so its episodes are cached and resumed like every other
experiment's, under keys that name those options.  A method that never abandons plays exactly the default
episode there (``docs/environment.md``, "Abandoning a task") and gains the abandon metrics, so the wasted
node-steps of both kinds come from the same env.  A method is *with abandoning* when its registry entry says so
(:attr:`~mara_agents.allocators.registry.Method.abandon`).

Per load, a table of every method and bound: success, wasted node-steps, abandoned and abandoned-but-feasible
tasks per episode, the share of steps with a full queue, and the fairness columns (the lowest per-family success
rate and Jain's index over families, ``mara_env.fairness``).  The summary pairs the best hand-written method with
abandoning against the best without (each the highest mean success in the cell) by evaluation root, in
success-rate points and in wasted node-steps per episode, as mean ± the t half-width at level 0.95 over roots
(:func:`~mara_agents.evaluation.stats.half_width`); a second table pairs each allocator with its own base, and a
third each learned policy with abandoning (a registered abandoning method with training seeds, such as
``mat-il+abandon``) with the best hand-written allocator with abandoning.

Written to ``abandon.csv`` (one row per method and episode), ``abandon.md`` and ``abandon.json`` (the grids, and
the paired differences as numbers with their per-root values).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mara_common.atomic import atomic_write_text
from mara_agents.allocators.registry import POLICIES
from mara_agents.evaluation.extension_table import best_of, bound_fairness
from mara_agents.evaluation.grid import Grid, markdown
from mara_agents.evaluation.harness import Settings, evaluate
from mara_agents.evaluation.methods import CLAIRVOYANT, ORACLE
from mara_agents.evaluation.report import label_of, skipped_lines, sorted_rows, write_table
from mara_agents.evaluation.stats import Cell, half_width, paper_stat, root_differences
from mara_env.abandon import WASTED_KEY
from mara_env.fairness import JAIN_KEY, MIN_KEY

WITHOUT = ("fifo", "edf", "lara", "slack-fm")
WITH = ("edf+abandon", "lara+abandon", "slack-fm+abandon")
LEARNED = ("mat-il+abandon",)
METHODS = (*WITHOUT, *WITH, *LEARNED)  # what the experiment plays unless --methods names others
TASK_SET = "id"
ENV = (("abandon", True), ("fairness_metrics", True))
REQUIRED_LOADS = (0.04, 0.07)  # a run writes results/abandon.* only when it plays at least these loads
# (episode metric, column, scale, decimals) of the per-load tables
METRICS = (("success_rate", "success (%)", 100.0, 1), (WASTED_KEY, "wasted node-steps", 1.0, 0),
           ("abandoned", "abandoned", 1.0, 1), ("abandoned_feasible", "abandoned, feasible", 1.0, 1),
           ("queue_full", "queue full (%)", 100.0, 1), (MIN_KEY, "min family (%)", 100.0, 1),
           (JAIN_KEY, "Jain", 1.0, 3))
COLUMNS = ("method", "label", "seed", "task_set", "load", "root", "episode", "tasks", "successes",
           *(metric for metric, _, _, _ in METRICS), "utilisation")
FILES = ("abandon.csv", "abandon.md", "abandon.json")
TEXT = ("Every hand-written allocator with and without its abandon rule (`docs/research/abandon_rules.md`: the rules and "
        "thresholds were chosen on `val` curves before this table was played), and the learned allocator with the "
        "abandon action (chosen on `val` likewise), on the ID test workloads, in "
        "`MARA-v0` with `abandon=True` (an allocator without a rule never abandons and plays the default "
        "episode). Per episode: success, wasted node-steps (node-steps that served a task that did not succeed), "
        "abandoned tasks and of them those that could still have succeeded alone (the Oracle's view), the share "
        "of steps with a full queue, and fairness over task families; mean ± sample std over roots.")


def is_abandoning(method: str) -> bool:
    """Whether a registered method abandons tasks (its registry entry's ``abandon``)."""
    return method in POLICIES and POLICIES[method].abandon


def is_learned(method: str) -> bool:
    """Whether a registered abandoning method is a trained policy (its registry entry has training seeds)."""
    return is_abandoning(method) and POLICIES[method].seeds is not None


@dataclasses.dataclass
class Paired:
    """``first`` − ``second`` of one metric, paired by evaluation root: the per-root values, their mean and the
    t half-width at level 0.95."""

    first: str
    second: str
    per_root: list[float]

    @property
    def mean(self) -> float:
        return float(np.mean(self.per_root)) if self.per_root else float("nan")

    @property
    def half_width(self) -> float:
        return half_width(self.per_root)

    def text(self, decimals: int = 2) -> str:
        """``+1.23 ± 0.45`` (the mean alone with fewer than two roots)."""
        if not self.per_root:
            return "—"
        spread = "" if np.isnan(self.half_width) else f" ± {self.half_width:.{decimals}f}"
        return f"{self.mean:+.{decimals}f}{spread}"

    def to_json(self) -> dict[str, Any]:
        return {"first": self.first, "second": self.second, "per_root": [round(v, 10) for v in self.per_root],
                "mean": round(self.mean, 10), "half_width": None if np.isnan(self.half_width)
                else round(self.half_width, 10)}


def paired(rows: list[dict[str, Any]], first: str, second: str, cell: Cell, metric: str = "success_rate",
           scale: float = 100.0) -> Paired:
    """``first`` − ``second`` of ``metric`` × ``scale`` in ``cell``, paired by evaluation root."""
    return Paired(first, second, root_differences(rows, first, second, [cell], scale, metric).tolist())


def play(base: Settings, methods: Sequence[str], loads: Sequence[float]) -> tuple[list[dict[str, Any]], list[str]]:
    """Every method and the bounds at each load (rows in a fixed order, the bounds with their fairness metrics),
    and a line per method that could not be built."""
    settings = dataclasses.replace(base, env=ENV, strict=False)
    results = evaluate([(method, TASK_SET, load) for method in methods for load in loads], settings)
    rows = [bound_fairness(row) if row["method"] in (ORACLE, CLAIRVOYANT) else row
            for row in sorted_rows(results.rows, list(methods))]
    return rows, skipped_lines(results.skipped)


def load_grid(rows: list[dict[str, Any]], methods: Sequence[str], load: float) -> Grid:
    """One load: a row per method and bound, a column per metric of :data:`METRICS`."""
    shown = [*methods, ORACLE, CLAIRVOYANT]
    grid = Grid(f"abandon_p{load:g}", f"p = {load:.2f}: ID test workloads, mean ± sample std over roots", "Method",
                [label_of(m) for m in shown], [column for _, column, _, _ in METRICS],
                decimals={column: decimals for _, column, _, decimals in METRICS},
                note="Per episode; the bounds are not schedules and have only success and fairness.")
    for method, row in zip(shown, grid.rows):
        for metric, column, scale, _ in METRICS:
            grid.set(row, column, paper_stat(rows, method, [(TASK_SET, load)], metric, scale))
    return grid


def summary(rows: list[dict[str, Any]], methods: Sequence[str],
            loads: Sequence[float]) -> tuple[Grid, dict[str, dict[str, Any]]]:
    """Per load, the best hand-written method with abandoning against the best without, paired by root (the grid,
    and the paired differences as numbers by load); a learned policy with abandoning has its own table
    (:func:`learned_against_rules`)."""
    cols = ["best without", "without (%)", "best with", "with (%)", "with − without (points)",
            "wasted without", "wasted with", "wasted, with − without", "Clairvoyant − with (points)"]
    grid = Grid("abandon", "Best hand-written allocator with abandoning minus the best without, paired by evaluation "
                "root: mean ± t half-width (level 0.95) over roots", "Load", [], cols,
                decimals={"wasted without": 0, "wasted with": 0},
                note="The best of each kind is the one with the highest mean success at the load (chosen on these "
                     "test episodes). Success in % and wasted node-steps per episode: mean ± sample std over roots.")
    numbers: dict[str, dict[str, Any]] = {}
    for load in loads:
        cell, row = (TASK_SET, load), f"p = {load:.2f}"
        grid.rows.append(row)
        without = best_of(rows, [m for m in methods if not is_abandoning(m)], cell)
        with_ = best_of(rows, [m for m in methods if is_abandoning(m) and not is_learned(m)], cell)
        for who, offset in ((without, 0), (with_, 2)):
            grid.set(row, cols[offset], label_of(who[0]) if who else "none")
            grid.set(row, cols[offset + 1], who[1] if who else None)
        if without is None or with_ is None:
            continue
        success = paired(rows, with_[0], without[0], cell)
        wasted = paired(rows, with_[0], without[0], cell, WASTED_KEY, 1.0)
        ceiling = paired(rows, CLAIRVOYANT, with_[0], cell)
        grid.set(row, "wasted without", paper_stat(rows, without[0], [cell], WASTED_KEY, 1.0))
        grid.set(row, "wasted with", paper_stat(rows, with_[0], [cell], WASTED_KEY, 1.0))
        grid.set(row, cols[4], success.text())
        grid.set(row, cols[7], wasted.text(decimals=0))
        grid.set(row, cols[8], ceiling.text())
        numbers[f"{load:g}"] = {"success": success.to_json(), "wasted_node_steps": wasted.to_json(),
                                "wasted_relative": relative_change(rows, with_[0], without[0], cell),
                                "clairvoyant_minus_with": ceiling.to_json()}
    return grid, numbers


def relative_change(rows: list[dict[str, Any]], first: str, second: str, cell: Cell) -> float | None:
    """``first``'s mean wasted node-steps per episode over ``second``'s on the same episodes, minus 1."""
    ours, theirs = (paper_stat(rows, method, [cell], WASTED_KEY, 1.0) for method in (first, second))
    if ours is None or theirs is None or theirs.mean == 0:
        return None
    return round(ours.mean / theirs.mean - 1.0, 10)


def own_base(rows: list[dict[str, Any]], methods: Sequence[str], loads: Sequence[float]) -> Grid:
    """Each allocator with abandoning minus its own base allocator (``edf+abandon`` − ``edf``), per load, paired
    by root, where both were played."""
    pairs = [(m, m.removesuffix("+abandon")) for m in methods if is_abandoning(m) and m.removesuffix("+abandon")
             in methods]
    grid = Grid("abandon_own_base", "Each allocator with its abandon rule minus the same allocator without, paired "
                "by evaluation root: success-rate points, mean ± t half-width (level 0.95) over roots", "Load",
                [f"p = {load:.2f}" for load in loads], [f"{label_of(m)} − {label_of(b)}" for m, b in pairs])
    for load, row in zip(loads, grid.rows):
        for (method, base), col in zip(pairs, grid.cols):
            grid.set(row, col, paired(rows, method, base, (TASK_SET, load)).text())
    return grid


def learned_against_rules(rows: list[dict[str, Any]], methods: Sequence[str],
                          loads: Sequence[float]) -> tuple[Grid, dict[str, dict[str, Any]]]:
    """Per load, each learned policy with abandoning minus the best hand-written allocator with abandoning (the
    highest mean success in the cell), paired by root: the grid, and the paired differences by load."""
    learned = [m for m in methods if is_learned(m)]
    cols = ["learned", "learned (%)", "best hand-written", "hand-written (%)", "learned − hand-written (points)",
            "wasted learned", "wasted hand-written"]
    grid = Grid("abandon_learned", "Learned allocator with abandoning minus the best hand-written allocator with "
                "abandoning, paired by evaluation root: mean ± t half-width (level 0.95) over roots", "Load", [],
                cols, decimals={"wasted learned": 0, "wasted hand-written": 0},
                note="The best hand-written one is the one with the highest mean success at the load (chosen on "
                     "these test episodes). Success in % and wasted node-steps per episode: mean ± sample std over "
                     "roots.")
    numbers: dict[str, dict[str, Any]] = {}
    for method in learned:
        for load in loads:
            cell, row = (TASK_SET, load), f"p = {load:.2f}" + (f", {label_of(method)}" if len(learned) > 1 else "")
            rule = best_of(rows, [m for m in methods if is_abandoning(m) and not is_learned(m)], cell)
            if rule is None:
                continue
            grid.rows.append(row)
            success = paired(rows, method, rule[0], cell)
            for col, value in zip(cols, (label_of(method), paper_stat(rows, method, [cell]), label_of(rule[0]),
                                         rule[1], success.text(),
                                         paper_stat(rows, method, [cell], WASTED_KEY, 1.0),
                                         paper_stat(rows, rule[0], [cell], WASTED_KEY, 1.0))):
                grid.set(row, col, value)
            numbers.setdefault(method, {})[f"{load:g}"] = success.to_json()
    return grid, numbers


def write_abandon(out: Path, rows: list[dict[str, Any]], grids: dict[str, Grid], numbers: dict[str, Any],
                  notes: Sequence[str], command: str, record: dict[str, Any]) -> str:
    """abandon.csv, abandon.md and abandon.json under ``out``; returns the Markdown text."""
    out.mkdir(parents=True, exist_ok=True)
    write_table(rows, COLUMNS, out / "abandon.csv")
    parts = ["# Stop what cannot finish: allocators with and without abandoning", "", TEXT, "",
             f"Generated by `{command}` ({record['roots']} roots × {record['episodes']} episode(s) per load). "
             "Per-episode data: `abandon.csv`.", ""]
    parts += [markdown(grid) for grid in grids.values()]
    if notes:
        parts += ["Not played:", *notes, ""]
    text = "\n".join(parts).rstrip() + "\n"
    atomic_write_text(out / "abandon.md", text)
    document = {"command": command, "settings": record, "paired": numbers,
                "grids": {name: grid.to_json() for name, grid in grids.items()}}
    atomic_write_text(out / "abandon.json", json.dumps(document, indent=1, ensure_ascii=False) + "\n")
    return text


def run_abandon(base: Settings, loads: Sequence[float], methods: Sequence[str] = METHODS,
                ) -> tuple[list[dict[str, Any]], dict[str, Grid], dict[str, Any], list[str]]:
    """Play every method at every load and build the tables: (rows, grids, paired numbers, not-played lines)."""
    rows, notes = play(base, methods, loads)
    played = [m for m in methods if any(row["method"] == m for row in rows)]
    grid, numbers = summary(rows, played, loads)
    grids = {"abandon": grid, "abandon_own_base": own_base(rows, played, loads)}
    if any(is_learned(m) for m in played):
        grids["abandon_learned"], numbers["learned_minus_hand_written"] = learned_against_rules(rows, played, loads)
    grids.update({f"abandon_p{load:g}": load_grid(rows, played, load) for load in loads})
    return rows, grids, numbers, notes
