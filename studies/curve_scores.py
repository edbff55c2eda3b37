"""Predictor accuracy on chosen curves, with CIs over curves: ``python -m studies.curve_scores``.

Table 1's protocol (:mod:`mara_agents.predictors.bench`: eight query prefixes per task, capped MAE and
budget-success accuracy) runs here on any split and index range, e.g. the ``val`` curves that decide what
ships, never the ``test`` curves. The queries of one curve are not independent, so the confidence
intervals resample *curves*: a curve bootstrap. Predictors are compared paired, on the same resampled
curves. This is the data curve's measurement (docs/research/data_curve.md): FM trained on more curves, each scored
on the same ``val`` set.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch

from mara_common import checks
from curves.bank import DEFAULT_BANK, SPLITS, BankError, CurveBank, load_bank
from mara_common.atomic import atomic_write_text
from mara_agents.play.checkpoints import CheckpointError
from mara_common.checks import MAX_THREADS
from mara_common.cli import run_command
from mara_agents.predictors.base import Predictor
from mara_agents.predictors.bench import TASK_SETS, QuerySet, build_queries, for_task_set
from mara_agents.predictors.fm.predictor import load_predictor
from mara_agents.predictors.wls import WLSPredictor

RESAMPLES = 2000  # curve-bootstrap draws
METRICS = ("mae", "accuracy")


@dataclass(frozen=True)
class Interval:
    """A point estimate and its curve-bootstrap confidence interval (level 0.95)."""

    value: float
    low: float
    high: float


@dataclass(frozen=True)
class CurveScores:
    """One predictor on one query set: capped MAE (batches) and budget-success accuracy (%)."""

    model: str
    curves: int
    prefixes: int
    mae: Interval
    accuracy: Interval


class CurveBootstrap:
    """Per-query scores summed per curve, and one fixed set of resampled curve lists for every predictor."""

    def __init__(self, queries: QuerySet, resamples: int = RESAMPLES, seed: int = 0):
        self.queries = queries
        self.curve_of_query = np.unique(np.asarray(queries.curve_ids), return_inverse=True)[1]
        self.curves = int(self.curve_of_query.max()) + 1
        self.per_curve_queries = np.bincount(self.curve_of_query, minlength=self.curves).astype(np.float64)
        self.draws = np.random.default_rng(seed).integers(0, self.curves, size=(resamples, self.curves))

    def per_query(self, estimate: np.ndarray) -> dict[str, np.ndarray]:
        """Each query's absolute capped error and whether its budget verdict is right (in %)."""
        q = self.queries
        error = np.abs(np.minimum(estimate, q.query.cap) - q.truth)
        right = 100.0 * ((q.prefix + estimate <= q.budget) == (q.prefix + q.truth <= q.budget))
        return {"mae": error, "accuracy": right}

    def resampled(self, values: np.ndarray) -> tuple[float, np.ndarray]:
        """The mean over queries, and its value on every resampled curve list."""
        sums = np.bincount(self.curve_of_query, weights=values, minlength=self.curves)
        drawn = sums[self.draws].sum(axis=1) / self.per_curve_queries[self.draws].sum(axis=1)
        return float(values.mean()), drawn

    def interval(self, values: np.ndarray) -> Interval:
        value, drawn = self.resampled(values)
        low, high = np.quantile(drawn, [0.025, 0.975])
        return Interval(value, float(low), float(high))


def score(bank: CurveBank, predictors: Mapping[str, Predictor], task_set: str = "ID",
          splits: Sequence[str] = ("val",), indices: range | None = None, seed: int = 0,
          resamples: int = RESAMPLES) -> tuple[list[CurveScores], dict[str, dict[str, Interval]]]:
    """Every predictor's scores on the queries of ``task_set`` over the curves of ``splits`` whose index is in
    ``indices`` (default: all), and each predictor's paired difference from the first one (metric →
    interval of this predictor − the first)."""
    chosen = bank if indices is None else _restricted(bank, splits, indices)
    queries = build_queries(chosen, task_set, seed, splits)
    if queries is None:
        raise ValueError(f"no {task_set} queries on the chosen {'/'.join(splits)} curves")
    boot = CurveBootstrap(queries, resamples, seed)
    per_query = {name: boot.per_query(for_task_set(p, task_set).predict(queries.query).remaining)
                 for name, p in predictors.items()}
    rows = [CurveScores(name, boot.curves, len(queries.truth), *(boot.interval(s[m]) for m in METRICS))
            for name, s in per_query.items()]
    first = next(iter(per_query.values()))
    paired = {name: {m: boot.interval(s[m] - first[m]) for m in METRICS}
              for name, s in list(per_query.items())[1:]}
    return rows, paired


