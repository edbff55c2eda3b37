"""Fixtures shared by the evaluation tests (imported by the test modules rather than kept in a conftest.py,
so that no second module named ``conftest`` shadows another test directory's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from curves.bank import load_bank
from mara_env.fixed_workloads import generate_all


@pytest.fixture(scope="session", name="workloads_dir")
def workloads_fixture(bank_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every fixed evaluation workload (3 task sets × 4 loads + stress) drawn from the synthetic bank."""
    directory = tmp_path_factory.mktemp("workloads")
    generate_all(load_bank(bank_dir), directory)
    return directory
