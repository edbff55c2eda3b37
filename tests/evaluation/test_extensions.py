"""The settings beyond the paper: the rule that chooses them, the selection command's refusals, the settings
file, and ``evaluate.py extensions`` end to end on the synthetic bank."""

from __future__ import annotations

import csv
import dataclasses
import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from eval_fixtures import workloads_fixture  # noqa: F401  (provides the workloads_dir fixture)

from studies import extension_selection as extensions
from mara_agents.evaluation.cli import main as evaluate_main
from mara_agents.evaluation.extension_settings import Learned, NamedSetting, load_settings, save_settings
from mara_agents.evaluation.extension_table import learned_methods
from mara_agents.mat.setting import Setting
from studies.extension_selection import Candidate, choose
from mara_agents.evaluation.methods import parse_user_policy


# ---------------------------------------------------------------------------------------------- the rule
def test_the_rule_takes_the_largest_headroom_among_candidates_in_band():
    picked = choose([Candidate("saturated", best=85.0, bound=99.0, num_nodes=6),
                     Candidate("small", best=50.0, bound=53.0, num_nodes=5),
                     Candidate("large", best=40.0, bound=48.0, num_nodes=4),
                     Candidate("hopeless", best=10.0, bound=40.0, num_nodes=3)])
    assert picked.name == "large"  # 8 points; the saturated and hopeless ones are out of band whatever they leave


def test_a_candidate_within_one_point_that_is_closer_to_the_default_wins():
    speeds = [Candidate("m5", best=50.0, bound=58.0, num_nodes=5), Candidate("m4", best=40.0, bound=48.0, num_nodes=4),
              Candidate("m3", best=30.0, bound=38.9, num_nodes=3)]
    assert choose(speeds).name == "m5"  # 8.0 is within 1 of the largest, 8.9, and M = 5 is closest to 7
    costs = [Candidate("c1", best=60.0, bound=62.0, switch_cost=1), Candidate("c2", best=55.0, bound=60.0, switch_cost=2),
             Candidate("c4", best=50.0, bound=56.0, switch_cost=4)]
    assert choose(costs).name == "c2"  # 5 is within 1 of 6; c = 1's 2 is not
    assert choose(costs[1:2] + [Candidate("c4", best=50.0, bound=56.01, switch_cost=4)]).name == "c4"  # 1.01 apart


def test_the_band_includes_its_ends_and_an_empty_band_chooses_nothing():
    assert choose([Candidate("low", best=20.0, bound=30.0), Candidate("high", best=80.0, bound=81.0)]).name == "low"
    assert choose([Candidate("a", best=19.99, bound=90.0), Candidate("b", best=80.01, bound=95.0)]) is None
    assert choose([]) is None


def made_up_results(successes: dict[str, float], bounds: dict[str, float]) -> dict:
    """A selection.json in which FM-slack is best wherever a success is given (others 5 points less)."""
    measured = {}
    for name, best in successes.items():
        entry = {policy: {"success": best - (policy != "slack-fm") * 5.0} for policy in extensions.HAND_WRITTEN}
        measured[name] = {"0.04": {**entry, "clairvoyant": bounds[name]}}
    return {extensions.SCORES: measured}


