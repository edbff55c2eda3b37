"""Table 1 and Figure 3 (paper §5.2) from the predictor benchmark, cached like the allocation episodes.

The numbers come from :func:`mara_agents.predictors.bench.benchmark` on the bank's test curves.  Latency is
wall-clock and varies between runs, so the whole table is cached by the bank, the FM checkpoint and the
benchmark code: a rerun prints the same numbers, and a new checkpoint or bank measures afresh.
"""

from __future__ import annotations

import math
from dataclasses import asdict
from pathlib import Path
from typing import Any

from mara_agents.evaluation.cache import ResultCache
from mara_agents.evaluation.fingerprint import bank_fingerprint, digest, source_fingerprint
from mara_agents.evaluation.grid import Grid
from mara_agents.evaluation.stats import Stat
from mara_env.workload import file_checksum

COLUMNS = (("prefixes", "Prefixes", 1.0, 0), ("mae", "MAE", 1.0, 2), ("accuracy", "Acc. (%)", 100.0, 2),
           ("at_horizon", "At horizon (%)", 100.0, 1), ("ms_per_prefix", "ms/prefix", 1.0, 3))
FIGURES = ("fig3a_forecast.png", "fig3b_mae_by_rank.png")


def predictor_table(bank: Path, out: Path, cache: ResultCache) -> Grid:
    """Table 1 as a grid; its note says when FM is skipped (checkpoint missing or unreadable).

    Figure 3's PNGs are written to ``out`` whenever FM is available and the table is computed anew (a new bank or
    FM checkpoint, so the figures from before would show the old one) or they are not there yet.
    """
    import torch

    from curves.bank import load_bank
    from mara_agents.predictors import bench
    from mara_agents.predictors.fm.predictor import DEFAULT_CHECKPOINT, load_predictor
    from mara_agents.predictors.wls import WLSPredictor

    notes: list[str] = []
    predictors: dict[str, Any] = {"WLS": WLSPredictor()}
    checkpoint = None
    try:
        predictors["FM"] = load_predictor(DEFAULT_CHECKPOINT)
        checkpoint = file_checksum(DEFAULT_CHECKPOINT)
    except Exception as exc:  # noqa: BLE001 — a missing or broken checkpoint skips FM, reported in the notes
        notes.append(f"FM skipped — {type(exc).__name__}: {exc}")
    key = digest("table1", bank_fingerprint(str(bank)), checkpoint, source_fingerprint(bench.BenchRow),
                 source_fingerprint(WLSPredictor))
    rows = cache.get_many([key]).get(key)
    need_figures = "FM" in predictors and (rows is None or not all((out / name).is_file() for name in FIGURES))
    if rows is None or need_figures:
        torch.set_num_threads(1)  # the benchmark's own default: latency per prefix on one CPU thread
        curves = load_bank(bank)
        measured = bench.benchmark(curves, predictors)
        if rows is None:
            rows = [asdict(r) for r in measured.rows]
            cache.put_many({key: rows})
        if need_figures and "ID" in measured.queries:
            out.mkdir(parents=True, exist_ok=True)
            bench.plot_figure3(curves, measured.queries["ID"], predictors["FM"],
                               {name: measured.estimates["ID", name] for name in ("FM", "WLS")}, out)
    grid = Grid("table1", "Table 1. Remaining-resource prediction: capped MAE (batches), budget-success accuracy, "
                "latency (one CPU thread)", "Task set / model", [], [label for _, label, _, _ in COLUMNS],
                decimals={label: d for _, label, _, d in COLUMNS}, note=" ".join(notes))
    for row in rows:
        name = f"{row['task_set']} {row['model']}"
        grid.rows.append(name)
        for field, label, scale, _ in COLUMNS:
            grid.set(name, label, Stat(scale * float(row[field]), math.nan, 1))
    return grid
