"""The bank writer deletes nothing it cannot account for: a missing or corrupt manifest, an array without a
record or an unreadable array file is refused naming the file, and no array shrinks."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import curves.bank_writer as writer_module
from curves.bank import BankError, BankWriter, CurveRecord, load_bank
from curves.build_bank import main as build_main
from synthetic_bank import build_synthetic_bank

BUILD = ["--families", "cnn_fmnist", "--scale", "0.05", "--length", "5"]


@pytest.fixture
def small_bank(tmp_path: Path) -> Path:
    return build_synthetic_bank(tmp_path / "bank", per_split=2, length=30)


def _arrays(root: Path) -> dict[str, dict[str, int]]:
    """Every array of every family file, by its length (a shrinking bank loses entries or lengths)."""
    out = {}
    for path in sorted(root.glob("*.npz")):
        with np.load(path) as archive:
            out[path.name] = {key: archive[key].size for key in archive.files}
    return out


def _files(root: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(root.glob("*.npz"))}


def _build(bank: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    import torch

    threads = torch.get_num_threads()
    try:
        status = build_main(["--bank", str(bank), *BUILD])
    finally:
        torch.set_num_threads(threads)
    return status, capsys.readouterr().err


def test_deleted_manifest_is_refused_and_no_array_shrinks(small_bank, capsys):
    before = _files(small_bank)
    assert sum(len(keys) for keys in _arrays(small_bank).values()) == 20
    (small_bank / "manifest.json").unlink()
    with pytest.raises(BankError, match=r"manifest\.json is missing but .* holds 20 curve arrays"):
        BankWriter(small_bank)
    status, err = _build(small_bank, capsys)
    assert status == 2 and err.count("\n") == 1 and "manifest.json is missing" in err and "Traceback" not in err
    assert _files(small_bank) == before and not (small_bank / "manifest.json").exists()


@pytest.mark.parametrize("text", ['{"format": "mara-curve-bank", "ver', "[]", '{"format": "other", "version": 1}',
                                  '{"format": "mara-curve-bank", "version": 1, "curves": {}}'])
def test_corrupt_manifest_is_refused_naming_it_and_no_array_shrinks(small_bank, capsys, text):
    before = _files(small_bank)
    (small_bank / "manifest.json").write_text(text)
    with pytest.raises(BankError, match=r"manifest\.json"):
        BankWriter(small_bank)
    status, err = _build(small_bank, capsys)
    assert status == 2 and "manifest.json" in err and "Traceback" not in err
    assert _files(small_bank) == before and (small_bank / "manifest.json").read_text() == text


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty"])
def test_unreadable_array_file_is_refused_naming_it_not_dropped(small_bank, capsys, damage):
    path = small_bank / "toy_fast.npz"
    data = path.read_bytes()
    path.write_bytes({"truncate": data[: len(data) // 2], "garbage": b"not a zip" * 50, "empty": b""}[damage])
    damaged = path.read_bytes()
    with pytest.raises(BankError, match=r"toy_fast\.npz: corrupt curve array file"):
        BankWriter(small_bank)
    status, err = _build(small_bank, capsys)
    assert status == 2 and "toy_fast.npz" in err and "Traceback" not in err
    assert path.read_bytes() == damaged


def test_array_without_record_or_pending_entry_is_refused_not_dropped(small_bank):
    path = small_bank / "toy_slow.npz"
    with np.load(path) as archive:
        arrays = {key: archive[key] for key in archive.files}
    np.savez_compressed(path, **arrays, test_099=np.ones(30, dtype=np.float32))
    before = path.read_bytes()
    with pytest.raises(BankError, match=r"toy_slow\.npz: arrays test_099 have no record"):
        BankWriter(small_bank)
    assert path.read_bytes() == before


def test_a_stale_manifest_does_not_delete_the_newer_curves(small_bank):
    """An older manifest put back (say from version control) lists fewer curves than the arrays hold."""
    manifest = json.loads((small_bank / "manifest.json").read_text())
    manifest["curves"] = [raw for raw in manifest["curves"] if raw["index"] == 0]
    (small_bank / "manifest.json").write_text(json.dumps(manifest))
    before = _files(small_bank)
    with pytest.raises(BankError, match="have no record"):
        BankWriter(small_bank)
    assert _files(small_bank) == before


def test_record_without_array_is_refused(small_bank):
    path = small_bank / "toy_rl.npz"
    with np.load(path) as archive:
        arrays = {key: archive[key] for key in archive.files if key != "val_001"}
    np.savez_compressed(path, **arrays)
    with pytest.raises(BankError, match=r"toy_rl\.npz: curve toy_rl/val/001 is listed in manifest\.json but absent"):
        BankWriter(small_bank)


def test_an_interrupted_add_leaves_a_pending_array_that_reopening_removes(small_bank, monkeypatch):
    """Interrupt an add after its array is written and before its record is: the next writer removes exactly
    that array, and the bank is the one before the add."""
    before = _arrays(small_bank)
    written = writer_module.atomic_write_npz

    def write_then_die(path, arrays):
        written(path, arrays)
        raise KeyboardInterrupt

    monkeypatch.setattr(writer_module, "atomic_write_npz", write_then_die)
    record = CurveRecord("toy_fast", "test", 7, 7, 7, 16, 1e-3, "synthetic", "synthetic", 30)
    with pytest.raises(KeyboardInterrupt):
        BankWriter(small_bank).add(record, np.linspace(2.0, 1.0, 30))
    monkeypatch.setattr(writer_module, "atomic_write_npz", written)
    left = json.loads((small_bank / "manifest.json").read_text())
    assert left["pending"] == [{"family": "toy_fast", "key": "test_007"}]
    assert _arrays(small_bank)["toy_fast.npz"]["test_007"] == 30

    writer = BankWriter(small_bank)
    assert _arrays(small_bank) == before and "pending" not in json.loads((small_bank / "manifest.json").read_text())
    writer.add(record, np.linspace(2.0, 1.0, 30))  # the resumed generator redoes it
    assert "toy_fast/test/007" in load_bank(small_bank).records


def test_a_finished_add_leaves_no_pending_entry(small_bank):
    assert "pending" not in json.loads((small_bank / "manifest.json").read_text())
    assert len(load_bank(small_bank).records) == 20


def test_bank_path_that_is_a_file_is_refused(tmp_path):
    path = tmp_path / "file"
    path.write_text("x")
    with pytest.raises(BankError, match="not a directory"):
        BankWriter(path)


@pytest.mark.parametrize(("change", "pattern"), [({"split": "dev"}, "split 'dev' is not one of"),
                                                 ({"index": -1}, "index must be an integer ≥ 0, got -1"),
                                                 ({"index": 1.5}, "index must be an integer ≥ 0, got 1.5"),
                                                 ({"length": 29}, "record length 29 != 30")])
def test_a_bad_new_record_is_refused_before_anything_is_written(small_bank, change, pattern):
    import dataclasses

    before = {path.name: path.read_bytes() for path in small_bank.iterdir() if path.is_file()}
    record = dataclasses.replace(CurveRecord("toy_fast", "test", 7, 7, 7, 16, 1e-3, "synthetic", "synthetic", 30),
                                 **change)
    with pytest.raises(BankError, match=pattern):
        BankWriter(small_bank).add(record, np.linspace(2.0, 1.0, 30))
    assert {path.name: path.read_bytes() for path in small_bank.iterdir() if path.is_file()} == before
