"""The paper's allocation experiments (Tables 2–5, Figure 4) and our Clairvoyant table, as data.

Each experiment says which (method, task set, load) cells it needs (:func:`plan`) and turns per-episode rows
into a :class:`~mara_agents.evaluation.grid.Grid` (:func:`build_grids`).  Experiments share cells — Table 2's
p = 0.04 episodes also feed Figure 4 and Table 4 — and the harness runs each cell once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mara_agents.evaluation.families import family_table
from mara_agents.evaluation.grid import Grid
from mara_agents.evaluation.methods import BOUND_LABELS, CLAIRVOYANT, ORACLE, spec_for
from mara_agents.evaluation.stats import Cell, Stat, paired_difference, paper_stat

MAIN_LOAD = 0.04
TASK_SET_LABELS = {"id": "ID", "rl_ood": "RL OOD", "vit_ood": "ViT OOD", "stress": "Stress"}
MAIN_METHODS = ("mara", "mara-wls", "lara", "lara-fm", "fifo", "edf")
# Not in the paper: a hand-written allocator over the same FM estimates (mara_agents/allocators/slack.py), shown
# beside the paper's methods so that MARA's numbers can be read against what the estimates buy without learning.
REFERENCE_METHODS = ("slack-fm",)
REFERENCE_NOTE = ("FM-slack is not in the paper: a hand-written allocator over the same FM estimates "
                  "(warm-up tasks first, then tasks predicted to fit by least slack, then the rest; "
                  "mara_agents/allocators/slack.py).")
# Not in the paper either: an off-the-shelf RL library's agent (mara_agents/allocators/third_party.py), shown in
# Table 2 as what a general-purpose trainer reaches on this benchmark without any of the paper's machinery.
# The "+ FM forecast" rows are the same kinds of learner on MARA-Forecast-v0 (docs/research/third_party.md): what a
# standard learner reaches when it sees the paper's forecast.
THIRD_PARTY_METHODS = ("maskable-ppo", "maskable-ppo-fm", "cleanrl-ppo-fm")
FORECAST_THIRD_PARTY = "maskable-ppo-fm"  # its paired table shows what the forecast buys the same learner
THIRD_PARTY_NOTE = ("MaskablePPO is a third-party trainer, not in the paper: sb3-contrib's MaskablePPO with its "
                    "default MLP policy, trained for 400k env steps per seed on train/val curves with the flat "
                    "observation and conflict repair (examples/sb3_maskable_ppo.py). The \"+ FM forecast\" rows "
                    "train on MARA-Forecast-v0, whose observation adds FM's forecast per slot (predicted remaining "
                    "batches, slack, FM-slack's order and joint action): MaskablePPO with 16 envs × 128 steps per "
                    "update, and a CleanRL-style PPO on the native vector env (examples/cleanrl_ppo.py), 400k env "
                    "steps per seed each (docs/research/third_party.md).")
# Not in the paper: our own learned allocator, the best we ship (docs/research/learned_allocator.md says how it was
# chosen): the same MAT trained by another recipe, shown beside the paper's methods with its paired comparison against FM-slack and MARA.
OURS_METHODS = ("mat-il-ens",)
OURS_NOTE = ("MAT-IL ensemble is ours, not the paper's: three of the paper's MAT over FM decoded as one, each "
             "trained by DAgger from an expert that reads the true remaining demand (training only), starting "
             "from the slack ranking over FM's estimates, then PPO held near that policy "
             "(docs/research/learned_allocator.md).")
# The methods each experiment shows by default; --methods replaces them (except Table 5, a fixed ablation pair).
DEFAULT_METHODS = {
    "table2": MAIN_METHODS + REFERENCE_METHODS + OURS_METHODS + THIRD_PARTY_METHODS,
    "table3": MAIN_METHODS + REFERENCE_METHODS + OURS_METHODS,
    "fig4": ("mara", "lara", "fifo", "edf", *REFERENCE_METHODS, *OURS_METHODS, *THIRD_PARTY_METHODS),
    "table4": ("mara", "mara-wls", "fifo", "edf", *OURS_METHODS),
    "table5": ("mara", "mara-sparse"),
    "families": MAIN_METHODS + REFERENCE_METHODS + OURS_METHODS,
    "clairvoyant": (),
}
ALLOCATION_EXPERIMENTS = tuple(DEFAULT_METHODS)
OPERATIONAL = (("utilisation", "Util. (%)", 100.0, 1), ("queue_full", "Queue full (%)", 100.0, 1),
               ("waiting", "Waiting", 1.0, 2), ("ready", "Ready", 1.0, 1))
TASKS_COLUMN = "Tasks/episode"
BOUNDS = (ORACLE, CLAIRVOYANT)
BOUND_NOTE = ("Oracle: independent feasibility (each task alone). Clairvoyant: the most tasks any schedule "
              "could complete with every curve known, respecting M nodes, one node per task, windows and "
              "budgets but not the K-slot admission limit; Oracle ≥ Clairvoyant ≥ any policy per episode.")
# The notes every table that shows these methods carries; a page holding many tables gives them once.
SHARED_NOTES = (BOUND_NOTE, REFERENCE_NOTE, OURS_NOTE, THIRD_PARTY_NOTE)
SKIPPED = "skipped"


@dataclass(frozen=True)
class Selection:
    """What the user asked for: methods (None = each experiment's paper methods), user policies, cells."""

    methods: tuple[str, ...] | None
    policies: tuple[str, ...]
    task_sets: tuple[str, ...]
    loads: tuple[float, ...]

    @property
    def mixtures(self) -> tuple[str, ...]:
        """The selected task sets other than the stress test."""
        return tuple(t for t in self.task_sets if t != "stress")

    @property
    def main_load(self) -> float:
        """Tables 2 and 5 are at p = 0.04 (the MAT training load), or the lowest selected load without it."""
        return MAIN_LOAD if MAIN_LOAD in self.loads else min(self.loads)

    def methods_for(self, experiment: str) -> tuple[str, ...]:
        """The methods an experiment plays (the bounds come with every cell anyway)."""
        if experiment in ("table5", "clairvoyant"):
            return DEFAULT_METHODS[experiment]
        base = self.methods if self.methods is not None else DEFAULT_METHODS[experiment]
        return tuple(dict.fromkeys((*base, *self.policies)))

    def cells_for(self, experiment: str) -> list[Cell]:
        """The (task set, load) cells an experiment reports."""
        if experiment in ("table2", "table5", "families"):
            return [(t, self.main_load) for t in self.mixtures]
        if experiment == "table3":
            return [("stress", None)] if "stress" in self.task_sets else []
        if experiment == "clairvoyant":
            stress = [("stress", None)] if "stress" in self.task_sets else []
            return [(t, p) for t in self.mixtures for p in self.loads] + stress
        return [(t, p) for t in self.mixtures for p in self.loads]


def plan(experiments: Sequence[str], selection: Selection) -> list[tuple[str | None, str, float | None]]:
    """Every (method, task set, load) the experiments need; method None asks for the bounds only."""
    requests: list[tuple[str | None, str, float | None]] = []
    for experiment in experiments:
        if experiment not in DEFAULT_METHODS:
            continue
        cells = selection.cells_for(experiment)
        requests += [(None, t, p) for t, p in cells]
        requests += [(m, t, p) for m in selection.methods_for(experiment) for t, p in cells]
    return list(dict.fromkeys(requests))


def cell_label(cell: Cell) -> str:
    task_set, load = cell
    return TASK_SET_LABELS.get(task_set, task_set) + ("" if load is None else f", p = {load:.2f}")


def _stat_or_skip(rows: list[dict[str, Any]], method: str, cells: Sequence[Cell], skipped: set[str],
                  **kwargs: Any) -> Stat | str | None:
    if method in skipped:
        return SKIPPED
    return paper_stat(rows, method, cells, **kwargs)


def _note(methods: Sequence[str], base: str = BOUND_NOTE) -> str:
    """A table's note, naming the reference and third-party methods when the table shows them."""
    shown = set(methods)
    notes = [base] + [note for group, note in ((REFERENCE_METHODS, REFERENCE_NOTE), (OURS_METHODS, OURS_NOTE),
                                               (THIRD_PARTY_METHODS, THIRD_PARTY_NOTE)) if shown & set(group)]
    return " ".join(notes)


def _labels(methods: Sequence[str], bounds: Sequence[str] = ()) -> list[str]:
    """Column or row labels of methods, then of bounds."""
    return [spec_for(m).label for m in methods] + [BOUND_LABELS[b] for b in bounds]


def task_set_groups(cells: list[Cell]) -> list[tuple[str, list[Cell]]]:
    """A row per task set, then the equal-weight "Average" over all of them when there are several."""
    groups = [(TASK_SET_LABELS.get(c[0], c[0]), [c]) for c in cells]
    return groups + [("Average", cells)] if len(cells) > 1 else groups


def table_by_task_set(name: str, title: str, methods: Sequence[str], cells: list[Cell], rows: list[dict[str, Any]],
                      skipped: set[str]) -> Grid:
    """Tables 2 and 5: a row per task set (+ equal-weight Average), a column per method, then the bounds."""
    columns = [*methods, *BOUNDS]
    grid = Grid(name, title, "Task set", [], _labels(methods, BOUNDS), note=_note(methods))
    for row, group in task_set_groups(cells):
        grid.rows.append(row)
        for method, col in zip(columns, grid.cols):
            grid.set(row, col, _stat_or_skip(rows, method, group, skipped))
    return grid


def build_grids(experiments: Sequence[str], selection: Selection, rows: list[dict[str, Any]],
                skipped: set[str]) -> dict[str, Grid]:
    """The grid of every requested allocation experiment that has cells; ``skipped`` methods show as such."""
    grids: dict[str, Grid] = {}
    for experiment in experiments:
        if experiment not in DEFAULT_METHODS or not selection.cells_for(experiment):
            continue
        methods, cells = selection.methods_for(experiment), selection.cells_for(experiment)
        load = f"p = {selection.main_load:.2f}"
        if experiment == "table2":
            grids[experiment] = table_by_task_set(
                "table2", f"Table 2. Main allocation results at {load}: success rate (%), mean ± sample std",
                methods, cells, rows, skipped)
            if "mara" in methods and len(methods) > 1:
                grids["paired"] = _paired("paired", "mara", methods, cells, rows, skipped, load)
            ours = [m for m in OURS_METHODS if m in methods]
            if ours and len(methods) > 1:
                grids["paired_ours"] = _paired("paired_ours", ours[0], methods, cells, rows, skipped, load)
            if FORECAST_THIRD_PARTY in methods and len(methods) > 1:
                grids["paired_third_party"] = _paired("paired_third_party", FORECAST_THIRD_PARTY, methods, cells,
                                                      rows, skipped, load)
        elif experiment == "table5":
            grids[experiment] = table_by_task_set(
                "table5", f"Table 5. Reward shaping ablation at {load}: success rate (%), mean ± sample std",
                methods, cells, rows, skipped)
        elif experiment == "table3":
            grids[experiment] = _table3(methods, cells, rows, skipped)
        elif experiment == "fig4":
            grids[experiment] = _figure4(methods, selection, rows, skipped)
        elif experiment == "table4":
            grids[experiment] = _table4(methods, cells, rows, skipped)
        elif experiment == "families":
            grids[experiment] = _families(methods, cells, rows, skipped, load)
        else:
            grids[experiment] = _clairvoyant(cells, rows)
    return grids


def _table3(methods: Sequence[str], cells: list[Cell], rows: list[dict[str, Any]], skipped: set[str]) -> Grid:
    col = "Success rate (%)"
    grid = Grid("table3", "Table 3. Infeasible-task stress test: success rate (%), mean ± sample std", "Method",
                _labels(methods, BOUNDS), [col], note=_note(methods))
    for method, row in zip([*methods, *BOUNDS], grid.rows):
        grid.set(row, col, _stat_or_skip(rows, method, cells, skipped))
    return grid


def _figure4(methods: Sequence[str], selection: Selection, rows: list[dict[str, Any]], skipped: set[str]) -> Grid:
    grid = Grid("fig4", "Figure 4. Load generalisation: success rate (%) averaged over task sets with equal weight",
                "Load", [f"p = {p:.2f}" for p in selection.loads],
                _labels(methods, BOUNDS) + [TASKS_COLUMN], note=_note(methods))
    for load, row in zip(selection.loads, grid.rows):
        cells = [(t, load) for t in selection.mixtures]
        for method, col in zip([*methods, *BOUNDS], grid.cols):
            grid.set(row, col, _stat_or_skip(rows, method, cells, skipped))
        grid.set(row, TASKS_COLUMN, paper_stat(rows, ORACLE, cells, metric="tasks", scale=1.0))
    return grid


def _table4(methods: Sequence[str], cells: list[Cell], rows: list[dict[str, Any]], skipped: set[str]) -> Grid:
    grid = Grid("table4", "Table 4. Operational diagnostics over all selected loads and task sets, "
                "mean ± sample std", "Method", _labels(methods), [label for _, label, _, _ in OPERATIONAL],
                decimals={label: d for _, label, _, d in OPERATIONAL},
                note=_note(methods, "Ready: steps from arrival to four loss observations. The bounds are not "
                                    "schedules and have no operational metrics."))
    for method, row in zip(methods, grid.rows):
        for metric, label, scale, _ in OPERATIONAL:
            grid.set(row, label, _stat_or_skip(rows, method, cells, skipped, metric=metric, scale=scale))
    return grid


def _families(methods: Sequence[str], cells: list[Cell], rows: list[dict[str, Any]], skipped: set[str],
              load: str) -> Grid:
    """Success share per task family at the main load, every method beside the bounds."""
    columns = [*methods, *BOUNDS]
    return family_table(
        f"Success by task family at {load}: share of the family's tasks completed (%), mean ± sample std over runs",
        columns, _labels(methods, BOUNDS), cells, rows, skipped,
        note=_note(methods, "Per run (evaluation root × training seed) a family's tasks are pooled over the "
                            "run's episodes of the selected task sets; ID families arrive in every task set, the "
                            "OOD family of a task set only in it. Tasks per run: the family's tasks in one root's "
                            "episodes. " + BOUND_NOTE))


def _clairvoyant(cells: list[Cell], rows: list[dict[str, Any]]) -> Grid:
    """Oracle and Clairvoyant per task set and load, beside the best realisable method evaluated there."""
    grid = Grid("clairvoyant", "Clairvoyant bound beside the Oracle: success rate (%), mean ± sample std",
                "Workload", [cell_label(c) for c in cells],
                ["Oracle", "Clairvoyant", "Oracle − Clairvoyant", "Best method", "Best method (%)"],
                note=_note({r["method"] for r in rows},
                           BOUND_NOTE + " The gap between Clairvoyant and the best method is what better "
                                        "prediction, better allocation or more slots could still win."))
    for cell, row in zip(cells, grid.rows):
        oracle, clairvoyant = paper_stat(rows, ORACLE, [cell]), paper_stat(rows, CLAIRVOYANT, [cell])
        grid.set(row, "Oracle", oracle)
        grid.set(row, "Clairvoyant", clairvoyant)
        grid.set(row, "Oracle − Clairvoyant", paired_difference(rows, ORACLE, CLAIRVOYANT, [cell]))
        played = sorted({r["method"] for r in rows if (r["task_set"], r["load"]) == cell} - set(BOUNDS))
        best = [(s.mean, m, s) for m in played if (s := paper_stat(rows, m, [cell])) is not None]
        if best:
            _, method, stat = max(best, key=lambda b: (b[0], b[1]))
            grid.set(row, "Best method", spec_for(method).label)
            grid.set(row, "Best method (%)", stat)
    return grid


def _paired(name: str, anchor: str, methods: Sequence[str], cells: list[Cell], rows: list[dict[str, Any]],
            skipped: set[str], load: str) -> Grid:
    """Table 2's ``anchor`` (MARA, or our learned allocator) against every other method, paired by evaluation
    root (see ``paired_difference``)."""
    others = [m for m in methods if m != anchor]
    label = spec_for(anchor).label
    grid = Grid(name, f"{label} − method at {load}, paired by evaluation root: success-rate points, mean ± sample "
                      "std over roots", "Task set", [], [f"{label} − {spec_for(m).label}" for m in others],
                note=_note([anchor, *others], "Per root, each method's success rate (MAT methods averaged over their "
                                              "training seeds); the std is over the roots' differences, so it "
                                              "excludes the workload variation that both methods share."))
    for row, group in task_set_groups(cells):
        grid.rows.append(row)
        for method, col in zip(others, grid.cols):
            value = SKIPPED if {anchor, method} & skipped else paired_difference(rows, anchor, method, group)
            grid.set(row, col, value)
    return grid
