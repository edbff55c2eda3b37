"""Validation success against env steps from a run's snapshots (``studies.learning_curve``)."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from mara_agents.evaluation.stats import half_width
from studies.learning_curve import run, summarise
from mara_agents.training.train import train

from conftest import tiny_config

pytestmark = pytest.mark.long  # started first by make test (tests/conftest.py)


@pytest.fixture(scope="module")
def runs(bank_dir, tmp_path_factory):
    """Two seeds of a tiny run with a snapshot at every validation (steps 20 and 40)."""
    root = tmp_path_factory.mktemp("curve_runs")
    for seed in (0, 1):
        train(tiny_config(bank_dir, root / f"seed{seed}", seed=seed, steps=40, snapshot_every=20))
    return [root / "seed0", root / "seed1"]


@pytest.fixture(scope="module")
def scored(runs, tmp_path_factory):
    """The learning curve of both runs, scored once into a folder, with what the command printed."""
    out = tmp_path_factory.mktemp("curve")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert run([*map(str, runs), "--out", str(out), "--at", "40"]) == 0
    return out, printed.getvalue()


def test_each_snapshot_scores_what_the_checkpoint_rule_scored_at_its_step(runs, scored):
    out, printed = scored
    rows = (out / "learning_curve.csv").read_text().splitlines()
    assert rows[0] == "method,seed,run,step,score" and len(rows) == 1 + 4
    scored_at = {(line.split(",")[2], int(line.split(",")[3])): float(line.split(",")[4]) for line in rows[1:]}
    for run_dir in runs:
        validated = json.loads((run_dir / "snapshots" / "step_40.json").read_text())["validation_scores"]
        for entry in validated:
            assert scored_at[str(run_dir), entry["step"]] == pytest.approx(entry["success_rate"], abs=1e-6)
    assert "| 40 |" in printed and "(step 40, 2 seeds)" in printed
    assert "[1/" in printed
    assert (out / "learning_curve.png").stat().st_size > 0


def test_a_rerun_scores_nothing_again(runs, scored, capsys):
    out, _ = scored
    before = (out / "learning_curve.csv").read_text()
    assert run([*map(str, runs), "--out", str(out)]) == 0
    assert (out / "learning_curve.csv").read_text() == before
    assert "[1/" not in capsys.readouterr().out


def test_the_summary_averages_seeds_with_a_t_interval():
    rows = [{"method": "m", "seed": str(s), "run": f"r{s}", "step": "10", "score": str(v)}
            for s, v in enumerate((0.5, 0.7))]
    assert summarise(rows) == {"m": [(10, pytest.approx(60.0), pytest.approx(half_width([50.0, 70.0])), 2)]}
    assert half_width([50.0, 70.0]) == pytest.approx(12.706 * 10, rel=1e-3)  # t(0.975, 1) · (sd 14.14 / √2)


def test_a_run_without_snapshots_is_one_line_and_status_2(bank_dir, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit) as stop:
        run([str(tmp_path / "empty"), "--out", str(tmp_path / "out")])
    assert stop.value.code == 2 and "no snapshots (train with --snapshot-every N)" in capsys.readouterr().err


def test_thinning_keeps_the_multiples_the_last_snapshot_and_the_two_around_each_mark():
    from pathlib import Path

    from studies.learning_curve import thinned
    found = [(step, Path(f"step_{step}.pt")) for step in range(1400, 100_801, 1400)]
    kept = [step for step, _ in thinned(found, 8400, [10_500])]
    assert kept == sorted({*range(8400, 100_801, 8400), 9800, 11200})  # 100,800 is a multiple and the last
    assert len(thinned(found, 0, [10_500])) == len(found)