def test_both_combines_the_two_choices_and_needs_both():
    successes = {"default": 90.0, "speeds-m6": 85.0, "speeds-m5": 70.0, "speeds-m4": 60.0, "speeds-m3": 90.0,
                 "switch-c1": 88.0, "switch-c2": 79.0, "switch-c4": 75.0}
    bounds = {"default": 95.0, "speeds-m6": 99.0, "speeds-m5": 75.0, "speeds-m4": 72.0, "speeds-m3": 99.0,
              "switch-c1": 95.0, "switch-c2": 84.0, "switch-c4": 80.0}
    picks = extensions.chosen_settings(made_up_results(successes, bounds))
    assert picks["speeds"].name == "speeds-m4" and picks["switch cost"].name == "switch-c2"
    assert (picks["both"].num_nodes, picks["both"].node_speeds, picks["both"].switch_cost) == (4, (1, 1, 1, 4), 2)
    successes.update({"switch-c2": 95.0, "switch-c4": 95.0})
    picks = extensions.chosen_settings(made_up_results(successes, bounds))
    assert picks["switch cost"] is None and picks["both"] is None
    table = extensions.table(made_up_results(successes, bounds), [0.04], picks)
    assert "| speeds | speeds-m4: M = 4, speeds (1, 1, 1, 4), c = 0 | 55.00 | 55.00 | 55.00 | 60.00 | 60.00 | 72.00 | " \
           "+12.00 | yes | **yes** |" in table


# ---------------------------------------------------------------------------------------------- the command
def select(tmp_path: Path, *extra: str, bank: Path | None = None) -> list[str]:
    fm = tmp_path / "fm.pt"
    fm.write_bytes(b"not read before the inputs are checked")
    return ["select", "--bank", str(bank or tmp_path), "--fm-checkpoint", str(fm), "--out", str(tmp_path / "out"),
            *extra]


@pytest.mark.parametrize("change, named", [(("--roots", "0"), "--roots"), (("--loads", "0.07"), "--loads 0.07"),
                                           (("--loads", "1.5"), "--loads")])
def test_the_select_command_refuses_bad_flags_with_exit_status_2(tmp_path, capsys, change, named):
    with pytest.raises(SystemExit) as stop:
        extensions.run(select(tmp_path, *change))
    assert stop.value.code == 2
    assert named in capsys.readouterr().err.strip().splitlines()[-1]


