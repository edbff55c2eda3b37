"""Predictor scores on chosen curves, with curve-bootstrap intervals (``studies.curve_scores``)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from curves.bank import load_bank
from mara_agents.predictors.bench import build_queries
from studies.curve_scores import CurveBootstrap, run, score
from mara_agents.predictors.fm import FlowMatchingModel, FMHyperParameters, save_checkpoint
from mara_agents.predictors.wls import WLSPredictor
from test_bench import Oracle


def test_an_oracle_is_exact_and_the_paired_difference_is_the_other_predictors_error(tiny_bank):
    bank = load_bank(tiny_bank)
    oracle = Oracle([build_queries(bank, "ID", 0, ("val",))])
    rows, paired = score(bank, {"oracle": oracle, "WLS": WLSPredictor()}, "ID", ("val",))
    exact, wls = rows
    assert (exact.mae.value, exact.mae.low, exact.mae.high) == (0.0, 0.0, 0.0)
    assert exact.accuracy.value == 100.0 and exact.curves == wls.curves <= 8
    assert wls.mae.low <= wls.mae.value <= wls.mae.high and wls.mae.value > 0
    assert paired["WLS"]["mae"].value == pytest.approx(wls.mae.value)
    assert paired["WLS"]["accuracy"].value == pytest.approx(wls.accuracy.value - 100.0)


def test_the_bootstrap_resamples_whole_curves(tiny_bank):
    """Every resampled mean is a query-weighted mean of whole curves' errors: with one error per curve's
    queries, each draw lies between the smallest and largest per-curve error."""
    queries = build_queries(load_bank(tiny_bank), "ID", 0, ("val",))
    boot = CurveBootstrap(queries, resamples=500, seed=3)
    per_curve_error = np.arange(boot.curves, dtype=np.float64) * 10
    value, drawn = boot.resampled(per_curve_error[boot.curve_of_query])
    assert drawn.min() >= 0 and drawn.max() <= per_curve_error.max()
    assert value == pytest.approx(np.average(per_curve_error, weights=boot.per_curve_queries))
    again = CurveBootstrap(queries, resamples=500, seed=3).resampled(per_curve_error[boot.curve_of_query])[1]
    np.testing.assert_array_equal(drawn, again)  # the same seed draws the same curves


def test_an_index_range_keeps_only_those_curves(tiny_bank):
    rows, _ = score(load_bank(tiny_bank), {"WLS": WLSPredictor()}, "ID", ("val",), indices=range(0, 1))
    assert rows[0].curves <= 2  # one val curve in each of the two ID families
    with pytest.raises(ValueError, match="no ID queries"):
        score(load_bank(tiny_bank), {"WLS": WLSPredictor()}, "ID", ("val",), indices=range(50, 60))


def test_the_command_line_prints_and_writes_json(tiny_bank, tmp_path, capsys):
    torch.manual_seed(0)
    save_checkpoint(tmp_path / "fm.pt", FlowMatchingModel(FMHyperParameters(hidden=8, width=16, time_dim=8)))
    argv = ["--bank", str(tiny_bank), "--fm", f"tiny={tmp_path / 'fm.pt'}", "--wls", "--json", str(tmp_path / "s.json")]
    assert run(argv) == 0
    out = capsys.readouterr().out
    assert "| tiny |" in out and "| WLS |" in out
    payload = json.loads((tmp_path / "s.json").read_text())
    assert [row["model"] for row in payload["rows"]] == ["tiny", "WLS"] and list(payload["paired"]) == ["WLS"]


@pytest.mark.parametrize("argv, message", [(["--fm", "nameless"], "must be NAME=CHECKPOINT"),
                                           (["--fm", "a=missing.pt"], "no such file"),
                                           (["--indices", "5:2", "--fm", "a=x"], "must be START:STOP")])
def test_bad_flags_are_one_line_and_status_2(argv, message, capsys):
    with pytest.raises(SystemExit) as stop:
        run(argv)
    assert stop.value.code == 2 and message in capsys.readouterr().err
