"""MAT rollouts through the native vector env: the same rollouts, and the same trained parameters, as through
Gymnasium's SyncVectorEnv over N single envs (the per-environment path training used before)."""

from __future__ import annotations

import functools
import json

import pytest
import torch

import mara_agents.training.train as mat_train
from benchmarks import mat_bench as bench
from mara_agents.training.critic import PrivilegedCritic
from mara_agents.mat.model import MATHyperParameters, MATModel
from mara_agents.training.ppo import ValueNorm
from mara_agents.training.rollout import VectorRollout, make_training_envs
from mara_agents.predictors.demand import make_demand
from mara_env.config import MARAConfig

from conftest import tiny_config

pytestmark = pytest.mark.long  # started first by make test (tests/conftest.py)

# Few arrivals, all early: the synthetic bank's tasks have about 300 steps each, so episodes end after about
# 330 steps, within the tests' 360 steps per environment.
SHORT = {"arrival_window": 20, "arrival_prob": 0.3}


@pytest.mark.parametrize("privileged", [False, True], ids=["own-values", "privileged-critic"])
def test_rollouts_are_identical_through_both_vectorisations(bank_dir, privileged):
    config = MARAConfig(bank=str(bank_dir), **SHORT)
    collected = {}
    for mode in ("vector_entry_point", "sync"):
        torch.manual_seed(0)
        model = MATModel(MATHyperParameters(dim=16))
        rollout = VectorRollout(config, 2, make_demand("wls"), seed=(5, 0),
                                device=torch.device("cpu"), vectorization_mode=mode)
        generator = torch.Generator().manual_seed(1)
        critic = PrivilegedCritic(model.hparams) if privileged else None
        batches = [rollout.collect(model, ValueNorm(), 60, generator, critic) for _ in range(6)]
        collected[mode] = batches, rollout.drain_finished()
    (native, native_done), (sync, sync_done) = collected["vector_entry_point"], collected["sync"]
    assert len(native_done) >= 2 and native_done == sync_done  # returns and episode metrics, in order
    for left, right in zip(native, sync):
        for field in left.__dataclass_fields__:
            unset = field in ("advantages", "returns", "reference_log_probs")  # set when flattened for PPO
            if unset or field == "nodes" or (field == "privileged" and not privileged):  # nodes: node options
                assert getattr(left, field) is None and getattr(right, field) is None, field
            else:
                assert torch.equal(getattr(left, field), getattr(right, field)), field
    assert sum(float(batch.dones.sum()) for batch in native) == len(native_done)


@pytest.mark.parametrize("predictor", ["wls", "fm"])
def test_training_gives_bit_identical_parameters_through_both_vectorisations(bank_dir, fm_checkpoint, tmp_path,
                                                                             monkeypatch, predictor):
    weights, manifests = {}, {}
    for mode in ("vector_entry_point", "sync"):
        config = tiny_config(bank_dir, tmp_path / mode, predictor=predictor, fm_checkpoint=str(fm_checkpoint),
                             steps=720, validate_every=0, num_envs=2, rollout_steps=30, **SHORT)
        monkeypatch.setattr(mat_train, "VectorRollout", functools.partial(VectorRollout, vectorization_mode=mode))
        result = mat_train.train(config)
        weights[mode] = torch.load(result.checkpoint, weights_only=True)["state_dict"]
        manifests[mode] = json.loads(result.checkpoint.with_suffix(".json").read_text())
    native, sync = weights["vector_entry_point"], weights["sync"]
    assert native.keys() == sync.keys()
    assert all(torch.equal(native[key], sync[key]) for key in native)
    assert manifests["sync"]["train_episodes_in_that_mean"] >= 2  # resets happened along the way
    for key in ("train_episodes_in_that_mean", "train_success_rate_last_episodes"):
        assert manifests["vector_entry_point"][key] == manifests["sync"][key]


def test_an_unknown_vectorisation_is_refused(bank_dir):
    with pytest.raises(ValueError, match="vectorization_mode must be one of"):
        make_training_envs(MARAConfig(bank=str(bank_dir)), 2, "async")


def test_the_training_bench_prints_both_figures_per_setting(bank_dir, tmp_path, capsys):
    out = tmp_path / "bench.txt"
    status = bench.main(["--predictors", "wls", "--iterations", "1", "--warmup", "3", "--num-envs", "2",
                                "--rollout-steps", "4", "--bank", str(bank_dir), "--out", str(out)])
    assert status == 0
    lines = out.read_text().splitlines()
    assert lines[1].startswith("load average before:") and lines[-1].startswith("load average after:")
    figures = lines[2:-1]
    assert [line.split()[:3] for line in figures] == [["wls", mode, kind] for mode in ("vector_entry_point", "sync")
                                                      for kind in ("collection", "whole")]
    assert all("env steps/s wall" in line for line in figures)
    assert capsys.readouterr().out.splitlines() == lines


def test_the_training_bench_refuses_an_unknown_predictor(capsys):
    assert bench.main(["--predictors", "fm,lara"]) == 2
    assert "--predictors" in capsys.readouterr().err
