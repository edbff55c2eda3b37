"""``python -m mara_agents.training.validation``: scoring checkpoints on check workloads of val curves."""

from __future__ import annotations

import pytest

from mara_agents.training.validation import VALIDATION_SEED, main
from mara_env.workload import load_workload

pytestmark = pytest.mark.long  # started first by make test (tests/conftest.py)


def check_rows(output: str) -> dict[str, list[str]]:
    """Target → its printed table cells (the first two lines are the workload paths and the header; a list of
    incomplete stress episodes may follow the table)."""
    table = output.split("\nstress episodes (root/episode)")[0]
    return {line.split()[0]: line.split()[1:] for line in table.splitlines()[2:]}


def test_the_check_scores_a_checkpoint_and_a_method_on_val_curves_only(trained, bank_dir, tmp_path, capsys):
    args = ["--bank", str(bank_dir), "--dir", str(tmp_path), "--roots", "1", "--episodes", "2"]
    assert main([str(trained.checkpoint), "fifo", *args]) == 0
    rows = check_rows(capsys.readouterr().out)
    # The stress construction leaves FIFO nothing: it serves the seven hopeless early tasks to their deadlines.
    assert rows["fifo"][1:] == ["0.00", "0", "of", "2"] and 0.0 < float(rows["fifo"][0]) <= 100.0
    mixture, stress, complete = rows[str(trained.checkpoint)][:3]
    assert 0.0 <= float(mixture) <= 100.0 and 0.0 <= float(stress) <= 65.0 and int(complete) <= 2
    files = sorted(tmp_path.glob("*.json"))
    assert [load_workload(path).task_set for path in files] == ["id", "stress"]
    assert all("/val/" in curve for path in files for episode in load_workload(path).episodes
               for curve in episode.curve)


def test_the_check_names_a_target_it_cannot_load(bank_dir, tmp_path, capsys):
    assert main(["no_such.pt", "--bank", str(bank_dir), "--dir", str(tmp_path)]) == 2
    assert "'no_such.pt' is neither a registered method" in capsys.readouterr().err


def test_the_check_refuses_a_checkpoint_of_another_kind(fm_checkpoint, bank_dir, tmp_path, capsys):
    assert main([str(fm_checkpoint), "--bank", str(bank_dir), "--dir", str(tmp_path)]) == 2
    assert "not a MAT checkpoint" in capsys.readouterr().err


def test_the_check_refuses_the_seed_that_training_selects_on(bank_dir, tmp_path):
    with pytest.raises(SystemExit):
        main(["fifo", "--bank", str(bank_dir), "--dir", str(tmp_path), "--seed-base", str(VALIDATION_SEED)])
    assert not list(tmp_path.glob("*.json"))


def test_a_stress_only_check_lists_the_episodes_that_left_a_feasible_task_unfinished(bank_dir, tmp_path, capsys):
    args = ["--bank", str(bank_dir), "--dir", str(tmp_path), "--roots", "2", "--episodes", "1", "--stress-only"]
    assert main(["fifo", *args]) == 0
    output = capsys.readouterr().out
    assert check_rows(output)["fifo"] == ["-", "0.00", "0", "of", "2"]
    # FIFO finishes none of the 13 feasible short tasks in either episode, and the listing names both.
    assert output.rstrip().endswith("fifo: 0/0 (0 of 13), 1/0 (0 of 13)")
    assert [load_workload(path).task_set for path in tmp_path.glob("*.json")] == ["stress"]


def test_checkpoints_joined_by_plus_are_scored_as_one_ensemble(trained, bank_dir, tmp_path, capsys):
    """Two copies of one policy decode exactly as the policy (the summed log-probabilities have the same
    argmax), so the ensemble's row equals the checkpoint's; a missing member is named."""
    args = ["--bank", str(bank_dir), "--dir", str(tmp_path), "--roots", "1", "--episodes", "2"]
    single = str(trained.checkpoint)
    assert main([single, f"{single}+{single}", *args]) == 0
    rows = check_rows(capsys.readouterr().out)
    assert rows[f"{single}+{single}"] == rows[single]
    assert main([f"{single}+missing.pt", *args]) == 2
    assert "'missing.pt' is neither a registered method" in capsys.readouterr().err
