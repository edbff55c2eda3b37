"""The training loop end to end on the synthetic bank: export, manifest, resume, CLI."""

from __future__ import annotations

import json

import pytest
import torch

import train as train_cli
from mara_agents.play.checkpoints import load_run_state
from mara_agents.mat.checkpoint import load_policy_model
from mara_agents.training.config import parse_config
from mara_agents.training.train import train
from mara_env.workload import load_workload

from conftest import tiny_config

pytestmark = pytest.mark.long  # started first by make test (tests/conftest.py)


def test_training_exports_the_best_validated_policy_with_a_manifest(trained):
    model, predictor = load_policy_model(trained.checkpoint)
    manifest = json.loads(trained.checkpoint.with_suffix(".json").read_text())
    assert predictor == "wls" and model.hparams.dim == 16
    scores = manifest["validation_scores"]
    best = max(scores, key=lambda entry: entry["success_rate"])  # max() keeps the first of equal scores
    assert [entry["step"] for entry in scores] == [20, 40, 60][:len(scores)] and len(scores) >= 1
    assert manifest["method"] == "mara-wls" and manifest["step"] == best["step"] == scores[-1]["step"]
    assert all(0.0 <= entry["success_rate"] <= 1.0 for entry in scores)
    assert manifest["config"]["env"]["arrival_prob"] == 0.04 and manifest["data"]["curve_splits"] == ["train", "val"]
    assert trained.global_step == 60
    final = load_run_state(trained.checkpoint.parent / "last.pt")["validation"]
    assert [step for step, _ in final] == [20, 40, 60]


def test_the_validation_workloads_use_only_val_curves(trained, bank_dir):
    mixture = load_workload(trained.checkpoint.parent / "validation.json")
    stress = load_workload(trained.checkpoint.parent / "validation_stress.json")
    assert mixture.task_set == "id" and stress.task_set == "stress"
    for workload in (mixture, stress):
        assert all("/val/" in curve for episode in workload.episodes for curve in episode.curve)


def test_the_learning_rate_decays_linearly_to_zero(trained):
    state = load_run_state(trained.checkpoint.parent / "last.pt")
    config = state["config"]
    # The last update started at env step 40 of 60.
    assert state["optimizer"]["param_groups"][0]["lr"] == pytest.approx(config["ppo"]["lr"] * (1 - 40 / 60))


def test_validation_can_be_switched_off(bank_dir, tmp_path):
    result = train(tiny_config(bank_dir, tmp_path / "run", steps=20, validate_every=0))
    manifest = json.loads(result.checkpoint.with_suffix(".json").read_text())
    assert manifest["step"] == 20 and manifest["validation_scores"] == []
    assert not (tmp_path / "run" / "validation.json").exists()


def test_a_killed_run_resumes_from_its_last_checkpoint(bank_dir, tmp_path, capsys):
    run = tmp_path / "run"
    first = train(tiny_config(bank_dir, run, steps=20, snapshot_every=20))  # stands in for a run killed at 20
    assert sorted(p.name for p in (run / "snapshots").glob("*.pt")) == ["step_20.pt"]
    assert load_run_state(run / "last.pt")["global_step"] == 20
    resumed = train(tiny_config(bank_dir, run, steps=40, snapshot_every=20))
    assert "resumed" in capsys.readouterr().out
    assert resumed.global_step == 40 and first.global_step == 20
    assert load_run_state(run / "last.pt")["update"] == 2
    assert sorted(p.name for p in (run / "snapshots").glob("*.pt")) == ["step_20.pt", "step_40.pt"]


def test_snapshots_include_the_last_step(bank_dir, tmp_path):
    # 60 steps with snapshots every 40: the last step (60) is not a multiple, and is the policy a user wants.
    train(tiny_config(bank_dir, tmp_path / "run", steps=60, snapshot_every=40, validate_every=0))
    assert sorted(p.name for p in (tmp_path / "run" / "snapshots").glob("*.pt")) == ["step_40.pt", "step_60.pt"]


