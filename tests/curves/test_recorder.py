"""CurveRecorder turns any training loop into a bank curve, and only a finished loop."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from curves import CurveRecorder, FamilySpec, load_bank

SPEC = FamilySpec("user_mlp", "id", "tabular", "random", "MLP", budget={"kind": "interval", "low": 5, "high": 10})


def _train(rec: CurveRecorder, steps: int) -> None:
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x, y = torch.randn(64, 4), torch.randint(0, 2, (64,))
    for _ in range(steps):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.log(loss)


def test_recorded_loop_becomes_a_loadable_curve(tmp_path: Path) -> None:
    with CurveRecorder(tmp_path, SPEC, "train", 0, seed=0, data_seed=0, batch_size=64, lr=1e-2) as rec:
        _train(rec, 25)
    bank = load_bank(tmp_path)
    assert bank.ids() == ["user_mlp/train/000"]
    np.testing.assert_allclose(bank.per_batch["user_mlp/train/000"], np.float32(rec.losses))
    assert bank.records["user_mlp/train/000"].batch_size == 64


def test_failed_loop_writes_nothing(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError):
        with CurveRecorder(tmp_path, SPEC, "train", 0, seed=0, data_seed=0, batch_size=64, lr=1e-2) as rec:
            rec.log(1.0)
            raise RuntimeError("job crashed")
    assert load_bank(tmp_path).ids() == []


def test_short_loop_is_rejected_when_length_is_required(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="recorded 3 batches, expected 20"):
        with CurveRecorder(tmp_path, SPEC, "train", 0, seed=0, data_seed=0, batch_size=64, lr=1e-2, length=20) as rec:
            _train(rec, 3)


def test_non_finite_loss_is_refused_at_once(tmp_path: Path) -> None:
    with pytest.raises(FloatingPointError, match="batch 2"):
        with CurveRecorder(tmp_path, SPEC, "train", 0, seed=0, data_seed=0, batch_size=64, lr=1e-2) as rec:
            rec.log(0.5)
            rec.log(float("nan"))


def test_redeclaring_a_family_keeps_every_calibrated_rule(tmp_path: Path) -> None:
    """A generator re-declares its family on every run (with no rules): the ε rule, the crossing rule and the
    record of the curves they were fitted on all survive it."""
    rules = {"eps": {"kind": "scaled", "base": 0.5, "low": 0.9, "high": 1.1},
             "crossing": {"low": 0.4, "high": 1.2, "early_batches": 4, "early_margin": 0.01},
             "calibrated_on": {"train": 1}}
    calibrated = FamilySpec(**{**SPEC.__dict__, **rules})
    with CurveRecorder(tmp_path, calibrated, "train", 0, seed=0, data_seed=0, batch_size=8, lr=1e-3) as rec:
        rec.log(1.0)
    with CurveRecorder(tmp_path, SPEC, "train", 1, seed=0, data_seed=0, batch_size=8, lr=1e-3) as rec:
        rec.log(1.0)
    family = load_bank(tmp_path).family("user_mlp")
    assert (family.eps, family.crossing, family.calibrated_on) == (rules["eps"], rules["crossing"], {"train": 1})


def test_two_writers_on_one_bank_keep_each_others_curves(tmp_path):
    """Two generators on one bank: each write starts from the files on disk, under the bank's lock."""
    import numpy as np

    from curves.bank import BankWriter, CurveRecord, FamilySpec, load_bank

    spec = FamilySpec("toy", "id", "image", "synthetic", "none", None, {"kind": "interval", "low": 2, "high": 3})
    first, second = BankWriter(tmp_path), BankWriter(tmp_path)  # both opened before either writes
    first.declare_family(spec)
    for writer, index in ((first, 0), (second, 1), (first, 2)):
        record = CurveRecord("toy", "train", index, seed=index, data_seed=index, batch_size=8, lr=1e-3,
                             preset="cpu", source="synthetic", length=6)
        writer.add(record, np.linspace(2.0, 1.0, 6))
    assert load_bank(tmp_path).ids("toy") == ["toy/train/000", "toy/train/001", "toy/train/002"]
