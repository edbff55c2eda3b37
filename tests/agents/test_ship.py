"""Shipping a trained policy (python -m tools.ship_checkpoints): the weights are copied byte for byte, and each
recorded path is relabelled to the shipped place exactly when its content is the same."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tools import ship_checkpoints as ship
from mara_agents.mat.checkpoint import load_policy
from tools.ship_checkpoints import ShipError, ShippedPlaces, ship_policy
from mara_agents.training.train import train
from mara_agents.predictors.fm import FlowMatchingModel, save_checkpoint

from conftest import tiny_config
from synthetic_bank import build_synthetic_bank

ROOT = Path(__file__).resolve().parents[2]
FM_NAME = "mara_agents/predictors/checkpoints/fm.pt"
RELABELLED = {"config.env.bank": "curves/bank", "data.bank": "curves/bank",
              "config.fm_checkpoint": FM_NAME, "predictor.checkpoint": FM_NAME,
              "config.finetune.init_from": "mara_agents/checkpoints/start.pt",
              "initial_policy.checkpoint": "mara_agents/checkpoints/start.pt",
              "checkpoint": "tuned.pt", "config.out": "mara_agents/checkpoints/tuned.pt",
              "config.run_dir": "mara_agents/checkpoints/tuned"}
START_FIELDS = ("config.finetune.init_from", "initial_policy.checkpoint")


@pytest.fixture(scope="module")
def scratch(bank_dir: Path, fm_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(a policy trained over the FM in a scratch directory, a policy fine-tuned from it there)."""
    root = tmp_path_factory.mktemp("runs")
    common = {"steps": 20, "validate_every": 0, "predictor": "fm", "fm_checkpoint": str(fm_checkpoint),
              "progress": False}
    first = train(tiny_config(bank_dir, root / "first", **common)).checkpoint
    tuned = train(tiny_config(bank_dir, root / "tuned", init_from=str(first), method="mat-il", critic_warmup=1,
                              **common)).checkpoint
    return first, tuned


def copy_checkpoint(source: Path, target: Path) -> Path:
    """``source`` and its manifest copied to ``target``."""
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(source, target)
    shutil.copy(source.with_suffix(".json"), target.with_suffix(".json"))
    return target


@pytest.fixture
def repo(tmp_path: Path, bank_dir: Path, fm_checkpoint: Path, monkeypatch: pytest.MonkeyPatch) -> ShippedPlaces:
    """A small repository whose shipped bank and FM are copies of the ones the scratch runs trained with."""
    root = tmp_path / "repo"
    shutil.copytree(bank_dir, root / "curves" / "bank")
    places = ShippedPlaces(root, root / "curves" / "bank", copy_checkpoint(fm_checkpoint, root / FM_NAME))
    monkeypatch.setattr(ship, "SHIPPED", places)
    return places


def manifest(path: Path) -> dict:
    return json.loads(path.with_suffix(".json").read_text())


def field(record: dict, dotted: str) -> object:
    for key in dotted.split("."):
        record = record[key]
    return record


def with_fields(record: dict, values: dict[str, object]) -> dict:
    """A copy of ``record`` with the dotted fields set to ``values``."""
    record = json.loads(json.dumps(record))
    for dotted, value in values.items():
        *parents, last = dotted.split(".")
        inner = record
        for key in parents:
            inner = inner[key]
        inner[last] = value
    return record


def test_paths_are_relabelled_where_the_content_matches_and_the_weights_are_copied_unchanged(scratch, repo):
    first, tuned = scratch
    start = repo.repository / "mara_agents" / "checkpoints" / "start.pt"
    ship_policy(first, start)
    dest = repo.repository / "mara_agents" / "checkpoints" / "tuned.pt"
    changes = ship_policy(tuned, dest, start)
    assert dest.read_bytes() == tuned.read_bytes()
    assert {change.field: change.new for change in changes} == RELABELLED
    assert manifest(dest) == with_fields(manifest(tuned), RELABELLED)  # every other entry, hashes included, kept
    assert manifest(dest)["checkpoint_sha256"] == manifest(tuned)["checkpoint_sha256"]
    load_policy(dest)  # verified against its new manifest
    assert manifest(start)["initial_policy"] is None and manifest(start)["data"]["bank"] == "curves/bank"


