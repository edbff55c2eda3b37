"""Does a workload separate allocators?  ``python -m studies.workload_report``.

For each workload file it prints tasks per episode, the Oracle and Clairvoyant bounds, FIFO and EDF, the
median share of its window a feasible task needs alone (needed/B) and the share of tasks met within four
batches; then the same task statistics per family.  :func:`gate_failures` checks the regime the shipped
workloads must be in (the paper's: most tasks feasible alone, FIFO far below that because feasible tasks
need most of their window and compete for the nodes); a test recomputes the gates from the files.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mara_common import checks
from curves.bank import CurveBank, load_bank
from mara_agents.evaluation.clairvoyant import clairvoyant_successes, required_batches
from mara_agents.allocators import make_policy
from mara_agents.play.lockstep import play_episodes
from mara_env.config import MARAConfig
from mara_env.fixed_workloads import EVAL_LOADS, EVAL_TASK_SETS, WORKLOAD_DIR, workload_path
from mara_env.workload import load_workload

EARLY_BATCHES = 4
GATE_LOAD = 0.04
# The regime gates (success rates in percent): the Oracle near the paper's share of tasks feasible alone, the
# Clairvoyant close to it, FIFO far below on average; feasible tasks need most of their window; few tasks are
# met before a predictor has seen them.
ORACLE_RANGE = (66.0, 74.0)
CLAIRVOYANT_BELOW_ORACLE = 2.0
FIFO_GAP = 15.0
MEDIAN_NEEDED_SET, MEDIAN_NEEDED_FAMILY = 0.65, 0.5
EARLY_SHARE = 0.05


@dataclass
class TaskStats:
    """Per-task outcomes of one group of tasks (a workload, or one family within it)."""

    tasks: int = 0
    feasible: int = 0
    needed_share: list[float] = field(default_factory=list)  # needed / B of feasible tasks
    early: int = 0  # met within EARLY_BATCHES batches

    def add(self, needed: np.ndarray, budget: np.ndarray) -> None:
        """Count tasks with ``needed`` batches alone (0 = never within B) and available times ``budget``."""
        feasible = needed > 0
        self.tasks += needed.size
        self.feasible += int(feasible.sum())
        self.needed_share.extend((needed[feasible] / budget[feasible]).tolist())
        self.early += int(((needed > 0) & (needed <= EARLY_BATCHES)).sum())

    @property
    def median_needed(self) -> float:
        return float(np.median(self.needed_share)) if self.needed_share else float("nan")

    @property
    def early_share(self) -> float:
        return self.early / self.tasks if self.tasks else float("nan")


@dataclass
class WorkloadSummary:
    """The report row of one workload file, with its per-family task statistics."""

    name: str
    episodes: int
    tasks_per_episode: float
    rates: dict[str, float]  # method -> mean per-episode success rate (%), incl. oracle and clairvoyant
    overall: TaskStats
    families: dict[str, TaskStats]


def summarise_workload(path: Path, bank: CurveBank, methods: Sequence[str] = ("fifo", "edf"),
                       num_nodes: int = MARAConfig().num_nodes) -> WorkloadSummary:
    """Play ``methods`` on every episode of the workload and tabulate its bounds and task statistics."""
    workload = load_workload(path, bank)
    overall, families = TaskStats(), {}
    oracle, clairvoyant = [], []
    for episode in workload.episodes:
        needed = required_batches(episode, bank)
        overall.add(needed, episode.budget)
        names = np.array([bank.records[cid].family for cid in episode.curve])
        for name in np.unique(names):
            families.setdefault(str(name), TaskStats()).add(needed[names == name], episode.budget[names == name])
        if len(episode):
            oracle.append((needed > 0).mean())
            clairvoyant.append(clairvoyant_successes(episode, bank, num_nodes).mean())
    rates = {"oracle": 100 * float(np.mean(oracle)), "clairvoyant": 100 * float(np.mean(clairvoyant))}
    config = MARAConfig(workload=str(path), bank=str(bank.root), num_nodes=num_nodes)
    indices = list(range(len(workload.episodes)))
    for method in methods:
        # A fresh rule per episode, all in lock-step: the rows of playing them one by one, in one vector env.
        rows = play_episodes([make_policy(method) for _ in indices], indices, config=config)
        rates[method] = 100 * float(np.nanmean([row["success_rate"] for row in rows]))
    return WorkloadSummary(path.stem, len(workload.episodes), overall.tasks / len(workload.episodes), rates,
                           overall, dict(sorted(families.items())))


def gate_failures(summaries: dict[str, WorkloadSummary]) -> list[str]:
    """Which regime gates the p = 0.04 workloads of ``id``, ``rl_ood`` and ``vit_ood`` fail (empty: all pass).

    Gates: the Oracle within :data:`ORACLE_RANGE` on each set; the Clairvoyant at most
    :data:`CLAIRVOYANT_BELOW_ORACLE` points under it; FIFO at least :data:`FIFO_GAP` points under it on the
    sets' average; median needed/B of feasible tasks at least :data:`MEDIAN_NEEDED_SET` on each set and
    :data:`MEDIAN_NEEDED_FAMILY` in each family; at most the share :data:`EARLY_SHARE` of a family's tasks met
    within :data:`EARLY_BATCHES` batches.  ``summaries`` maps task-set name to its p = 0.04 summary.
    """
    failures = []
    low, high = ORACLE_RANGE
    for name, s in summaries.items():
        oracle, clairvoyant = s.rates["oracle"], s.rates["clairvoyant"]
        if not low <= oracle <= high:
            failures.append(f"{name}: Oracle {oracle:.1f} % outside {low:g}–{high:g} %")
        if clairvoyant < oracle - CLAIRVOYANT_BELOW_ORACLE:
            failures.append(f"{name}: Clairvoyant {clairvoyant:.1f} % below Oracle − {CLAIRVOYANT_BELOW_ORACLE:g} "
                            f"({oracle - CLAIRVOYANT_BELOW_ORACLE:.1f} %)")
        if not s.overall.median_needed >= MEDIAN_NEEDED_SET:
            failures.append(f"{name}: median needed/B {s.overall.median_needed:.2f} < {MEDIAN_NEEDED_SET:g}")
        for family, stats in s.families.items():
            if not stats.median_needed >= MEDIAN_NEEDED_FAMILY:
                failures.append(f"{name}/{family}: median needed/B {stats.median_needed:.2f} < "
                                f"{MEDIAN_NEEDED_FAMILY:g}")
            if stats.early_share > EARLY_SHARE:
                failures.append(f"{name}/{family}: {100 * stats.early_share:.1f} % of tasks met within "
                                f"{EARLY_BATCHES} batches (> {100 * EARLY_SHARE:g} %)")
    gap = float(np.mean([s.rates["oracle"] - s.rates["fifo"] for s in summaries.values()]))
    if gap < FIFO_GAP:
        failures.append(f"FIFO is {gap:.1f} points under the Oracle on average (< {FIFO_GAP:g})")
    return failures


def gate_summaries(directory: Path = WORKLOAD_DIR, bank: CurveBank | None = None) -> dict[str, WorkloadSummary]:
    """The p = 0.04 summaries of the three evaluation task sets that :func:`gate_failures` checks."""
    bank = bank or load_bank()
    return {name: summarise_workload(workload_path(name, GATE_LOAD, directory), bank) for name in EVAL_TASK_SETS}


def format_report(summaries: Iterable[WorkloadSummary]) -> str:
    """Markdown: one row per workload, then one per (workload, family)."""
    summaries = list(summaries)
    methods = [m for m in summaries[0].rates if m not in ("oracle", "clairvoyant")] if summaries else []
    head = ["workload", "tasks/episode", "Oracle", "Clairvoyant", *[m.upper() for m in methods],
            "Oracle − FIFO" if "fifo" in methods else None, "median needed/B", "≤ 4 batches (%)"]
    head = [h for h in head if h is not None]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in summaries:
        cells = [s.name, f"{s.tasks_per_episode:.1f}", f"{s.rates['oracle']:.1f}", f"{s.rates['clairvoyant']:.1f}",
                 *[f"{s.rates[m]:.1f}" for m in methods]]
        if "fifo" in methods:
            cells.append(f"{s.rates['oracle'] - s.rates['fifo']:.1f}")
        cells += [f"{s.overall.median_needed:.2f}", f"{100 * s.overall.early_share:.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "| workload | family | tasks | feasible alone (%) | median needed/B | ≤ 4 batches (%) |",
              "|---|---|---|---|---|---|"]
    for s in summaries:
        for family, t in s.families.items():
            lines.append(f"| {s.name} | {family} | {t.tasks} | {100 * t.feasible / t.tasks:.1f} | "
                         f"{t.median_needed:.2f} | {100 * t.early_share:.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """CLI: report on the fixed workloads (or a directory of them) and check the gates at p = 0.04."""
    parser = argparse.ArgumentParser(prog="python -m studies.workload_report",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=checks.argparse_type(checks.existing_dir), default=WORKLOAD_DIR,
                        help="directory of workload files")
    parser.add_argument("--bank", default=None, type=checks.argparse_type(checks.existing_dir),
                        help="curve bank the workloads reference (default: shipped)")
    parser.add_argument("--loads", type=float, nargs="+", choices=EVAL_LOADS, default=list(EVAL_LOADS),
                        metavar="P", help="loads to report, among 0.04 0.05 0.06 0.07")
    args = parser.parse_args(argv)
    bank = load_bank(args.bank) if args.bank else load_bank()
    paths = [workload_path(name, load, args.dir) for load in args.loads for name in EVAL_TASK_SETS]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        print(f"error: no workload file {missing[0]}", file=sys.stderr)
        return 2
    summaries = [summarise_workload(path, bank) for path in paths]
    print(format_report(summaries))
    gated = {name: s for name, s in zip(EVAL_TASK_SETS * len(args.loads), summaries)
             if s.name.endswith(f"_p{GATE_LOAD:.2f}")}
    if len(gated) == len(EVAL_TASK_SETS):
        failures = gate_failures(gated)
        print("\nregime gates at p = 0.04: " + ("all pass" if not failures else "FAIL\n  " + "\n  ".join(failures)))
        return 1 if failures else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
