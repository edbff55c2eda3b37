"""Shared fixtures: a synthetic bank built once per test session (tests never need the shipped bank)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from synthetic_bank import build_synthetic_bank  # noqa: E402


@pytest.fixture(scope="session")
def bank_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small synthetic bank directory in the real format."""
    return build_synthetic_bank(tmp_path_factory.mktemp("bank"))
