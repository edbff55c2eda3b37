"""Predictor benchmark: the paper's Table 1 and Figure 3 (§5.2) on the bank's ``test`` curves.

Protocol (fixed and deterministic):

* Task sets: ``ID`` (families with role "id"), ``RL OOD`` (role "ood", name containing "pong" or "dagger")
  and ``ViT OOD`` (role "ood", name containing "vit").  Families without calibrated rules are left out.
* Each test curve becomes one task with ε and available time B drawn from its family's rules by a generator
  seeded with (seed, CRC-32 of the curve id).
* A task is queried only while it would still be active under continuous service: at prefixes
  s ∈ [4, min(c − 1, B − 1)], c being the true first batch with L(c) ≤ ε.  Eight query ranks spread evenly
  over that range (fewer distinct prefixes repeat); a task that succeeds within 4 batches is never queried.
* The horizon (cap) of a query is the remaining generation cap, length − s: curves are stored to twice the
  family's largest budget.  The truth is c − s, or the horizon when the stored curve never reaches ε.
* FM inference follows paper Appendix A.2: 8 Sobol samples × 4 Euler steps on ID and RL OOD, 4 × 1 on
  ViT OOD (:data:`FM_INFERENCE`); WLS has no setting.
* Metrics: capped remaining-batch MAE; budget-success accuracy — whether ``s + estimate ≤ B`` agrees with
  ``c ≤ B``; the share of answers *at the horizon* (the forecast never reaches ε within the recorded curve,
  the same answer a predictor gives when it has none — compare it with the truth's share); and wall-clock milliseconds per prefix of one batched call over all the task set's prefixes
  (best of three, after a warm-up call).

``python -m mara_agents.predictors.bench`` prints the table and writes it (Markdown, CSV, JSON) with the
Figure 3 PNGs to ``--out`` (default: a new scratch directory); :func:`benchmark` returns the table (and the estimates) for ``evaluate.py``.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import tempfile
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from mara_common import checks
from curves.bank import DEFAULT_BANK, BankError, CurveBank, FamilySpec, load_bank
from mara_agents.play.checkpoints import CheckpointError
from mara_common.checks import MAX_THREADS
from mara_common.cli import run_command
from mara_agents.predictors.base import MIN_OBSERVATIONS, Predictor, PredictorQuery
from mara_agents.predictors.fm.predictor import DEFAULT_CHECKPOINT, FlowMatchingPredictor, load_predictor
from mara_agents.predictors.wls import WLSPredictor, fit_power_law

TASK_SETS = ("ID", "RL OOD", "ViT OOD")
QUERY_RANKS = 8


def task_set_of(spec: FamilySpec) -> str | None:
    """The benchmark task set a family belongs to, or None for an OOD family of another kind."""
    name = spec.name.lower()
    if spec.role == "id":
        return "ID"
    if "vit" in name:
        return "ViT OOD"
    if "pong" in name or "dagger" in name:
        return "RL OOD"
    return None


def draw_task(spec: FamilySpec, curve_id: str, seed: int) -> tuple[float, int]:
    """(ε, B) for one curve from its family's rules (as the task sets draw them), fixed by (seed, curve id)."""
    if spec.eps is None or spec.budget is None:
        raise BankError(f"family {spec.name!r} has no calibrated ε/budget rule; run curves.calibrate first")
    rng = np.random.default_rng([seed, zlib.crc32(curve_id.encode())])
    if spec.eps["kind"] == "scaled":
        eps = spec.eps["base"] * rng.uniform(spec.eps["low"], spec.eps["high"])
    else:
        eps = float(np.exp(rng.uniform(np.log(spec.eps["low"]), np.log(spec.eps["high"]))))
    if spec.budget["kind"] == "interval":
        budget = int(rng.integers(spec.budget["low"], spec.budget["high"] + 1))
    else:
        budget = int(rng.choice(spec.budget["values"]))
    return float(eps), budget


