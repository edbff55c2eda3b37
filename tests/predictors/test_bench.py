"""The predictor benchmark's protocol and metrics (paper §5.2, Table 1 and Figure 3)."""

from __future__ import annotations

import dataclasses
import json
import shutil

import numpy as np
import torch

from curves.bank import BankWriter, FamilySpec, load_bank
from mara_agents.predictors.base import Prediction, PredictorQuery
from mara_agents.predictors.bench import (
    benchmark,
    budget_success_accuracy,
    build_queries,
    capped_mae,
    crossing_batch,
    draw_task,
    horizon_share,
    main,
    query_prefixes,
    task_set_of,
    uncalibrated_families,
)
from mara_agents.predictors.fm import FlowMatchingModel, FMHyperParameters, save_checkpoint
from mara_agents.predictors.wls import WLSPredictor


def spec(name: str, role: str) -> FamilySpec:
    return FamilySpec(name, role, "m", "d", "x", {"kind": "loguniform", "low": 0.5, "high": 2.0},
                      {"kind": "set", "values": [285, 295]})


def test_families_map_to_task_sets_by_role_and_name():
    assert task_set_of(spec("cnn_cifar10", "id")) == "ID"
    assert task_set_of(spec("dagger_pong", "ood")) == "RL OOD"
    assert task_set_of(spec("vit_cifar10", "ood")) == "ViT OOD"
    assert task_set_of(spec("other", "ood")) is None


def test_task_draws_are_fixed_per_curve_and_follow_the_rules():
    family = spec("vit_x", "ood")
    eps, budget = draw_task(family, "vit_x/test/000", seed=0)
    assert (eps, budget) == draw_task(family, "vit_x/test/000", seed=0)
    assert 0.5 <= eps <= 2.0 and budget in (285, 295)
    assert draw_task(family, "vit_x/test/001", seed=0) != (eps, budget)


def test_crossing_is_the_first_batch_at_or_below_threshold():
    assert crossing_batch(np.array([3.0, 2.0, 1.0, 0.5, 0.7]), 1.0) == 3
    assert crossing_batch(np.array([3.0, 2.0]), 1.0) is None


def test_query_prefixes_spread_over_the_active_window():
    assert query_prefixes(None, budget=20, length=60).tolist() == [4, 6, 8, 10, 12, 14, 16, 19]
    assert query_prefixes(10, budget=20, length=60).tolist() == [4, 4, 5, 6, 6, 7, 8, 9]
    assert query_prefixes(4, budget=20, length=60).size == 0  # done before the predictor is ever used


def test_metrics_on_hand_made_numbers():
    truth, horizon = np.array([10.0, 50.0]), np.array([50.0, 50.0])
    assert capped_mae(np.array([12.0, 500.0]), truth, horizon) == 1.0  # 500 is clipped to the horizon
    prefix, budget = np.array([5, 5]), np.array([20, 20])
    assert budget_success_accuracy(np.array([12.0, 10.0]), truth, prefix, budget) == 0.5
    assert horizon_share(np.array([12.0, 500.0]), horizon) == 0.5  # past the horizon counts as at it
    assert horizon_share(truth, horizon) == 0.5


class Oracle:
    """Knows the truth of the benchmark's queries."""

    def __init__(self, query_sets):
        self.truth = {q.query.eps.tobytes(): q.truth for q in query_sets}

    def predict(self, query: PredictorQuery) -> Prediction:
        return Prediction(remaining=self.truth[query.eps.tobytes()])


def test_an_oracle_scores_perfectly_and_wls_does_not(tiny_bank):
    bank = load_bank(tiny_bank)
    sets = {t: build_queries(bank, t) for t in ("ID", "RL OOD", "ViT OOD")}
    result = benchmark(bank, {"oracle": Oracle(sets.values()), "WLS": WLSPredictor()})
    rows, estimates = result.rows, result.estimates
    assert [(r.task_set, r.model) for r in rows][:2] == [("ID", "oracle"), ("ID", "WLS")]
    assert all(r.mae == 0.0 and r.accuracy == 1.0 for r in rows if r.model == "oracle")
    truth_share = result.truth_at_horizon()
    assert all(r.at_horizon == truth_share[r.task_set] for r in rows if r.model == "oracle")
    assert any(r.mae > 0.0 for r in rows if r.model == "WLS")
    assert estimates["ID", "WLS"].shape == sets["ID"].truth.shape


def test_command_line_writes_table_and_figures(tiny_bank, tmp_path):
    torch.manual_seed(0)
    save_checkpoint(tmp_path / "fm.pt", FlowMatchingModel(FMHyperParameters(hidden=8, width=16, time_dim=8)))
    rows = main(["--bank", str(tiny_bank), "--checkpoint", str(tmp_path / "fm.pt"), "--out", str(tmp_path / "r")])
    assert {r.model for r in rows} == {"WLS", "FM"} and len(rows) == 6
    assert len(json.loads((tmp_path / "r" / "table.json").read_text())) == 6
    for name in ("table.md", "table.csv", "fig3a_forecast.png", "fig3b_mae_by_rank.png"):
        assert (tmp_path / "r" / name).stat().st_size > 0


def test_uncalibrated_families_are_left_out(tiny_bank, tmp_path):
    shutil.copytree(tiny_bank, tmp_path / "bank")
    spec = load_bank(tmp_path / "bank").families["vit_toy"]
    BankWriter(tmp_path / "bank").declare_family(dataclasses.replace(spec, eps=None))
    bank = load_bank(tmp_path / "bank")
    assert uncalibrated_families(bank) == ["vit_toy"]
    assert build_queries(bank, "ViT OOD") is None and build_queries(bank, "ID") is not None
