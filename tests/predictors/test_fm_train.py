"""Stage-I training: resumable, reproducible, selected checkpoint with a manifest (issue 4, item 4)."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from curves.bank import BankWriter, load_bank
from mara_agents.predictors.fm import CheckpointError, FMHyperParameters, load_model
from mara_agents.predictors.fm.examples import draw_examples, id_curve_set
from mara_agents.predictors.train import FMTrainConfig, main, parse_config, train


def tiny_config(bank: Path, tmp: Path, **changes) -> FMTrainConfig:
    settings = dict(bank=str(bank), run_dir=str(tmp / "run"), out=str(tmp / "out" / "fm.pt"), batch_size=16,
                    max_steps=8, eval_every=4, val_examples=64, stats_examples=128,
                    model=FMHyperParameters(hidden=8, history_points=16, width=16, time_dim=8))
    settings.update(changes)
    return FMTrainConfig(**settings)


def test_resumed_run_equals_an_uninterrupted_one(tiny_bank, tmp_path):
    straight = train(tiny_config(tiny_bank, tmp_path / "a"))
    train(tiny_config(tiny_bank, tmp_path / "b", max_steps=4))  # "killed" after the first checkpoint
    resumed = train(tiny_config(tiny_bank, tmp_path / "b"))
    assert resumed.steps == straight.steps == 8
    assert resumed.best_val == straight.best_val
    for key, value in load_model(straight.checkpoint).state_dict().items():
        assert torch.equal(value, load_model(resumed.checkpoint).state_dict()[key]), key


def test_an_interrupted_run_saves_its_last_whole_step_and_resumes_to_the_same_model(tiny_bank, tmp_path,
                                                                                   monkeypatch):
    """SIGINT or SIGTERM (a KeyboardInterrupt) between evaluations saves the state of the last whole step, and
    resuming from it gives the model of a run that was never stopped."""
    from mara_agents.play.checkpoints import load_run_state
    from mara_agents.predictors import train as trainer

    straight = train(tiny_config(tiny_bank, tmp_path / "a"))
    objective, calls = trainer.flow_matching_objective, []

    def interrupted_in_step_6(*args):
        calls.append(1)
        if len(calls) == 7:  # steps 1-4, step 4's validation (one batch), step 5, then step 6's loss
            raise KeyboardInterrupt
        return objective(*args)

    monkeypatch.setattr(trainer, "flow_matching_objective", interrupted_in_step_6)
    with pytest.raises(KeyboardInterrupt):
        train(tiny_config(tiny_bank, tmp_path / "b"))
    assert load_run_state(tmp_path / "b" / "run" / "last.pt")["step"] == 5  # the validation saved step 4
    monkeypatch.setattr(trainer, "flow_matching_objective", objective)
    resumed = train(tiny_config(tiny_bank, tmp_path / "b"))
    assert resumed.best_val == straight.best_val
    for key, value in load_model(straight.checkpoint).state_dict().items():
        assert torch.equal(value, load_model(resumed.checkpoint).state_dict()[key]), key


def test_manifest_records_how_the_checkpoint_was_trained(tiny_bank, tmp_path):
    result = train(tiny_config(tiny_bank, tmp_path))
    manifest = json.loads(result.manifest.read_text())
    assert manifest["checkpoint"] == "fm.pt" and manifest["config"]["seed"] == 0
    assert manifest["data"]["families"] == ["plateau_toy", "power_toy"]  # ID families only
    assert manifest["data"]["train_curves"] == 8 and manifest["data"]["val_curves"] == 8
    assert len(manifest["data"]["bank_sha256"]) == 64 and manifest["val_loss"] == result.best_val
    assert {"git_commit", "best_step", "steps_trained", "train_seconds"} <= set(manifest)
    assert (tmp_path / "run" / "tb").is_dir()


def test_corrupt_training_state_is_a_clear_error_naming_the_file(tiny_bank, tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "last.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="last.pt"):
        train(tiny_config(tiny_bank, tmp_path))


def test_resuming_with_a_different_recipe_is_refused(tiny_bank, tmp_path):
    train(tiny_config(tiny_bank, tmp_path, max_steps=4))
    with pytest.raises(ValueError, match="seed"):
        train(tiny_config(tiny_bank, tmp_path, seed=1))


def test_command_line_is_generated_from_the_config(tiny_bank, tmp_path):
    config = parse_config(["--bank", str(tiny_bank), "--batch-size", "7", "--lr", "0.01", "--no-resume"])
    assert (config.bank, config.batch_size, config.lr, config.resume) == (str(tiny_bank), 7, 0.01, False)
    result = main(["--bank", str(tiny_bank), "--run-dir", str(tmp_path / "r"), "--out", str(tmp_path / "fm.pt"),
                   "--max-steps", "4", "--eval-every", "4", "--batch-size", "8", "--val-examples", "32",
                   "--stats-examples", "64", "--hidden", "8", "--width", "16"])
    assert result.checkpoint.exists() and result.steps == 4


def test_examples_have_eligible_prefixes_and_horizons_inside_the_stored_suffix(tiny_bank):
    curves = id_curve_set(load_bank(tiny_bank), "train", min_prefix=4)
    assert all(cid.split("/")[1] == "train" and not cid.startswith(("dagger", "vit")) for cid in curves.ids)
    examples = draw_examples(curves, np.random.default_rng(0), 5000, min_prefix=4)
    assert examples.prefix.min() == 4 and examples.prefix.max() == 30  # the families' largest budget
    assert examples.horizon.min() >= 1
    assert np.all(examples.prefix + examples.horizon <= curves.length[examples.curve])
    assert np.any(examples.prefix + examples.horizon == curves.length[examples.curve])


def test_a_killed_training_process_resumes_from_its_last_checkpoint(tiny_bank, tmp_path, capsys):
    args = ["--bank", str(tiny_bank), "--run-dir", str(tmp_path / "run"), "--out", str(tmp_path / "fm.pt"),
            "--batch-size", "8", "--eval-every", "2", "--val-examples", "16", "--stats-examples", "32", "--hidden",
            "8", "--width", "16", "--patience", "1000"]
    process = subprocess.Popen([sys.executable, "-m", "mara_agents.predictors.train", *args, "--max-steps", "100000"],
                               cwd=Path(__file__).resolve().parents[2], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "run" / "last.pt").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.5)
    finally:
        process.kill()  # SIGKILL: no chance to clean up
        process.wait()
    reached = torch.load(tmp_path / "run" / "last.pt", weights_only=True)["step"]
    assert reached >= 2
    result = main([*args, "--max-steps", str(reached + 2)])
    assert f"resuming {tmp_path / 'run' / 'last.pt'} at step {reached}" in capsys.readouterr().out
    assert result.steps == reached + 2


def test_resuming_after_the_training_curves_changed_is_refused(tiny_bank, tmp_path):
    bank = tmp_path / "bank"
    shutil.copytree(tiny_bank, bank)
    train(tiny_config(bank, tmp_path, max_steps=4))
    extra = load_bank(bank).records["power_toy/train/000"]
    BankWriter(bank).add(dataclasses.replace(extra, index=99), np.linspace(2.0, 0.5, extra.length))
    with pytest.raises(ValueError, match="curves changed"):
        train(tiny_config(bank, tmp_path))


def test_init_from_fine_tunes_the_checkpoint_and_refuses_another_architecture(tiny_bank, tmp_path):
    """``--init-from`` starts from a checkpoint's weights and standardisation: with a learning rate too small to
    move them, the fine-tuned model is the checkpoint's, while a fresh run of the same settings is not."""
    first = train(tiny_config(tiny_bank, tmp_path / "a"))
    still = dict(lr=1e-12, seed=1)
    tuned = train(tiny_config(tiny_bank, tmp_path / "b", init_from=str(first.checkpoint), **still))
    fresh = train(tiny_config(tiny_bank, tmp_path / "c", **still))
    start = load_model(first.checkpoint).state_dict()
    for key, value in load_model(tuned.checkpoint).state_dict().items():
        assert torch.allclose(value, start[key], atol=1e-6), key
    assert not all(torch.allclose(value, start[key], atol=1e-6)
                   for key, value in load_model(fresh.checkpoint).state_dict().items())
    wider = FMHyperParameters(hidden=16, history_points=16, width=16, time_dim=8)
    with pytest.raises(ValueError, match="its architecture differs from this run's: hidden 16 here, 8 there"):
        train(tiny_config(tiny_bank, tmp_path / "d", init_from=str(first.checkpoint), model=wider))