def uncalibrated_families(bank: CurveBank) -> list[str]:
    """Families without an ε or budget rule yet; the benchmark leaves them out (and says so)."""
    return sorted(name for name, spec in bank.families.items() if spec.eps is None or spec.budget is None)


def crossing_batch(cumavg: np.ndarray, eps: float) -> int | None:
    """The first batch c (1-based) with L(c) ≤ ε, or None if the stored curve never gets there."""
    below = np.flatnonzero(cumavg <= eps)
    return int(below[0]) + 1 if below.size else None


def query_prefixes(crossing: int | None, budget: int, length: int, ranks: int = QUERY_RANKS) -> np.ndarray:
    """Eight prefixes spread evenly over [4, min(c − 1, B − 1)]; empty if the task is done before 4 batches."""
    last = min(crossing - 1 if crossing is not None else length, budget - 1)
    if last < MIN_OBSERVATIONS:
        return np.zeros(0, dtype=np.int64)
    return MIN_OBSERVATIONS + (np.arange(ranks) * (last - MIN_OBSERVATIONS)) // (ranks - 1)


@dataclass(frozen=True)
class QuerySet:
    """Every query of one task set, with the truth needed to score it."""

    task_set: str
    curve_ids: tuple[str, ...]   # per query
    rank: np.ndarray             # 0..7 per query
    budget: np.ndarray           # B per query
    truth: np.ndarray            # true remaining batches, capped at the horizon
    query: PredictorQuery

    @property
    def prefix(self) -> np.ndarray:
        """Observed batches s per query."""
        return self.query.length


def build_queries(bank: CurveBank, task_set: str, seed: int = 0,
                  splits: Sequence[str] = ("test",)) -> QuerySet | None:
    """The deterministic queries of one task set over the bank's curves of ``splits`` (Table 1: ``test``;
    None if it has none)."""
    rows: list[tuple[str, int, int, int, float, float, float, int]] = []
    histories: list[np.ndarray] = []
    for name, spec in sorted(bank.families.items()):
        if task_set_of(spec) != task_set or name in uncalibrated_families(bank):
            continue
        for cid in bank.ids(family=name, splits=splits):
            record, cumavg = bank.records[cid], bank.cumavg(cid)
            eps, budget = draw_task(spec, cid, seed)
            crossing = crossing_batch(cumavg, eps)
            for rank, s in enumerate(query_prefixes(crossing, budget, record.length)):
                horizon = record.length - s
                truth = horizon if crossing is None else crossing - s
                rows.append((cid, rank, budget, int(s), eps, float(record.batch_size), record.lr, truth))
                histories.append(cumavg[:s])
    if not rows:
        return None
    ids, rank, budget, prefix, eps, batch_size, lr, truth = (np.array(col) for col in zip(*rows))
    lengths = np.array([bank.records[c].length for c in ids])
    history = np.zeros((len(rows), int(prefix.max())))
    for row, values in enumerate(histories):
        history[row, :values.size] = values
    query = PredictorQuery(history, prefix, batch_size, lr, eps, (lengths - prefix).astype(np.float64))
    return QuerySet(task_set, tuple(ids), rank, budget, truth.astype(np.float64), query)


@dataclass(frozen=True)
class BenchRow:
    """One line of Table 1."""

    task_set: str
    model: str
    prefixes: int
    mae: float
    accuracy: float
    at_horizon: float
    ms_per_prefix: float


def capped_mae(estimate: np.ndarray, truth: np.ndarray, horizon: np.ndarray) -> float:
    """Mean |min(estimate, h) − truth| in batches (truth is already capped at h)."""
    return float(np.mean(np.abs(np.minimum(estimate, horizon) - truth)))


