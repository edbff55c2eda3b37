"""The paper's statistic: episode mean per run, equal weight across cells, sample std across runs."""

from __future__ import annotations

import math

import pytest

from mara_agents.evaluation.stats import paper_stat


def row(method, seed, task_set, root, episode, rate, load=0.04):
    return {"method": method, "seed": seed, "task_set": task_set, "load": load, "root": root, "episode": episode,
            "success_rate": rate}


def test_runs_average_their_episodes_before_the_std_across_runs():
    rows = [row("m", None, "id", 0, 0, 0.5), row("m", None, "id", 0, 1, 1.0),
            row("m", None, "id", 1, 0, 0.25), row("m", None, "id", 1, 1, 0.25)]
    stat = paper_stat(rows, "m", [("id", 0.04)])
    assert stat.runs == 2
    assert stat.mean == pytest.approx(100 * (0.75 + 0.25) / 2)
    assert stat.std == pytest.approx(100 * math.sqrt(((0.75 - 0.5) ** 2 + (0.25 - 0.5) ** 2) / 1))


def test_training_seeds_times_roots_are_the_runs():
    rows = [row("m", seed, "id", root, 0, 0.1 * seed + 0.01 * root) for seed in range(3) for root in range(5)]
    assert paper_stat(rows, "m", [("id", 0.04)]).runs == 15


def test_cells_get_equal_weight_whatever_their_episode_count():
    rows = [row("m", None, "id", 0, 0, 1.0), row("m", None, "id", 0, 1, 1.0), row("m", None, "id", 0, 2, 1.0),
            row("m", None, "rl_ood", 0, 0, 0.0)]
    assert paper_stat(rows, "m", [("id", 0.04), ("rl_ood", 0.04)]).mean == pytest.approx(50.0)


def test_a_run_missing_a_cell_is_left_out_of_the_average():
    rows = [row("m", None, "id", 0, 0, 1.0), row("m", None, "rl_ood", 0, 0, 0.0), row("m", None, "id", 1, 0, 0.3)]
    stat = paper_stat(rows, "m", [("id", 0.04), ("rl_ood", 0.04)])
    assert stat.runs == 1 and math.isnan(stat.std)


def test_a_method_without_rows_has_no_statistic():
    assert paper_stat([row("m", None, "id", 0, 0, 1.0)], "other", [("id", 0.04)]) is None
