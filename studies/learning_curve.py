"""Validation success against env steps, from a run's snapshots: ``python -m studies.learning_curve``.

``train.py mat --snapshot-every N`` exports the policy every N env steps without touching the checkpoint
rule. This command scores every snapshot of each run, greedily, on that run's own validation workloads
(``validation.json`` and ``validation_stress.json`` in the run directory: ``val`` curves only). The score
is the one the checkpoint rule uses. It then summarises each method over its seeds at every step: the
mean, and its t confidence interval (level 0.95) over seeds. Scores go to ``<out>/learning_curve.csv`` one snapshot at a
time, and a rerun skips the snapshots already scored, so an interrupted scoring resumes.
``<out>/learning_curve.md`` and ``.png`` hold the summary.

This answers how fast a recipe learns (e.g. dense against sparse reward at the paper's fixed step
10,500), apart from where its best checkpoint ends up.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from mara_common import checks
from mara_common.atomic import atomic_write_text
from mara_agents.play.checkpoints import CheckpointError, manifest_path
from mara_agents.evaluation.stats import half_width
from mara_common.cli import run_command
from mara_agents.mat.checkpoint import load_policy_model
from mara_agents.mat.setting import Setting
from mara_agents.training.validation import validation_score
from mara_agents.predictors.demand import make_demand

FIELDS = ("method", "seed", "run", "step", "score")
SNAPSHOT = re.compile(r"step_(\d+)\.pt$")


def snapshots(run_dir: Path) -> list[tuple[int, Path]]:
    """A run's snapshots by step; refuses a run without snapshots or validation workloads."""
    found = sorted((int(SNAPSHOT.search(p.name).group(1)), p) for p in (run_dir / "snapshots").glob("step_*.pt"))
    if not found:
        raise ValueError(f"{run_dir}: no snapshots (train with --snapshot-every N)")
    if not (run_dir / "validation.json").is_file():
        raise ValueError(f"{run_dir}: no validation.json (the run's validation workload)")
    return found


def workloads_of(run_dir: Path) -> list[Path]:
    """The run's validation workloads, as its checkpoint rule scores them."""
    return [path for path in (run_dir / "validation.json", run_dir / "validation_stress.json") if path.is_file()]


def score_snapshot(path: Path) -> tuple[dict, float]:
    """(the snapshot's manifest, its validation score on its run's workloads)."""
    manifest = json.loads(manifest_path(path).read_text())
    model, predictor = load_policy_model(path)
    demand = make_demand(predictor, manifest["predictor"]["checkpoint"] or "")
    run_dir = path.parent.parent
    setting = Setting.from_record(manifest["config"]["env"])  # the setting the run validated in
    return manifest, validation_score(model, demand.predictor, workloads_of(run_dir), manifest["data"]["bank"],
                                      **setting.options())


def read_scores(path: Path) -> list[dict[str, str]]:
    if not path.is_file():
        return []
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def thinned(found: list[tuple[int, Path]], every: int, marks: Sequence[int]) -> list[tuple[int, Path]]:
    """The snapshots at multiples of ``every`` env steps (all with ``every`` = 0), the last one, and the two
    around each step of ``marks``: a coarser curve that still shows the marked steps."""
    steps = [step for step, _ in found]
    keep = {steps[-1]}
    for mark in marks:
        keep |= {max((s for s in steps if s <= mark), default=steps[0]), min((s for s in steps if s >= mark),
                                                                           default=steps[-1])}
    return [(step, path) for step, path in found if not every or step % every == 0 or step in keep]


def score_runs(run_dirs: Sequence[Path], out: Path, every: int = 0,
               marks: Sequence[int] = ()) -> list[dict[str, str]]:
    """Score every chosen snapshot (:func:`thinned`) not yet in ``<out>/learning_curve.csv``, appending one row
    each; returns all rows."""
    table = out / "learning_curve.csv"
    rows = read_scores(table)
    done = {(row["run"], int(row["step"])) for row in rows}
    todo = [(run_dir, step, path) for run_dir in run_dirs for step, path in thinned(snapshots(run_dir), every, marks)
            if (str(run_dir), step) not in done]
    new_file = not table.is_file()
    with open(table, "a", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=FIELDS)
        if new_file:
            writer.writeheader()
        for count, (run_dir, step, path) in enumerate(todo, 1):
            manifest, value = score_snapshot(path)
            row = {"method": manifest["method"], "seed": manifest["config"]["seed"], "run": str(run_dir),
                   "step": step, "score": f"{value:.6f}"}
            writer.writerow(row)
            handle.flush()
            rows.append({key: str(value) for key, value in row.items()})
            print(f"[{count}/{len(todo)}] {run_dir} step {step}: {value:.4f}", flush=True)
    return rows