def budget_success_accuracy(estimate: np.ndarray, truth: np.ndarray, prefix: np.ndarray,
                            budget: np.ndarray) -> float:
    """Fraction of queries where "s + estimate ≤ B" agrees with the truth "c ≤ B" (a non-crossing truth is
    the horizon, length − s, and length = 2·max budget > B, so it counts as a failure)."""
    return float(np.mean((prefix + estimate <= budget) == (prefix + truth <= budget)))


def horizon_share(estimate: np.ndarray, horizon: np.ndarray) -> float:
    """Fraction of answers at (or past) the horizon: "ε is not reached within the recorded curve"."""
    return float(np.mean(estimate >= horizon))


def timed_predict(predictor: Predictor, query: PredictorQuery, repeats: int = 3) -> tuple[np.ndarray, float]:
    """Estimates and the best wall-clock seconds of one batched call (after a warm-up call)."""
    estimate = predictor.predict(query).remaining
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        predictor.predict(query)
        best = min(best, time.perf_counter() - start)
    return estimate, best


@dataclass(frozen=True)
class BenchResult:
    """Table 1 (``rows``) plus what Figure 3 needs: every estimate, keyed (task set, predictor), and the
    query sets they answer."""

    rows: list[BenchRow]
    estimates: dict[tuple[str, str], np.ndarray]
    queries: dict[str, QuerySet]

    def truth_at_horizon(self) -> dict[str, float]:
        """Per task set, the share of queries whose truth is the horizon (ε never reached in the curve)."""
        return {name: horizon_share(q.truth, q.query.cap) for name, q in self.queries.items()}


# (samples, Euler steps) of FM per task set where the paper departs from the default 8 × 4 (Appendix A.2:
# "ViT uses four samples and one Euler step selected on predictor validation data").
FM_INFERENCE: dict[str, tuple[int, int]] = {"ViT OOD": (4, 1)}


def for_task_set(predictor: Predictor, task_set: str) -> Predictor:
    """The predictor as the paper runs it on ``task_set``: FM with that task set's inference setting."""
    if isinstance(predictor, FlowMatchingPredictor) and task_set in FM_INFERENCE:
        samples, steps = FM_INFERENCE[task_set]
        return FlowMatchingPredictor(predictor.model, n_samples=samples, euler_steps=steps)
    return predictor


def benchmark(bank: CurveBank, predictors: Mapping[str, Predictor], seed: int = 0) -> BenchResult:
    """Table 1: one row per (task set, predictor), each predictor answering a task set in one batched call."""
    rows, estimates, query_sets = [], {}, {}
    for task_set in TASK_SETS:
        queries = build_queries(bank, task_set, seed)
        if queries is None:
            continue
        query_sets[task_set] = queries
        for name, predictor in predictors.items():
            estimate, seconds = timed_predict(for_task_set(predictor, task_set), queries.query)
            estimates[(task_set, name)] = estimate
            rows.append(BenchRow(task_set, name, len(queries.truth),
                                 capped_mae(estimate, queries.truth, queries.query.cap),
                                 budget_success_accuracy(estimate, queries.truth, queries.prefix, queries.budget),
                                 horizon_share(estimate, queries.query.cap),
                                 1e3 * seconds / len(queries.truth)))
    return BenchResult(rows, estimates, query_sets)


