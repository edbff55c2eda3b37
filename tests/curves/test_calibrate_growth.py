"""A bank calibrated on its first curves keeps its ε rules as it grows (``calibrate --calibrate-on``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from curves import calibrate
from curves.bank import BankWriter, CurveRecord, load_bank
from curves.build_bank import COUNTS, plan
from curves.calibrate import RECORDED, calibrate_bank
from synthetic_bank import build_synthetic_bank, synthetic_losses

pytestmark = pytest.mark.long  # started first by make test (tests/conftest.py)

FIRST = {"train": 6, "val": 6, "test": 6}


def _grow(root: Path, family: str, split: str, indices: range, seed: int) -> None:
    """Add curves to a bank, as ``curves.generate`` would (steeper ones, so that refitting would move the rules)."""
    writer = BankWriter(root)
    rng = np.random.default_rng(seed)
    for index in indices:
        losses = synthetic_losses(rng, 640) * np.linspace(1.0, 0.3, 640)
        writer.add(CurveRecord(family, split, index, seed=index, data_seed=index, batch_size=16, lr=1e-3,
                               preset="synthetic", source="synthetic", length=640), losses)


def _rules(root: Path) -> dict[str, tuple]:
    return {name: (spec.eps, spec.crossing) for name, spec in load_bank(root).families.items()}


def _calibrated_bank(folder: Path) -> Path:
    root = build_synthetic_bank(folder / "bank", per_split=6)
    calibrate_bank(root, first=FIRST)
    return root


@pytest.fixture()
def calibrated(tmp_path: Path) -> Path:
    return _calibrated_bank(tmp_path)


@pytest.fixture(scope="module")
def refused_bank(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One calibrated bank for the commands refused before they read it (a refused command writes nothing)."""
    return _calibrated_bank(tmp_path_factory.mktemp("refused"))


def test_rules_fitted_on_the_first_curves_stay_put_as_the_bank_grows(calibrated: Path) -> None:
    before = _rules(calibrated)
    assert all(spec.calibrated_on == FIRST for spec in load_bank(calibrated).families.values())
    _grow(calibrated, "toy_fast", "train", range(6, 30), seed=1)
    _grow(calibrated, "toy_fast", "val", range(6, 12), seed=2)
    calibrate_bank(calibrated)  # RECORDED: what each family's entry names
    assert _rules(calibrated) == before
    refit = calibrate_bank(calibrated, first=None)
    assert _rules(calibrated)["toy_fast"] != before["toy_fast"]  # the new curves do move a refit
    assert next(row for row in refit if row["family"] == "toy_fast")["curves"] == 6 * 3 + 24 + 6
    assert load_bank(calibrated).family("toy_fast").calibrated_on is None


def test_an_unlimited_calibration_writes_no_limit_into_the_manifest(tmp_path: Path) -> None:
    root = build_synthetic_bank(tmp_path / "bank", per_split=6)
    calibrate_bank(root, first=RECORDED)
    families = json.loads((root / "manifest.json").read_text())["families"]
    assert all("calibrated_on" not in body for body in families.values())


@pytest.mark.parametrize("argv, message", [
    (["--calibrate-on", "train"], "must be SPLIT=N"),
    (["--calibrate-on", "tran=3"], "must be SPLIT=N"),
    (["--calibrate-on", "train=3", "train=4"], "each once"),
    (["--calibrate-on", "train=0"], "--calibrate-on"),
    (["--calibrate-on", "all", "train=3"], "must be SPLIT=N"),
    (["--calibrate-on", "train=3", "--report-only"], "drop --report-only"),
])
def test_bad_calibrate_on_is_one_line_and_status_2(refused_bank: Path, argv, message, capsys) -> None:
    manifest = (refused_bank / "manifest.json").read_text()
    assert calibrate.main(["--bank", str(refused_bank), *argv]) == 2
    assert (refused_bank / "manifest.json").read_text() == manifest
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_calibrate_on_from_the_command_line_is_recorded(calibrated: Path, capsys) -> None:
    assert calibrate.main(["--bank", str(calibrated), "--calibrate-on", "train=3", "val=4"]) == 0
    assert load_bank(calibrated).family("toy_slow").calibrated_on == {"train": 3, "val": 4}
    assert calibrate.main(["--bank", str(calibrated), "--calibrate-on", "all"]) == 0
    assert load_bank(calibrated).family("toy_slow").calibrated_on is None


def test_the_paper_counts_are_planned_in_the_usual_chunks() -> None:
    counts = {"id": {**COUNTS["id"], "train": 50, "val": 10}, "ood": COUNTS["ood"]}
    jobs = plan(["cnn_fmnist"], 1.0, counts)
    assert [(job.split, job.start, job.stop) for job in jobs] == [
        ("test", 0, 8), ("test", 8, 16), ("test", 16, 24), ("val", 0, 10),
        ("train", 0, 17), ("train", 17, 33), ("train", 33, 50)]