def other_fm(repository: Path) -> Path:
    """An FM inside the repository whose weights differ from the one the scratch runs trained with."""
    torch.manual_seed(1)
    path = repository / "other" / "fm.pt"
    save_checkpoint(path, FlowMatchingModel())
    return path


def test_content_that_differs_is_left_as_is_with_the_reason(scratch, repo):
    _, tuned = scratch
    other = ShippedPlaces(repo.repository, build_synthetic_bank(repo.repository / "other" / "bank", per_split=2, seed=1),
                          repo.fm)
    wrong_start = copy_checkpoint(tuned, repo.repository / "mara_agents" / "checkpoints" / "wrong_start.pt")
    dest = repo.repository / "mara_agents" / "checkpoints" / "tuned.pt"
    changes = {change.field: change for change in ship_policy(tuned, dest, wrong_start, places=other)}
    recorded = manifest(tuned)
    for name in ("config.env.bank", "data.bank", *START_FIELDS):
        assert changes[name].new is None and field(manifest(dest), name) == field(recorded, name)
        assert "left as is" in changes[name].describe() and "differs from" in changes[name].reason
    assert "wrong_start.pt" in changes["initial_policy.checkpoint"].reason
    assert dest.read_bytes() == tuned.read_bytes()


def test_a_policy_trained_with_another_fm_is_refused_unless_fm_names_where_its_fm_was_shipped(scratch, repo):
    _, tuned = scratch
    dest = repo.repository / "mara_agents" / "checkpoints" / "tuned.pt"
    elsewhere = ShippedPlaces(repo.repository, repo.bank, other_fm(repo.repository))
    with pytest.raises(ShipError, match=r"--fm: the policy was trained with the FM .*fm\.pt, whose SHA-256 differs "
                                        r"from the FM other/fm\.pt's"):
        ship_policy(tuned, dest, places=elsewhere)
    assert not dest.exists()
    shipped_fm = copy_checkpoint(repo.fm, repo.repository / "mara_agents" / "predictors" / "fm_tuned.pt")
    changes = {change.field: change.new for change in ship_policy(tuned, dest, places=elsewhere, fm=shipped_fm)}
    assert changes["predictor.checkpoint"] == "mara_agents/predictors/fm_tuned.pt"


def test_without_start_the_starting_policy_is_left_as_is_and_said_so(scratch, repo):
    _, tuned = scratch
    dest = repo.repository / "mara_agents" / "checkpoints" / "tuned.pt"
    changes = {change.field: change for change in ship_policy(tuned, dest)}
    for name in START_FIELDS:
        assert changes[name].new is None and "no --start" in changes[name].reason
        assert field(manifest(dest), name) == field(manifest(tuned), name)
    assert manifest(dest)["data"]["bank"] == "curves/bank"


def test_a_path_without_a_recorded_hash_is_checked_by_its_file_or_reported_not_found(scratch, repo, tmp_path):
    _, tuned = scratch
    unrecorded = copy_checkpoint(tuned, tmp_path / "unrecorded.pt")
    record = manifest(unrecorded)
    del record["data"]["bank_sha256"]
    record["config"]["env"]["bank"] = str(tmp_path / "gone")
    unrecorded.with_suffix(".json").write_text(json.dumps(record))
    changes = {change.field: change for change in ship_policy(unrecorded, repo.checkpoints / "x.pt", dry_run=True)}
    assert changes["config.env.bank"].new is None and "not found" in changes["config.env.bank"].reason
    assert changes["data.bank"].new == "curves/bank"  # the bank the run used is still there: its checksum matches


def test_a_dry_run_prints_the_same_changes_and_writes_nothing(scratch, repo, capsys):
    _, tuned = scratch
    dest = repo.repository / "mara_agents" / "checkpoints" / "tuned.pt"
    assert ship.run([str(tuned), str(dest), "--dry-run"]) == 0
    dry = capsys.readouterr().out.splitlines()
    assert not dest.exists() and not dest.with_suffix(".json").exists()
    assert ship.run([str(tuned), str(dest)]) == 0
    real = capsys.readouterr().out.splitlines()
    assert dry[:-1] == real[:-1] and len(real) == len(RELABELLED) + 1
    assert "data.bank: " in real[1] and "→ curves/bank" in real[1] and "dry run" in dry[-1]


