"""Checkpoints are verified at load: a flipped byte, non-finite weights or a corrupt run state is refused with a
message naming the file, and a resumed run falls back to the previous good state."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import torch

from mara_agents import make_policy
from mara_agents.play.checkpoints import CheckpointError, load_run_state, previous_state, save_run_state
from mara_agents.mat.checkpoint import export_policy
from mara_agents.mat.model import MATHyperParameters, MATModel
from mara_agents.predictors.fm import FlowMatchingModel, load_model, save_checkpoint

SHIPPED = Path(__file__).resolve().parents[2] / "mara_agents" / "checkpoints" / "mara_seed0.pt"


def flip_byte(path: Path, offset_fraction: float = 0.6) -> None:
    data = bytearray(path.read_bytes())
    data[int(len(data) * offset_fraction)] ^= 0x01
    path.write_bytes(bytes(data))


def test_a_flipped_byte_in_a_shipped_checkpoint_is_refused(tmp_path):
    copy = tmp_path / SHIPPED.name
    shutil.copy(SHIPPED, copy)
    shutil.copy(SHIPPED.with_suffix(".json"), copy.with_suffix(".json"))
    make_policy("mara", checkpoint=copy)  # the intact copy loads
    flip_byte(copy)
    with pytest.raises(CheckpointError, match=r"mara_seed0\.pt.*corrupt.*SHA-256"):
        make_policy("mara", checkpoint=copy)


def test_non_finite_mat_weights_are_refused_naming_the_file(tmp_path):
    model = MATModel(MATHyperParameters(dim=8))
    with torch.no_grad():
        next(model.parameters()).fill_(float("nan"))
    path = tmp_path / "nan.pt"
    export_policy(path, model, "wls", {"note": "all-NaN weights"})
    with pytest.raises(CheckpointError, match=r"nan\.pt.*non-finite"):
        make_policy("mara-wls", checkpoint=path)


def test_non_finite_fm_weights_are_refused_naming_the_file(tmp_path):
    model = FlowMatchingModel()
    with torch.no_grad():
        next(model.parameters()).fill_(float("inf"))
    path = tmp_path / "fm_inf.pt"
    save_checkpoint(path, model)
    with pytest.raises(CheckpointError, match=r"fm_inf\.pt.*non-finite"):
        load_model(path)


def state(step: int) -> dict:
    return {"model": {"w": torch.full((3,), float(step))}, "step": step}


def test_a_corrupt_run_state_falls_back_to_the_previous_one(tmp_path):
    path = tmp_path / "last.pt"
    save_run_state(path, state(1))
    save_run_state(path, state(2))
    assert load_run_state(path)["step"] == 2 and previous_state(path).is_file()
    flip_byte(path)
    warnings: list[str] = []
    assert load_run_state(path, warn=warnings.append)["step"] == 1
    assert "last.pt" in warnings[0] and "last.prev.pt" in warnings[0]


def test_a_process_killed_while_writing_a_new_state_leaves_the_last_one_in_place(tmp_path, monkeypatch):
    path = tmp_path / "last.pt"
    save_run_state(path, state(1))
    save_run_state(path, state(2))

    def killed(obj, target):  # the new state never reaches disk
        raise KeyboardInterrupt
    monkeypatch.setattr(torch, "save", killed)
    with pytest.raises(KeyboardInterrupt):
        save_run_state(path, state(3))
    warnings: list[str] = []
    assert path.is_file() and load_run_state(path, warn=warnings.append)["step"] == 2 and not warnings
    assert load_run_state(previous_state(path))["step"] == 2  # the copy made before the write


def test_a_process_killed_at_any_rename_of_a_save_leaves_a_state_that_loads_without_a_fallback(tmp_path,
                                                                                             monkeypatch):
    real_replace = os.replace
    renames = 0

    def counted(source, target):
        nonlocal renames
        renames += 1
        real_replace(source, target)
    save_run_state(tmp_path / "probe.pt", state(1))
    monkeypatch.setattr(os, "replace", counted)
    save_run_state(tmp_path / "probe.pt", state(2))  # a save over an earlier state: every rename it makes
    per_save = renames
    for killed_at in range(per_save):
        path = tmp_path / f"run{killed_at}" / "last.pt"
        monkeypatch.setattr(os, "replace", real_replace)
        save_run_state(path, state(1))
        save_run_state(path, state(2))
        calls = 0

        def killed(source, target):
            nonlocal calls
            calls += 1
            if calls > killed_at:
                raise KeyboardInterrupt
            real_replace(source, target)
        monkeypatch.setattr(os, "replace", killed)
        with pytest.raises(KeyboardInterrupt):
            save_run_state(path, state(3))
        monkeypatch.setattr(os, "replace", real_replace)
        warnings: list[str] = []
        assert load_run_state(path, warn=warnings.append)["step"] in (2, 3) and not warnings, killed_at


def test_when_no_run_state_is_usable_the_error_names_both_files(tmp_path):
    path = tmp_path / "last.pt"
    save_run_state(path, state(1))
    save_run_state(path, state(2))
    flip_byte(path)
    flip_byte(previous_state(path))
    with pytest.raises(CheckpointError, match=r"last\.pt.*corrupt.*last\.prev\.pt"):
        load_run_state(path)


@pytest.mark.parametrize("name, policy_files", [
    ("mara", {"checkpoint": SHIPPED}),
    ("mat-il-ens", {"checkpoints": [SHIPPED.with_name("mat_il_ens_member0.pt")]}),
])
def test_a_policy_refuses_an_fm_other_than_the_one_it_was_trained_with(name, policy_files, fm_checkpoint):
    make_policy(name, **policy_files)  # with the FM its manifest records, it plays
    with pytest.raises(CheckpointError, match=r"trained with the FM mara_agents/predictors/checkpoints/fm\.pt "
                                              rf".*not with {fm_checkpoint}.*verify=False"):
        make_policy(name, fm_checkpoint=fm_checkpoint, **policy_files)


def test_verify_false_plays_a_policy_with_another_fm_after_a_warning_naming_both(fm_checkpoint):
    with pytest.warns(UserWarning, match=rf"mara_seed0\.pt: policy trained with the FM .*fm\.pt.*{fm_checkpoint}"):
        policy = make_policy("mara", checkpoint=SHIPPED, fm_checkpoint=fm_checkpoint, verify=False)
    played = policy.demand.predictor.model.state_dict()
    assert all(torch.equal(played[key], value) for key, value in load_model(fm_checkpoint).state_dict().items())
