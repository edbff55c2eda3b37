"""A corrupt bank fails to load with a message that names the file and the curve."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from curves.bank import BankError, load_bank


def test_valid_tiny_bank_loads(tiny_bank: Path) -> None:
    bank = load_bank(tiny_bank)
    assert len(bank.ids("fam_a")) == 3 and len(bank.ids("fam_b")) == 3


def test_truncated_npz_names_file_and_curve(tiny_bank: Path) -> None:
    path = tiny_bank / "fam_a.npz"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(BankError, match=r"fam_a\.npz.*fam_a/test/000"):
        load_bank(tiny_bank)


def _rewrite_array(path: Path, key: str, value: np.ndarray) -> None:
    with np.load(path) as archive:
        arrays = {k: archive[k] for k in archive.files}
    arrays[key] = value
    np.savez_compressed(path, **arrays)


def test_nan_loss_names_file_and_curve(tiny_bank: Path) -> None:
    path = tiny_bank / "fam_b.npz"
    with np.load(path) as archive:
        losses = archive["test_001"].copy()
    losses[5] = np.nan
    _rewrite_array(path, "test_001", losses)
    with pytest.raises(BankError, match=r"fam_b\.npz: curve fam_b/test/001: non-finite loss at batch 6"):
        load_bank(tiny_bank)


def test_array_without_record_is_a_mismatch(tiny_bank: Path) -> None:
    _rewrite_array(tiny_bank / "fam_a.npz", "test_007", np.ones(40, dtype=np.float32))
    with pytest.raises(BankError, match=r"fam_a\.npz.*test_007.*mismatch"):
        load_bank(tiny_bank)


def test_record_without_array_names_curve(tiny_bank: Path) -> None:
    manifest = json.loads((tiny_bank / "manifest.json").read_text())
    extra = dict(manifest["curves"][0], index=9)
    manifest["curves"].append(extra)
    (tiny_bank / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(BankError, match=r"fam_a\.npz: curve fam_a/test/009: listed in manifest.json but absent"):
        load_bank(tiny_bank)


def test_length_disagreement_names_curve(tiny_bank: Path) -> None:
    manifest = json.loads((tiny_bank / "manifest.json").read_text())
    manifest["curves"][1]["length"] = 99
    (tiny_bank / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(BankError, match=r"curve fam_a/test/001: manifest says length 99"):
        load_bank(tiny_bank)


def test_ids_are_the_sorted_selection_every_time_and_callers_cannot_change_them(tiny_bank: Path) -> None:
    bank = load_bank(tiny_bank)
    expected = sorted(cid for cid, rec in bank.records.items() if rec.family == "fam_a")
    first = bank.ids("fam_a")
    assert first == expected
    first.append("intruder")
    assert bank.ids("fam_a") == expected and bank.ids("fam_a", splits=["train", "val", "test"]) == expected
    assert bank.ids(splits=iter(["nope"])) == [] and sorted(bank.ids()) == bank.ids() == sorted(bank.records)


def test_cumavg_is_computed_once_and_cannot_be_changed_by_a_caller(tiny_bank: Path) -> None:
    from curves.bank import cumulative_average

    bank = load_bank(tiny_bank)
    cid = bank.ids("fam_a")[0]
    curve = bank.cumavg(cid)
    assert np.array_equal(curve, cumulative_average(bank.per_batch[cid])) and bank.cumavg(cid) is curve
    with pytest.raises(ValueError, match="read-only"):
        curve[0] = 0.0


@pytest.mark.parametrize("budget, message", [
    ({"kind": "interval", "low": 345, "high": 312}, "budget interval has low 345 > high 312"),
    ({"kind": "interval", "low": 0, "high": 312}, "budget low must be ≥ 1, got 0"),
    ({"kind": "set", "values": []}, "budget set needs a non-empty list of values"),
    ({"kind": "gaussian"}, "budget rule must be"),
])
def test_a_budget_rule_no_task_can_be_drawn_from_names_the_family(tiny_bank: Path, budget, message) -> None:
    manifest = json.loads((tiny_bank / "manifest.json").read_text())
    manifest["families"]["fam_a"]["budget"] = budget
    (tiny_bank / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(BankError, match=rf"manifest\.json: family 'fam_a': {message}"):
        load_bank(tiny_bank)