def test_shipping_again_with_replace_overwrites_other_weights(scratch, repo):
    first, tuned = scratch
    dest = repo.repository / "mara_agents" / "checkpoints" / "tuned.pt"
    ship_policy(first, dest)
    with pytest.raises(ShipError, match="--replace"):
        ship_policy(tuned, dest)
    ship_policy(tuned, dest, replace=True)
    assert dest.read_bytes() == tuned.read_bytes()
    ship_policy(tuned, dest)  # the same weights again: allowed


def flipped(source: Path, target: Path) -> Path:
    copy_checkpoint(source, target)
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0x01
    target.write_bytes(bytes(data))
    return target


BAD_INPUTS = {
    "missing SRC": (lambda s, r, t: [str(t / "none.pt"), str(r / "d.pt")], "SRC: .*none.pt not found"),
    "corrupt SRC": (lambda s, r, t: [str(flipped(s[1], t / "bad.pt")), str(r / "d.pt")], "SRC: .*checkpoint_sha256"),
    "DEST outside": (lambda s, r, t: [str(s[1]), str(t / "elsewhere.pt")], "DEST: .*outside the checkpoints folder"),
    "DEST in results": (lambda s, r, t: [str(s[1]), str(r.parents[1] / "results" / "d.pt")],
                        "DEST: .*results/d.pt lies outside the checkpoints folder"),
    "missing fm": (lambda s, r, t: [str(s[1]), str(r / "d.pt"), "--fm", str(r / "f.pt")], "--fm: .*f.pt not found"),
    "fm outside": (lambda s, r, t: [str(s[1]), str(r / "d.pt"), "--fm", str(flipped(s[1], t / "f.pt"))],
                   "--fm: .*outside the repository"),
    "fm other than the trained one": (lambda s, r, t: [str(s[1]), str(r / "d.pt"), "--fm", str(other_fm(r))],
                                      "--fm: .*trained with the FM .*differs from"),
    "DEST not .pt": (lambda s, r, t: [str(s[1]), str(r / "d.json")], "DEST: .*\\.pt"),
    "SRC == DEST": (lambda s, r, t: [str(copy_checkpoint(s[1], r / "d.pt"))] * 2, "DEST: .*SRC itself"),
    "DEST taken": (lambda s, r, t: [str(s[1]), str(copy_checkpoint(s[0], r / "d.pt"))], "DEST: .*--replace"),
    "missing start": (lambda s, r, t: [str(s[1]), str(r / "d.pt"), "--start", str(r / "s.pt")], "--start: .*not found"),
    "start outside": (lambda s, r, t: [str(s[1]), str(r / "d.pt"), "--start", str(s[0])], "--start: .*outside"),
    "start of a policy without one": (lambda s, r, t: [str(s[0]), str(r / "d.pt"), "--start",
                                                       str(copy_checkpoint(s[0], r / "s.pt"))],
                                      "--start: .*records no starting policy"),
}


@pytest.mark.parametrize("case", BAD_INPUTS)
def test_bad_input_exits_2_with_one_line_and_writes_nothing(case, scratch, repo, tmp_path, capsys):
    make_argv, message = BAD_INPUTS[case]
    argv = make_argv(scratch, repo.checkpoints, tmp_path)
    before = {path: path.read_bytes() for path in repo.repository.rglob("*") if path.is_file()}
    assert ship.run(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ")
    assert re.search(message, err[0]), err[0]
    assert {path: path.read_bytes() for path in repo.repository.rglob("*") if path.is_file()} == before


def test_the_command_line_answers_bad_input_with_one_line_and_status_2(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "tools.ship_checkpoints", str(tmp_path / "none.pt"),
                           str(ROOT / "none.pt")], capture_output=True, text=True, env=env, cwd=tmp_path,
                          check=False)
    assert done.returncode == 2 and done.stderr.strip() == f"error: SRC: {tmp_path / 'none.pt'} not found"


def test_a_policy_trained_with_another_fm_refuses_the_shipped_one_and_plays_with_its_own(scratch, fm_checkpoint):
    from mara_agents import make_policy
    from mara_agents.play.checkpoints import CheckpointError

    first, _ = scratch  # trained over the untrained test FM, not the shipped one
    with pytest.raises(CheckpointError, match=rf"{first}: policy trained with the FM {fm_checkpoint} .*, not with "
                                              r".*mara_agents/predictors/checkpoints/fm\.pt"):
        make_policy("mara", checkpoint=first)
    assert make_policy("mara", checkpoint=first, fm_checkpoint=fm_checkpoint).checkpoints == (first,)
