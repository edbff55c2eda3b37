"""``evaluate.py abandon`` end to end on the synthetic bank: every allocator with and without abandoning in the
``abandon=True`` env, the bounds above all of them, the paired summary, and the refusals of an abandoning
allocator where the env has no abandon action."""

from __future__ import annotations

import csv
import json
from collections import defaultdict

import numpy as np
import pytest
from eval_fixtures import workloads_fixture  # noqa: F401  (provides the workloads_dir fixture)

from mara_agents.evaluation.cli import main as evaluate_main
from mara_agents.evaluation.stats import half_width

METHODS = ("fifo", "edf", "edf+abandon")


@pytest.fixture(scope="module")
def abandon_run(bank_dir, workloads_dir, tmp_path_factory):
    """``evaluate.py abandon`` with FIFO, EDF and EDF + abandon on 3 roots × 2 episodes at p = 0.04 and 0.07."""
    out = tmp_path_factory.mktemp("abandon") / "out"
    status = evaluate_main(["abandon", "--bank", str(bank_dir), "--workloads", str(workloads_dir), "--roots", "3",
                            "--episodes", "2", "--loads", "0.04", "0.07", "--methods", *METHODS, "--out", str(out),
                            "--jobs", "1", "--no-progress"])
    assert status == 0
    with open(out / "abandon.csv") as handle:
        rows = list(csv.DictReader(handle))
    return rows, json.loads((out / "abandon.json").read_text()), (out / "abandon.md").read_text()


def test_every_method_and_bound_plays_every_episode_and_the_bounds_stay_above_abandoning(abandon_run):
    rows, _, _ = abandon_run
    by_episode = defaultdict(dict)
    for row in rows:
        by_episode[row["load"], row["root"], row["episode"]][row["method"]] = row
    assert len(by_episode) == 2 * 3 * 2
    for methods in by_episode.values():
        assert set(methods) == {*METHODS, "oracle", "clairvoyant"}
        won = {name: float(row["successes"]) for name, row in methods.items()}
        assert won["oracle"] >= won["clairvoyant"] >= max(won[m] for m in METHODS)
        for name in ("fifo", "edf"):  # never abandons, and its episode is the default one
            assert float(methods[name]["abandoned"]) == 0.0
        assert float(methods["edf+abandon"]["abandoned_feasible"]) <= float(methods["edf+abandon"]["abandoned"])
    assert sum(float(row["abandoned"]) for row in rows if row["method"] == "edf+abandon") > 0


def test_the_summary_pairs_the_best_with_abandoning_against_the_best_without_by_root(abandon_run):
    rows, document, text = abandon_run
    for load in ("0.04", "0.07"):
        per_root = defaultdict(lambda: defaultdict(list))
        for row in rows:
            if row["load"] == load:
                per_root[row["method"]][int(row["root"])].append(float(row["success_rate"]))
        means = {m: {root: 100.0 * np.mean(v) for root, v in roots.items()} for m, roots in per_root.items()}
        labels = {"fifo": "FIFO", "edf": "EDF"}
        without = max(labels, key=lambda m: (np.mean(list(means[m].values())), labels[m]))
        differences = [means["edf+abandon"][root] - means[without][root] for root in sorted(means[without])]
        numbers = document["paired"][f"{float(load):g}"]["success"]
        assert (numbers["first"], numbers["second"]) == ("edf+abandon", without)
        assert numbers["per_root"] == pytest.approx(differences)
        assert numbers["mean"] == pytest.approx(np.mean(differences))
        assert numbers["half_width"] == pytest.approx(half_width(differences))
        row = document["grids"]["abandon"]["cells"][f"p = {float(load):.2f}"]
        assert row["best with"] == "EDF + abandon" and row["best without"] == labels[without]
        assert row["with − without (points)"] == f"{np.mean(differences):+.2f} ± {half_width(differences):.2f}"
    assert "EDF + abandon − EDF" in text and "queue full (%)" in text and "Jain" in text


@pytest.mark.parametrize("argv, message", [
    (["table2", "--methods", "edf", "edf+abandon"], "--methods edf+abandon: it abandons tasks"),
    (["--methods", "slack-fm+abandon"], "--methods slack-fm+abandon: it abandons tasks"),
    (["abandon", "--policy", "mine=eval_toy_policy:ToyPolicy"],
     "the abandon experiment plays registered allocators only"),
])
def test_an_abandoning_allocator_is_refused_outside_the_abandon_experiment(tmp_path, capsys, argv, message):
    with pytest.raises(SystemExit) as stop:
        evaluate_main([*argv, "--out", str(tmp_path)])
    assert stop.value.code == 2
    assert message in capsys.readouterr().err


def test_a_learned_policy_is_paired_by_root_with_the_best_hand_written_one_with_abandoning():
    from mara_agents.evaluation.abandon_table import is_learned, learned_against_rules

    success = {"mat-il+abandon": (0.5, 0.6), "edf+abandon": (0.4, 0.7), "slack-fm+abandon": (0.45, 0.45),
               "edf": (0.9, 0.9)}
    rows = [{"method": method, "task_set": "id", "load": 0.07, "root": root, "seed": 0, "episode": episode,
             "success_rate": rates[root] + 0.01 * episode, "wasted_node_steps": 100.0 * root}
            for method, rates in success.items() for root in (0, 1) for episode in (0, 1)]
    assert is_learned("mat-il+abandon") and not is_learned("slack-fm+abandon") and not is_learned("edf")
    grid, numbers = learned_against_rules(rows, list(success), [0.07])
    paired = numbers["mat-il+abandon"]["0.07"]
    assert paired["second"] == "edf+abandon"  # best with abandoning (55 % against 45 %); EDF never abandons
    assert paired["per_root"] == pytest.approx([10.0, -10.0])
    assert grid.cells["p = 0.07"]["learned − hand-written (points)"].startswith("+0.00 ±")