def summarise(rows: Sequence[dict[str, str]]) -> dict[str, list[tuple[int, float, float, int]]]:
    """Per method: (step, mean, t half-width over seeds, seeds) at every step all its seeds reached."""
    by_method: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        by_method[row["method"]][int(row["step"])].append(100.0 * float(row["score"]))
    summary = {}
    for method, by_step in sorted(by_method.items()):
        seeds = max(len(values) for values in by_step.values())
        summary[method] = [(step, float(np.mean(v)), half_width(v), len(v))
                           for step, v in sorted(by_step.items()) if len(v) == seeds]
    return summary


def at_steps(summary: dict[str, list[tuple[int, float, float, int]]], steps: Sequence[int]) -> str:
    """A Markdown table of every method's mean ± half-width at the snapshots nearest to ``steps``."""
    methods = sorted(summary)
    lines = ["| env steps | " + " | ".join(f"{m} (%)" for m in methods) + " |",
             "|---:|" + "---:|" * len(methods)]
    for wanted in steps:
        cells = []
        for method in methods:
            step, mean, half, seeds = min(summary[method], key=lambda point: abs(point[0] - wanted))
            cells.append(f"{mean:.2f} ± {half:.2f} (step {step:,}, {seeds} seeds)")
        lines.append(f"| {wanted:,} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(summary: dict[str, list[tuple[int, float, float, int]]], path: Path, marks: Sequence[int]) -> None:
    """Mean validation success against env steps with its confidence band over seeds, one line per method."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for method, points in summary.items():
        steps, mean, half = (np.array(column, dtype=float) for column in list(zip(*points))[:3])
        ax.plot(steps, mean, label=f"{method} ({points[0][3]} seeds)")
        ax.fill_between(steps, mean - np.nan_to_num(half), mean + np.nan_to_num(half), alpha=0.2)
    for mark in marks:
        ax.axvline(mark, color="grey", linestyle=":", linewidth=1)
    ax.set(xlabel="env steps", ylabel="validation success (%)", title="Greedy validation success (val curves)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path.with_suffix(".png.tmp"), format="png", dpi=120)
    plt.close(fig)
    path.with_suffix(".png.tmp").replace(path)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m studies.learning_curve",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=checks.argparse_type(checks.existing_dir),
                        help="run directories trained with --snapshot-every")
    parser.add_argument("--out", required=True, type=checks.argparse_type(checks.writable_dir),
                        help="where learning_curve.csv/.md/.png go (a rerun resumes from the CSV)")
    parser.add_argument("--at", nargs="+", type=checks.argparse_type(checks.integer, None, int, low=1),
                        default=[10_500], help="env steps to tabulate (the nearest snapshot is shown)")
    parser.add_argument("--every", default=0, type=checks.argparse_type(checks.integer, None, int, low=0),
                        help="score only snapshots at multiples of this many env steps, the last one and the two "
                             "around each --at step (default 0: every snapshot)")
    parser.add_argument("--threads", default=1, type=checks.argparse_type(checks.integer, None, int, low=1))
    args = parser.parse_args(argv)
    for run_dir in args.runs:
        try:
            snapshots(run_dir)
        except ValueError as exc:
            parser.error(str(exc))
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    summary = summarise(score_runs(args.runs, args.out, args.every, args.at))
    table = at_steps(summary, args.at)
    atomic_write_text(args.out / "learning_curve.md", table + "\n")
    plot(summary, args.out / "learning_curve.png", args.at)
    print(table)
    print(f"written to {args.out}")
    return 0


def run(argv: Sequence[str] | None = None) -> int:
    """:func:`main` as a command: 0, 2 with one line for an unusable snapshot, 130 on an interruption."""
    return run_command(lambda: main(argv), (CheckpointError, OSError, KeyError),
                       "the snapshots scored so far are in learning_curve.csv; rerun to resume")


if __name__ == "__main__":
    sys.exit(run())