def format_table(rows: Sequence[BenchRow], truth_at_horizon: Mapping[str, float] | None = None) -> str:
    """Markdown Table 1, plus the FM/WLS latency ratio per task set when both are present, and the truth's
    share at the horizon (what a perfect predictor's "at horizon" column would read) when given."""
    lines = ["| Task set | Model | Prefixes | MAE ↓ | Acc. (%) ↑ | At horizon (%) | ms/prefix ↓ |",
             "|---|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {r.task_set} | {r.model} | {r.prefixes} | {r.mae:.2f} | {100 * r.accuracy:.2f} | "
              f"{100 * r.at_horizon:.1f} | {r.ms_per_prefix:.3f} |" for r in rows]
    by_key = {(r.task_set, r.model): r for r in rows}
    ratios = [f"{t}: {by_key[t, 'FM'].ms_per_prefix / by_key[t, 'WLS'].ms_per_prefix:.1f}×"
              for t in TASK_SETS if (t, "FM") in by_key and (t, "WLS") in by_key]
    if ratios:
        lines.append("\nFM/WLS latency ratio — " + ", ".join(ratios))
    if truth_at_horizon:
        lines.append("\nTruth at the horizon (the stored curve never reaches ε) — "
                     + ", ".join(f"{t}: {100 * share:.1f} %" for t, share in truth_at_horizon.items()))
    settings = ", ".join(f"{samples} × {steps} on {t}" for t, (samples, steps) in FM_INFERENCE.items())
    lines.append(f"\nFM inference: 8 samples × 4 Euler steps, except {settings} (paper Appendix A.2).")
    return "\n".join(lines)


