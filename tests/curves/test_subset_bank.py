"""``curves.subset_bank`` cuts a bank to its first N curves per split, whole or not at all."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from curves.bank import load_bank
from curves.subset_bank import main, subset_bank
from synthetic_bank import build_synthetic_bank


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_synthetic_bank(tmp_path_factory.mktemp("grown") / "bank", per_split=5)


def test_a_subset_holds_the_first_curves_with_their_records_and_rules(source: Path, tmp_path: Path) -> None:
    held = subset_bank(source, tmp_path / "small", {"train": 2, "val": 3})
    big, small = load_bank(source), load_bank(tmp_path / "small")
    ood = {name for name, spec in big.families.items() if spec.role == "ood"}
    expected = [cid for cid in big.ids() if big.records[cid].split == "test" or big.records[cid].family in ood
                or big.records[cid].index < {"train": 2, "val": 3}[big.records[cid].split]]
    # ID: 2 train + 3 val + 5 test each; OOD (copied whole): 5 val + 5 test each
    assert held == len(expected) == 2 * (2 + 3 + 5) + 2 * (5 + 5)
    assert small.ids() == expected
    assert small.families == big.families
    for cid in expected:
        assert small.records[cid] == big.records[cid]
        np.testing.assert_array_equal(small.per_batch[cid], big.per_batch[cid])


def test_an_existing_target_or_too_few_curves_is_refused_and_nothing_is_left(source: Path, tmp_path: Path,
                                                                           capsys) -> None:
    (tmp_path / "taken").mkdir()
    assert main(["--from", str(source), "--to", str(tmp_path / "taken"), "--train", "1"]) == 2
    assert "already exists" in capsys.readouterr().err
    assert main(["--from", str(source), "--to", str(tmp_path / "big"), "--train", "6"]) == 2
    err = capsys.readouterr().err
    assert "toy_fast/train: the source holds 5 of the first 6 curves" in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]


def test_the_command_line_writes_the_subset(source: Path, tmp_path: Path, capsys) -> None:
    assert main(["--from", str(source), "--to", str(tmp_path / "cut"), "--val", "1", "--test", "0",
                 "--roles", "id", "ood"]) == 0
    assert capsys.readouterr().out.strip() == f"{2 * 5 + 4 * 1} curves in {tmp_path / 'cut'}"