def _restricted(bank: CurveBank, splits: Sequence[str], indices: range) -> CurveBank:
    """The bank with only the curves of ``splits`` whose index lies in ``indices`` (others of those splits
    dropped)."""
    records = {cid: rec for cid, rec in bank.records.items() if rec.split not in splits or rec.index in indices}
    return CurveBank(bank.root, bank.families, records, {cid: bank.per_batch[cid] for cid in records})


def _cell(interval: Interval, digits: int) -> str:
    return f"{interval.value:.{digits}f} [{interval.low:.{digits}f}, {interval.high:.{digits}f}]"


def format_scores(rows: Sequence[CurveScores], paired: Mapping[str, Mapping[str, Interval]]) -> str:
    """A Markdown table: each predictor's scores, then its paired difference from the first row's."""
    first = rows[0].model
    lines = [f"| model | curves | prefixes | capped MAE [CI] | Acc. (%) | MAE − {first} | Acc. − {first} |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        diff = paired.get(row.model)
        extra = (_cell(diff["mae"], 2), _cell(diff["accuracy"], 2)) if diff else ("", "")
        lines.append(f"| {row.model} | {row.curves} | {row.prefixes} | {_cell(row.mae, 2)} | "
                     f"{_cell(row.accuracy, 2)} | {extra[0]} | {extra[1]} |")
    return "\n".join(lines)


def _named_checkpoint(value: str) -> tuple[str, str]:
    name, sep, path = value.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"{value!r} must be NAME=CHECKPOINT")
    return name, str(checks.argparse_type(checks.existing_file)(path))


def _index_range(value: str) -> range:
    start, sep, stop = value.partition(":")
    if not sep or not start.isdigit() or not stop.isdigit() or int(start) >= int(stop):
        raise argparse.ArgumentTypeError(f"{value!r} must be START:STOP with 0 ≤ START < STOP")
    return range(int(start), int(stop))


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m studies.curve_scores",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--bank", default=str(DEFAULT_BANK), type=checks.argparse_type(checks.existing_dir))
    parser.add_argument("--fm", nargs="+", required=True, metavar="NAME=CHECKPOINT", type=_named_checkpoint,
                        help="FM checkpoints to score (the first is the reference of the paired columns)")
    parser.add_argument("--wls", action="store_true", help="score WLS too")
    parser.add_argument("--split", nargs="+", default=["val"], choices=SPLITS, dest="splits")
    parser.add_argument("--indices", type=_index_range, default=None, metavar="START:STOP",
                        help="only curves with START ≤ index < STOP (default: all)")
    parser.add_argument("--task-set", default="ID", choices=TASK_SETS)
    parser.add_argument("--seed", type=checks.argparse_type(checks.integer, None, int, low=0), default=0)
    parser.add_argument("--threads", default=1,
                        type=checks.argparse_type(checks.integer, None, int, low=1, high=MAX_THREADS))
    parser.add_argument("--json", type=checks.argparse_type(checks.writable_file), default=None,
                        help="also write the rows and paired differences as JSON")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    bank = load_bank(args.bank)
    predictors: dict[str, Predictor] = {name: load_predictor(path) for name, path in args.fm}
    if args.wls:
        predictors["WLS"] = WLSPredictor()
    rows, paired = score(bank, predictors, args.task_set, args.splits, args.indices, args.seed)
    print(format_scores(rows, paired))
    if args.json is not None:
        payload = {"rows": [asdict(row) for row in rows],
                   "paired": {name: {m: asdict(v) for m, v in d.items()} for name, d in paired.items()}}
        atomic_write_text(args.json, json.dumps(payload, indent=1) + "\n")
    return 0


def run(argv: Sequence[str] | None = None) -> int:
    """:func:`main` as a command: exit status 0, 2 with one line for an unusable bank, checkpoint or selection."""
    return run_command(lambda: main(argv), (BankError, CheckpointError, OSError, ValueError), "nothing was written")


if __name__ == "__main__":
    sys.exit(run())
