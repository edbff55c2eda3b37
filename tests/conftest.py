"""Shared fixtures: a synthetic bank built once per test session (tests never need the shipped bank)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from synthetic_bank import build_synthetic_bank  # noqa: E402


@pytest.fixture(scope="session")
def bank_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small synthetic bank directory in the real format."""
    return build_synthetic_bank(tmp_path_factory.mktemp("bank"))


@pytest.fixture(scope="session", autouse=True)
def answer_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Stored predictor answers go to a folder of the session's (and its subprocesses'), never to the user's
    cache (mara_agents/predictors/answer_files.py)."""
    folder = tmp_path_factory.mktemp("fm-answers")
    os.environ["MARA_FM_STORE"] = str(folder)
    return folder


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The modules marked ``long`` first, the others after them, each in its collection order.  ``make test``
    hands each worker whole modules in this order (``--dist loadscope --no-loadscope-reorder``): the long ones
    start early and the many short ones fill in at the end, so the workers end at about the same time."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)
