"""The paper's statistic (episode mean per run, equal weight across cells, sample std across runs) and the
paired-by-root difference."""

from __future__ import annotations

import math

import pytest

from mara_agents.evaluation.experiments import Selection, build_grids
from mara_agents.evaluation.stats import paired_difference, paper_stat


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


def test_paired_difference_averages_seeds_within_a_root_and_pairs_only_common_roots():
    rows = [row("a", 0, "id", 0, 0, 0.6), row("a", 1, "id", 0, 0, 0.8), row("a", 0, "id", 1, 0, 0.5),
            row("a", 1, "id", 1, 0, 0.5), row("b", None, "id", 0, 0, 0.6), row("b", None, "id", 1, 0, 0.2),
            row("b", None, "id", 2, 0, 0.9)]  # root 2: only b played it, so it is left out
    stat = paired_difference(rows, "a", "b", [("id", 0.04)])
    assert stat.runs == 2
    assert stat.mean == pytest.approx(20.0)  # root 0: 0.7 − 0.6, root 1: 0.5 − 0.2
    assert stat.std == pytest.approx(math.sqrt(2) * 10.0)
    assert paired_difference(rows, "a", "missing", [("id", 0.04)]) is None


def test_table2_with_mara_comes_with_the_paired_lead_table():
    selection = Selection(methods=("mara", "fifo"), policies=(), task_sets=("id", "rl_ood"), loads=(0.04,))
    rows = [row("mara", seed, ts, root, 0, 0.5 + 0.1 * root + 0.01 * seed) for seed in range(3)
            for ts in ("id", "rl_ood") for root in range(2)]
    rows += [row("fifo", None, ts, root, 0, 0.5) for ts in ("id", "rl_ood") for root in range(2)]
    paired = build_grids(["table2"], selection, rows, skipped=set())["paired"]
    assert paired.cols == ["MARA − FIFO"] and paired.rows == ["ID", "RL OOD", "Average"]
    assert paired.get("ID", "MARA − FIFO").mean == pytest.approx(100 * (0.01 + 0.11) / 2)
    skipped = build_grids(["table2"], selection, rows, skipped={"fifo"})["paired"]
    assert skipped.get("Average", "MARA − FIFO") == "skipped"
    assert "paired_ours" not in build_grids(["table2"], selection, rows, skipped=set())


def test_table2_with_our_learned_allocator_pairs_it_against_every_other_method():
    selection = Selection(methods=("mara", "mat-il-ens", "slack-fm"), policies=(), task_sets=("id",), loads=(0.04,))
    rows = [row(method, seed, "id", root, 0, 0.4 + 0.1 * root + (0.05 if method == "mat-il-ens" else 0.0))
            for method in ("mara", "mat-il-ens") for seed in range(3) for root in range(2)]
    rows += [row("slack-fm", None, "id", root, 0, 0.47) for root in range(2)]
    ours = build_grids(["table2"], selection, rows, skipped=set())["paired_ours"]
    assert ours.cols == ["MAT-IL ensemble (ours) − MARA", "MAT-IL ensemble (ours) − FM-slack"]
    assert ours.rows == ["ID"]
    assert ours.get("ID", "MAT-IL ensemble (ours) − MARA").mean == pytest.approx(5.0)
    assert ours.get("ID", "MAT-IL ensemble (ours) − FM-slack").mean == pytest.approx(100 * (0.45 + 0.55 - 0.94) / 2)
