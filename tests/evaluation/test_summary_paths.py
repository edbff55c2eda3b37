"""``results/summary.json`` and training manifests carry no absolute path of the machine that wrote them."""

from __future__ import annotations

from pathlib import Path

from curves.bank import DEFAULT_BANK
from mara_agents.play.checkpoints import portable_path
from mara_env.fixed_workloads import WORKLOAD_DIR


def test_paths_inside_the_repository_are_recorded_relative_to_it():
    assert portable_path(DEFAULT_BANK) == "curves/bank"
    assert portable_path(WORKLOAD_DIR) == "mara_env/workloads"
    assert portable_path(Path("curves/bank").resolve()) == "curves/bank"


def test_paths_outside_the_repository_are_kept_as_given(tmp_path):
    assert portable_path(tmp_path / "bank") == str(tmp_path / "bank")