def test_resuming_with_different_training_settings_is_refused(bank_dir, tmp_path):
    run = tmp_path / "run"
    train(tiny_config(bank_dir, run, steps=20))
    with pytest.raises(ValueError, match="ppo.lr"):
        train(tiny_config(bank_dir, run, steps=40, lr=1e-3))


def test_the_cli_is_generated_from_the_config_dataclass():
    config = parse_config(["--seed", "3", "--predictor", "wls", "--reward", "sparse", "--steps", "500",
                           "--no-resume"])
    assert (config.seed, config.predictor, config.env.reward, config.steps, config.resume) == (3, "wls", "sparse", 500,
                                                                                                 False)
    assert config.ppo.clip == 0.2 and config.ppo.value_coef == 1.0 and config.ppo.entropy_coef == 0.01
    assert config.ppo.gamma == 1.0 and config.ppo.gae_lambda == 0.95 and config.env.shaping_beta == 0.1
    assert config.ppo.epochs == 10  # what the shipped checkpoints were trained with (their manifests)
    nested = parse_config(["--clip", "0.3", "--arrival-prob", "0.05", "--dim", "32"])
    assert (nested.ppo.clip, nested.env.arrival_prob, nested.hparams().dim) == (0.3, 0.05, 32)


def test_train_py_dispatches_fm_to_the_predictor_trainer(monkeypatch, tmp_path):
    seen = []
    monkeypatch.setattr("mara_agents.predictors.train.train", seen.append)
    monkeypatch.setattr("mara_agents.predictors.train.describe", lambda result: "done")
    assert train_cli.main(["fm", "--max-steps", "500", "--run-dir", str(tmp_path / "fm")]) == 0
    assert [(config.max_steps, config.run_dir) for config in seen] == [(500, str(tmp_path / "fm"))]
    assert train_cli.main(["nonsense"]) == 2


def test_sparse_reward_trains_and_is_recorded(bank_dir, tmp_path):
    result = train(tiny_config(bank_dir, tmp_path / "run", reward="sparse", steps=20))
    manifest = json.loads(result.checkpoint.with_suffix(".json").read_text())
    assert manifest["method"] == "mara-wls-sparse" and manifest["config"]["env"]["reward"] == "sparse"
    assert torch.load(result.checkpoint, weights_only=True)["predictor"] == "wls"


def test_a_run_resumes_when_its_paths_are_spelled_differently(bank_dir, tmp_path, capsys):
    run = tmp_path / "run"
    train(tiny_config(bank_dir, run, steps=20, validate_every=0))
    respelled_bank = str(bank_dir.parent / "." / bank_dir.name)
    resumed = train(tiny_config(bank_dir, tmp_path / "." / "run", steps=40, validate_every=0, bank=respelled_bank))
    assert "resumed" in capsys.readouterr().out and resumed.global_step == 40


def test_a_finished_run_given_another_out_names_the_checkpoint_it_did_not_write(bank_dir, tmp_path, capsys):
    run, elsewhere = tmp_path / "run", tmp_path / "elsewhere.pt"
    first = train(tiny_config(bank_dir, run, steps=20))
    written = first.checkpoint.stat().st_mtime_ns
    capsys.readouterr()
    assert train_cli.main(["mat", "--predictor", "wls", "--steps", "20", "--validate-every", "20", "--validation-roots",
                           "1", "--validation-episodes", "1", "--validation-stress-episodes", "0", "--num-envs", "2",
                           "--rollout-steps", "10", "--checkpoint-every", "20", "--epochs", "2", "--minibatches", "2",
                           "--dim", "16", "--bank", str(bank_dir), "--run-dir", str(run), "--out", str(elsewhere)]) == 0
    out = capsys.readouterr().out
    assert "already finished at env step 20" in out and f"nothing was written to {elsewhere}" in out
    assert f"MAT checkpoint {first.checkpoint.resolve()} " in out and not elsewhere.exists()
    assert first.checkpoint.stat().st_mtime_ns == written