def representative_query(queries: QuerySet, fm: np.ndarray, wls: np.ndarray, rank: int = 3) -> int:
    """Figure 3(a): the rank-``rank`` query of the curve with the median per-curve (WLS − FM) MAE gain."""
    ids = np.array(queries.curve_ids)
    curves = sorted(set(queries.curve_ids))
    gain = [np.mean(np.abs(wls - queries.truth)[ids == c]) - np.mean(np.abs(fm - queries.truth)[ids == c])
            for c in curves]
    order = np.argsort(gain, kind="stable")
    chosen = curves[int(order[len(order) // 2])]
    candidates = np.flatnonzero((ids == chosen) & (queries.rank == min(rank, int(queries.rank.max()))))
    return int(candidates[0])


def plot_figure3(bank: CurveBank, queries: QuerySet, fm: FlowMatchingPredictor, estimates: Mapping[str, np.ndarray],
                 out: Path) -> list[Path]:
    """Figure 3 as two PNGs: (a) a representative ID forecast, (b) capped MAE per query rank."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    row = representative_query(queries, estimates["FM"], estimates["WLS"])
    single = queries.query.subset(np.array([row]))
    prediction = fm.predict(single)
    s, eps = int(single.length[0]), float(single.eps[0])
    cumavg = bank.cumavg(queries.curve_ids[row])
    future = np.arange(s, cumavg.size + 1)
    log_a, b = fit_power_law(single.history, single.length)
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.plot(np.arange(1, s + 1), cumavg[:s], color="black", label="observed prefix")
    ax.plot(future, cumavg[s - 1:], color="grey", linestyle="--", label="true suffix")
    for k, path in enumerate(prediction.trajectories[0]):
        ax.plot(prediction.grid[0], path, color="tab:blue", alpha=0.35, lw=1, label="FM samples" if k == 0 else None)
    ax.plot(future, np.exp(log_a[0]) * future ** -b[0], color="tab:orange", label="WLS extrapolation")
    ax.axhline(eps, color="tab:red", lw=0.8, label="ε")
    truth = s + queries.truth[row]
    for x, colour, name in ((truth, "black", "true"), (s + estimates["FM"][row], "tab:blue", "FM median"),
                            (s + estimates["WLS"][row], "tab:orange", "WLS")):
        ax.plot([x], [eps], marker="o", color=colour, linestyle="none", label=f"{name} crossing {x:.0f}")
    ax.set(xlabel="batches", ylabel="cumulative-average loss", title=f"{queries.curve_ids[row]}, prefix {s}")
    ax.legend(fontsize=7)
    paths = [out / "fig3a_forecast.png"]
    fig.tight_layout()
    fig.savefig(paths[0], dpi=150)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(5.0, 3.6))
    ranks = np.unique(queries.rank)
    fraction = [np.median(queries.prefix[queries.rank == r] / queries.budget[queries.rank == r]) for r in ranks]
    for name, colour in (("FM", "tab:blue"), ("WLS", "tab:orange")):
        mae = [np.mean(np.abs(np.minimum(estimates[name], queries.query.cap) - queries.truth)[queries.rank == r])
               for r in ranks]
        ax.plot(fraction, mae, marker="o", color=colour, label=name)
    ax.set(xlabel="median observed fraction of the budget", ylabel="capped MAE (batches)",
           title="ID: error by query rank")
    ax.legend()
    paths.append(out / "fig3b_mae_by_rank.png")
    fig.tight_layout()
    fig.savefig(paths[1], dpi=150)
    plt.close(fig)
    return paths


def write_results(rows: Sequence[BenchRow], out: Path, truth_at_horizon: Mapping[str, float] | None = None) -> None:
    """table.md, table.csv and table.json under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "table.md").write_text(format_table(rows, truth_at_horizon) + "\n")
    with open(out / "table.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(asdict(rows[0])))
        writer.writeheader()
        writer.writerows(asdict(r) for r in rows)
    (out / "table.json").write_text(json.dumps([asdict(r) for r in rows], indent=1) + "\n")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line settings; without ``--out`` the tables and figures go to a new scratch directory, so the
    benchmark never replaces the shipped ``results/`` (``evaluate.py table1`` writes those)."""
    parser = argparse.ArgumentParser(prog="python -m mara_agents.predictors.bench",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--bank", default=str(DEFAULT_BANK), type=checks.argparse_type(checks.existing_dir),
                        help="curve bank directory")
    parser.add_argument("--checkpoint", default=str(DEFAULT_CHECKPOINT),
                        type=checks.argparse_type(checks.existing_file), help="FM checkpoint")
    parser.add_argument("--unverified", action="store_true",
                        help="accept a --checkpoint without a manifest to verify it against")
    parser.add_argument("--out", type=checks.argparse_type(checks.writable_dir),
                        help="where tables and figures go (default: a new scratch directory)")
    parser.add_argument("--seed", type=checks.argparse_type(checks.integer, None, int, low=0), default=0,
                        help="seed of the per-curve ε and B draws")
    parser.add_argument("--threads", default=1,
                        type=checks.argparse_type(checks.integer, None, int, low=1, high=MAX_THREADS),
                        help="torch CPU threads for the timing")
    parser.add_argument("--device", default="cpu", type=checks.argparse_type(checks.torch_device),
                        help="torch device for FM")
    args = parser.parse_args(argv)
    if args.out is None:
        args.out = Path(tempfile.mkdtemp(prefix="mara-bench-"))
    return args


def main(argv: Sequence[str] | None = None) -> list[BenchRow]:
    """Command-line entry point: benchmark WLS and FM, print Table 1, write it and Figure 3."""
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    fm = load_predictor(args.checkpoint, args.device, verify=not args.unverified)  # first: the quick refusal
    bank = load_bank(args.bank)
    result = benchmark(bank, {"WLS": WLSPredictor(), "FM": fm}, args.seed)
    out = args.out
    write_results(result.rows, out, result.truth_at_horizon())
    print(format_table(result.rows, result.truth_at_horizon()))
    print(f"(torch threads: {args.threads}, device: {args.device}; written to {out})")
    if uncalibrated_families(bank):
        print(f"left out, no calibrated ε/budget rule yet: {', '.join(uncalibrated_families(bank))}")
    if "ID" in result.queries:
        figures = plot_figure3(bank, result.queries["ID"], fm,
                               {name: result.estimates["ID", name] for name in ("FM", "WLS")}, out)
        print("figures:", ", ".join(map(str, figures)))
    return result.rows


def run(argv: Sequence[str] | None = None) -> int:
    """:func:`main` as a command: exit status 0, 2 with one line for an unusable bank or checkpoint."""
    return run_command(lambda: main(argv), (BankError, CheckpointError, OSError), "nothing was written")


if __name__ == "__main__":
    sys.exit(run())