def test_the_select_command_refuses_a_missing_bank(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        extensions.run(select(tmp_path, bank=tmp_path / "no-bank"))
    assert stop.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--bank" in last and "no-bank" in last


def test_a_selection_measured_with_other_inputs_is_not_mixed_in(tmp_path, bank_dir, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "selection.json").write_text(json.dumps({"bank": str(bank_dir), "roots": 10, extensions.SCORES: {}}))
    assert extensions.run(select(tmp_path, bank=bank_dir)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "scores from other inputs" in err[0] and "roots" in err[0]


# ---------------------------------------------------------------------------------------------- settings file
def test_a_settings_file_round_trips_and_names_a_learned_allocator_as_a_policy(tmp_path):
    learned = Learned("MAT-IL", "mat-il-ens", ("runs/a.pt", "runs/b.pt"))
    path = tmp_path / "settings.json"
    save_settings(path, [NamedSetting("fast", Setting(4, (1, 1, 1, 4), 2), (learned,))], {"chosen_by": "a test"})
    [setting] = load_settings(path)
    assert (setting.name, setting.num_nodes, setting.node_speeds, setting.switch_cost) == ("fast", 4, (1, 1, 1, 4), 2)
    assert setting.learned == (learned,)
    policy = parse_user_policy(learned.import_path())
    assert policy.label == "MAT-IL" and dict(policy.kwargs) == {"method": "mat-il-ens", "checkpoints": "runs/a.pt+runs/b.pt"}


@pytest.mark.parametrize("document, named", [
    ({"settings": []}, "non-empty"),
    ({"settings": [{"name": "x", "num_nodes": 3, "node_speeds": [1, 2]}]}, "node_speeds"),
    ({"settings": [{"name": "x", "switch_cost": -1}]}, "switch_cost"),
    ({"settings": [{"name": "x", "switch_cost": 5000}]}, r"settings\.json: x: switch_cost must be ≤ 1000, got 5000"),
    ({"settings": [{"name": "x", "num_nodes": 2, "node_speeds": [1, 100]}]},
     r"settings\.json: x: node_speeds\[1\] must be ≤ 64, got 100"),
    ({"settings": [{"name": "x", "learned": [{"method": "fifo", "checkpoint": "a.pt"}]}]}, "method"),
    ({"settings": [{"name": "x", "learned": [{"method": "mara"}]}]}, "checkpoint"),
    ({"settings": [{"name": "x"}, {"name": "x"}]}, "unique"),
    ({"settings": [{"name": "x", "learned": [{"method": "mara", "checkpoint": "a.pt"},
                                             {"method": "mara", "checkpoint": "b.pt"}]}]}, "labels must be unique"),
    ({"settings": [{"name": "x", "learned": [{"method": "mara", "checkpoint": "c:/a.pt"}]}]}, "must not contain"),
])
def test_a_bad_settings_file_is_refused_naming_the_field(tmp_path, document, named):
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(document))
    with pytest.raises(ValueError, match=named):
        load_settings(path)


@pytest.mark.parametrize("document, named", [
    ("{not json", "settings.json"),
    (json.dumps({"settings": [{"name": "x", "node_speeds": [1, 1, 1, 1, 1, 1, 100]}]}),
     "node_speeds[6] must be ≤ 64, got 100"),
    (json.dumps({"settings": [{"name": "x", "switch_cost": 5000}]}), "switch_cost must be ≤ 1000, got 5000"),
    (json.dumps({"settings": [{"name": "x", "learned": [{"label": "ghost", "method": "mara",
                                                        "checkpoint": "no/such.pt"}]}]}),
     "settings.json: setting 'x': ghost checkpoint not found: no/such.pt"),
])
def test_evaluate_refuses_a_bad_settings_file_before_any_work_with_exit_status_2(tmp_path, capsys, document, named):
    path = tmp_path / "settings.json"
    path.write_text(document)
    with pytest.raises(SystemExit) as stop:
        evaluate_main(["extensions", "--settings", str(path), "--out", str(tmp_path / "out")])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("evaluate.py: error: --settings: ") and named in err, err
    assert not (tmp_path / "out").exists()


def test_the_library_refuses_a_learned_checkpoint_that_is_missing():
    with pytest.raises(ValueError, match="setting 'fast': ghost checkpoint not found: no/such.pt"):
        learned_methods(NamedSetting("fast", Setting(4, (1, 1, 1, 4), 1), (Learned("ghost", "mara", ("no/such.pt",)),)))


# ---------------------------------------------------------------------------------------------- end to end
@pytest.fixture(scope="module")
def extension_run(bank_dir, workloads_dir, tmp_path_factory):
    """``evaluate.py extensions`` with FIFO and EDF on 2 roots × 2 episodes of one setting with a fast node and a
    switching cost."""
    tmp = tmp_path_factory.mktemp("extensions")
    settings = tmp / "settings.json"
    save_settings(settings, [NamedSetting("fast", Setting(4, (1, 1, 1, 4), 1))])
    readme = tmp / "results.md"
    readme.write_text("# Results\n\n## Results\n\nthe paper's tables\n")
    status = evaluate_main(["extensions", "--bank", str(bank_dir), "--workloads", str(workloads_dir), "--roots", "2",
                            "--episodes", "2", "--methods", "fifo", "edf", "--settings", str(settings), "--out",
                            str(tmp / "out"), "--jobs", "1", "--no-progress", "--readme", str(readme)])
    assert status == 0
    with open(tmp / "out" / "extensions.csv") as handle:
        rows = list(csv.DictReader(handle))
    return rows, json.loads((tmp / "out" / "extensions.json").read_text()), readme.read_text()


def test_the_bounds_hold_every_allocator_on_every_episode(extension_run):
    rows, _, _ = extension_run
    by_episode = defaultdict(dict)
    for row in rows:
        by_episode[row["load"], row["root"], row["episode"]][row["method"]] = float(row["successes"])
    assert len(by_episode) == 2 * 2 * 2 and {row["method"] for row in rows} == {"fifo", "edf", "oracle", "clairvoyant"}
    for methods in by_episode.values():
        assert methods["oracle"] >= methods["clairvoyant"] >= max(methods["fifo"], methods["edf"])
    for row in rows:
        assert row["setting"] == "fast" and 0.0 <= float(row["jain_index"]) <= 1.0


def test_the_paired_gap_to_the_bound_is_the_mean_of_the_per_root_differences(extension_run):
    rows, summary, _ = extension_run
    grid = summary["grids"]["extensions"]
    for load in ("0.04", "0.07"):
        per_root = defaultdict(lambda: defaultdict(list))
        for row in rows:
            if row["load"] == load:
                per_root[row["method"]][row["root"]].append(100.0 * float(row["success_rate"]))
        means = {method: {root: np.mean(v) for root, v in roots.items()} for method, roots in per_root.items()}
        labels = {"fifo": "FIFO", "edf": "EDF"}
        best = max(labels, key=lambda m: (np.mean(list(means[m].values())), labels[m]))  # ties: the later label
        gaps = [means["clairvoyant"][root] - means[best][root] for root in means[best]]
        cell = grid["cells"][f"fast, p = {float(load):.2f}"]
        assert cell["best hand-written"] == labels[best]
        assert cell["Clairvoyant − hand-written"]["mean"] == pytest.approx(np.mean(gaps))
        assert cell["Clairvoyant − hand-written"]["mean"] >= 0.0
        assert cell["best learned"] == "none" and cell.get("learned − hand-written") is None


def test_the_section_is_spliced_apart_from_the_papers_results(extension_run):
    _, _, readme = extension_run
    assert "the paper's tables" in readme and "## Beyond the paper: node speeds and switching costs" in readme
    assert readme.index("## Results") < readme.index("## Beyond the paper")


def test_the_harness_plays_and_bounds_a_setting_with_its_env_options(bank_dir, workloads_dir):
    from mara_agents.allocators.registry import make_policy
    from mara_agents.evaluation.clairvoyant import clairvoyant_successes
    from mara_agents.evaluation.harness import Settings, evaluate
    from mara_agents.play.lockstep import evaluate_workload
    from mara_env.engine import cached_bank, cached_workload
    from mara_env.fixed_workloads import workload_path

    options = (("node_speeds", (1, 1, 4)), ("num_nodes", 3), ("switch_cost", 2))
    settings = Settings(bank_dir, workloads_dir, roots=1, episodes=2, jobs=1, progress=False, env=options)
    rows = evaluate([("fifo", "id", 0.07)], settings).rows
    path = workload_path("id", 0.07, workloads_dir)
    alone = evaluate_workload(make_policy("fifo"), path, bank=bank_dir, episodes=[0, 1], **dict(options))
    assert [r["successes"] for r in rows if r["method"] == "fifo"] == [r["successes"] for r in alone]
    episodes = cached_workload(str(path), str(bank_dir)).episodes[:2]
    expected = [float(clairvoyant_successes(ep, cached_bank(str(bank_dir)), 3, (1, 1, 4), 2).sum()) for ep in episodes]
    assert [r["successes"] for r in rows if r["method"] == "clairvoyant"] == expected
    default = evaluate([("fifo", "id", 0.07)], dataclasses.replace(settings, env=())).rows
    assert default != rows  # the options changed the episodes (3 nodes, one fast, setups)


def test_the_shipped_settings_file_loads_and_both_combines_the_other_two():
    from mara_agents.evaluation.extension_settings import SHIPPED

    settings = {setting.name: setting for setting in load_settings(SHIPPED)}
    assert set(settings) == {"speeds", "switch-cost", "both"}
    assert settings["both"].node_speeds == settings["speeds"].node_speeds
    assert settings["both"].switch_cost == settings["switch-cost"].switch_cost > 0
    assert sum(settings["speeds"].node_speeds) == 7  # the default's capacity, on fewer nodes (docs/research/extensions.md)
