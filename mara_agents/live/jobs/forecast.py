"""Forecasts for jobs the predictors never saw: FM and WLS scored on user jobs as Table 1 scores the bank.

The allocators read demand through the one demand stage (:mod:`mara_agents.predictors.demand`), for user
jobs as for the bank's tasks: the observation carries a job's tracked loss series, its batch size, learning
rate, ε and B, which is all either predictor reads.  FM stays frozen (trained on the bank's families); WLS
fits each job's own history.  Before :data:`~mara_agents.predictors.base.MIN_OBSERVATIONS` observations,
or where a model has no usable answer, both return the job's remaining generation cap 2·B − s, the same
fallback as for the bank's tasks.

To score them, each job is run offline to 2·B steps (its "recorded curve", as bank curves are recorded to
twice their budget), and the queries follow Table 1's protocol (:mod:`mara_agents.predictors.bench`): eight
prefixes spread over [4, min(c − 1, B − 1)], c the first step whose tracked loss is ≤ ε, the truth c − s
capped at the horizon 2·B − s, and the capped MAE.  ``python -m mara_agents.live.jobs forecast FILE`` prints the
user jobs' rows beside the bank's test curves.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from curves.bank import DEFAULT_BANK, load_bank
from mara_agents.predictors.base import Predictor, PredictorQuery
from mara_agents.predictors.bench import (BenchRow, QuerySet, benchmark, budget_success_accuracy, capped_mae,
                                          crossing_batch, format_table, horizon_share, query_prefixes,
                                          timed_predict)
from mara_agents.predictors.demand import make_predictor
from mara_env.live.jobs import Job, check_jobs, run_offline
from mara_env.live.tasks import tracked

USER_JOBS = "user jobs"


def job_queries(jobs: Sequence[Job], losses: Mapping[str, np.ndarray]) -> QuerySet | None:
    """Table 1's queries over the jobs' offline curves (``losses[name]``, 2·B steps each)."""
    rows, histories = [], []
    for job in jobs:
        series = tracked(losses[job.name], job.metric, job.ema_decay)
        crossing = crossing_batch(series, job.target)
        for rank, s in enumerate(query_prefixes(crossing, job.budget, series.size)):
            horizon = series.size - s
            rows.append((job.name, rank, job.budget, int(s), job.target, float(job.batch_size), job.lr,
                         horizon if crossing is None else crossing - s, horizon))
            histories.append(series[:s])
    if not rows:
        return None
    names, rank, budget, prefix, eps, batch_size, lr, truth, cap = (np.array(col) for col in zip(*rows))
    history = np.zeros((len(rows), int(prefix.max())))
    for row, values in enumerate(histories):
        history[row, :values.size] = values
    query = PredictorQuery(history, prefix, batch_size, lr, eps, cap.astype(np.float64))
    return QuerySet(USER_JOBS, tuple(names), rank, budget, truth.astype(np.float64), query)


def score(queries: QuerySet, predictors: Mapping[str, Predictor]) -> list[BenchRow]:
    """One Table 1 row per predictor on ``queries``."""
    rows = []
    for name, predictor in predictors.items():
        estimate, seconds = timed_predict(predictor, queries.query)
        rows.append(BenchRow(queries.task_set, name, len(queries.truth),
                             capped_mae(estimate, queries.truth, queries.query.cap),
                             budget_success_accuracy(estimate, queries.truth, queries.prefix, queries.budget),
                             horizon_share(estimate, queries.query.cap), 1e3 * seconds / len(queries.truth)))
    return rows


def offline_losses(jobs: Sequence[Job]) -> dict[str, np.ndarray]:
    """Each job's losses run here, alone, to twice its budget (:func:`~mara_env.live.jobs.run_offline`)."""
    return {job.name: run_offline(job, 2 * job.budget) for job in check_jobs(jobs)}


def crossing_table(jobs: Sequence[Job], losses: Mapping[str, np.ndarray], fraction: float = 0.5) -> str:
    """Where each job's tracked series crosses its target when it runs alone, and a target to pick instead.

    ``crosses at`` is the first step c whose series is ≤ ε (``never`` within the 2·B steps run).  ``target for
    k`` is the series' value at step k = ⌈fraction·B⌉: with it as ε the job crosses at step k, or earlier where
    the series was already that low (``then crosses at``).  A job runs alone here; shared nodes only delay it.
    """
    if not 0 < fraction <= 2:
        raise ValueError(f"fraction must be in (0, 2] (of the budget; the jobs run to 2·B), got {fraction!r}")
    header = ("job", "metric", "B", "target", "crosses at", "c / B", "k", "target for k", "then crosses at")
    rows = [header]
    for job in jobs:
        series = tracked(losses[job.name], job.metric, job.ema_decay)
        crossing = crossing_batch(series, job.target)
        k = min(math.ceil(fraction * job.budget), series.size)
        pick = float(series[k - 1]) if k >= 1 else math.nan
        rows.append((job.name, job.metric, str(job.budget), f"{job.target:.4g}",
                     "never" if crossing is None else str(crossing),
                     "-" if crossing is None else f"{crossing / job.budget:.2f}", str(k), f"{pick:.4g}",
                     "-" if k < 1 else str(crossing_batch(series, pick))))
    widths = [max(len(row[column]) for row in rows) for column in range(len(header))]
    return "\n".join("  ".join(cell.ljust(width) if column < 2 else cell.rjust(width)
                               for column, (cell, width) in enumerate(zip(row, widths))) for row in rows)


def forecast_table(jobs: Sequence[Job], bank: str = str(DEFAULT_BANK), fm_checkpoint: str = "",
                   with_bank: bool = True, losses: Mapping[str, np.ndarray] | None = None) -> str:
    """Table 1 for the jobs (run offline to 2·B steps here unless ``losses`` holds them), and for the bank's
    test curves beside them."""
    jobs = check_jobs(jobs)
    predictors = {"WLS": make_predictor("wls"), "FM": make_predictor("fm", fm_checkpoint)}
    losses = offline_losses(jobs) if losses is None else losses
    queries = job_queries(jobs, losses)
    rows = score(queries, predictors) if queries is not None else []
    truth = {USER_JOBS: horizon_share(queries.truth, queries.query.cap)} if queries is not None else {}
    if with_bank:
        result = benchmark(load_bank(bank), predictors)
        rows, truth = result.rows + rows, {**result.truth_at_horizon(), **truth}
    skipped = [job.name for job in jobs if queries is None or job.name not in queries.curve_ids]
    note = f"\njobs never queried (target met within 4 steps or never run): {', '.join(skipped)}" if skipped else ""
    return format_table(rows, truth) + note
