"""Every built-in method plays the recorded fixture episodes exactly as when they were recorded.

The rows pin behaviour, so a refactor of the allocators, predictors or harness that changes any episode's
outcome fails here.  See ``refactor_fixture.py`` for what is recorded and how to re-record on purpose.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from refactor_fixture import FIXTURE, RECORD_COMMAND, bank_content_sha256, checkpoint_hashes, play

pytestmark = pytest.mark.long  # started first by make test (tests/conftest.py)


@pytest.fixture(scope="module")
def recorded() -> dict:
    return json.loads(FIXTURE.read_text())


def test_the_fixture_inputs_are_the_ones_it_was_recorded_with(recorded, bank_dir):
    changed = [name for name, sha in recorded["checkpoints"].items() if checkpoint_hashes().get(name) != sha]
    if bank_content_sha256(bank_dir) != recorded["synthetic_bank_sha256"]:
        changed.append("the synthetic test bank (tests/synthetic_bank.py)")
    if changed:
        pytest.fail(f"{FIXTURE.name} was recorded with other inputs: {', '.join(changed)} changed since. If that "
                    f"was intended, re-record the rows with `{RECORD_COMMAND}` and commit them with the reason.")


def test_every_method_reproduces_its_recorded_episode_rows(recorded, bank_dir, tmp_path: Path):
    rows = play(bank_dir, recorded["workloads"], tmp_path / "workloads")
    as_json = [json.dumps(row, sort_keys=True) for row in rows]
    expected = [json.dumps(row, sort_keys=True) for row in recorded["rows"]]
    different = [f"{new}\n  recorded: {old}" for new, old in zip(as_json, expected) if new != old]
    assert len(as_json) == len(expected), f"{len(as_json)} rows, recorded {len(expected)}"
    assert not different, f"{len(different)} rows differ from {FIXTURE.name}:\n" + "\n".join(different[:5])
