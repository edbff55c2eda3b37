"""The third-party MaskablePPO baseline: the training command writes a checkpoint and manifest, and the registered
policy plays the default env (dict observation, the paper's conflict rule) as the trained model plays the env it
was trained on, without conflicts and the same way every time."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest
import torch

from mara_agents import make_policy
from mara_agents.play.checkpoints import CheckpointError
from mara_agents.allocators.registry import POLICIES
from mara_agents.allocators.third_party import maskable_ppo_checkpoint
from mara_agents.evaluation import methods
from mara_agents.evaluation.fingerprint import policy_fingerprint
from mara_agents.play.lockstep import evaluate_workload

from conftest import SHORT_WINDOW

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sb3_maskable_ppo.py"
SMOKE = ["--steps", "256", "--n-steps", "64", "--n-envs", "2", "--episodes", "1", "--arrival-window", "20"]


def recipe():
    spec = importlib.util.spec_from_file_location("example_sb3_maskable_ppo", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def smoke_run(bank_dir, tmp_path_factory):
    """The training command's smoke path, run twice with seed 3 into two directories."""
    outs = [tmp_path_factory.mktemp(f"mppo{i}") for i in range(2)]
    for out in outs:
        recipe().main([*SMOKE, "--bank", str(bank_dir), "--seed", "3", "--out", str(out),
                       "--logdir", str(tmp_path_factory.mktemp("tensorboard"))])
    return outs


def test_training_command_writes_a_loadable_checkpoint_and_its_manifest(smoke_run):
    out = smoke_run[0]
    assert sorted(p.name for p in out.iterdir()) == ["maskable_ppo_seed3.json", "maskable_ppo_seed3.zip"]
    manifest = json.loads((out / "maskable_ppo_seed3.json").read_text())
    assert manifest["seed"] == 3 and manifest["steps"] == 256 and manifest["env_steps"] >= 256
    assert manifest["env_options"]["conflicts"] == "repair" and manifest["env_options"]["observation"] == "flat"
    assert manifest["env_options"]["curve_splits"] == ["train", "val"]
    assert manifest["env_steps_per_s"] > 0 and manifest["versions"]["sb3-contrib"]
    assert manifest["command"].startswith("python examples/sb3_maskable_ppo.py --steps 256")
    from mara_env.workload import file_checksum
    assert manifest["checkpoint_sha256"] == file_checksum(out / "maskable_ppo_seed3.zip")
    make_policy("maskable-ppo", checkpoint=out / "maskable_ppo_seed3.zip")


def test_the_same_seed_trains_the_same_network(smoke_run):
    first, second = (make_policy("maskable-ppo", checkpoint=out / "maskable_ppo_seed3.zip").network.state_dict()
                     for out in smoke_run)
    assert first.keys() == second.keys()
    assert all(torch.equal(first[name], second[name]) for name in first)


def test_the_policy_plays_the_default_env_as_the_model_plays_the_repair_env(smoke_run, short_file, bank_dir):
    from sb3_contrib import MaskablePPO

    zip_path = smoke_run[0] / "maskable_ppo_seed3.zip"
    policy_rows = evaluate_workload(make_policy("maskable-ppo", checkpoint=zip_path), short_file, bank=bank_dir,
                                    arrival_window=SHORT_WINDOW)
    model_rows = recipe().evaluate(MaskablePPO.load(zip_path), [0, 1], workload=str(short_file),
                                   bank=str(bank_dir), arrival_window=SHORT_WINDOW)
    for played, trained in zip(policy_rows, model_rows, strict=True):
        assert played["conflicts"] == 0
        assert {key: played[key] for key in trained if key != "repaired"} == \
            {key: trained[key] for key in trained if key != "repaired"}


@pytest.mark.parametrize("seed", POLICIES["maskable-ppo"].seeds)
def test_shipped_checkpoints_play_a_workload_without_conflicts_the_same_way_twice(seed, short_file, bank_dir):
    rows = [evaluate_workload(make_policy("maskable-ppo", seed=seed), short_file, bank=bank_dir,
                              arrival_window=SHORT_WINDOW) for _ in range(2)]
    assert rows[0] == rows[1]
    assert all(row["conflicts"] == 0 and row["utilisation"] > 0 for row in rows[0])


def test_the_fingerprint_hashes_the_checkpoint_bytes(tmp_path):
    copy = tmp_path / "maskable_ppo_seed0.zip"
    shutil.copy(maskable_ppo_checkpoint(0), copy)
    policy = make_policy("maskable-ppo", checkpoint=copy, verify=False)  # a bare copy: no manifest beside it
    before = policy_fingerprint(policy)
    with copy.open("ab") as handle:
        handle.write(b"\0")
    assert policy_fingerprint(policy) != before


def test_a_checkpoint_that_differs_from_its_manifest_is_refused(tmp_path):
    shipped = maskable_ppo_checkpoint(0)
    copy = tmp_path / shipped.name
    shutil.copy(shipped, copy)
    shutil.copy(shipped.with_suffix(".json"), copy.with_suffix(".json"))
    with copy.open("ab") as handle:
        handle.write(b"\0")
    with pytest.raises(CheckpointError, match=r"maskable_ppo_seed0\.zip: MaskablePPO checkpoint is corrupt"):
        make_policy("maskable-ppo", checkpoint=copy)


def test_without_sb3_contrib_the_evaluation_skips_the_method_naming_why(monkeypatch):
    monkeypatch.setitem(sys.modules, "sb3_contrib", None)  # import sb3_contrib now fails
    monkeypatch.setattr(methods, "_BUILT", {})
    availability = methods.probe("maskable-ppo", 0)
    assert availability.fingerprint is None
    assert availability.reason.startswith("ModuleNotFoundError") and "sb3-contrib" in availability.reason


def test_an_env_of_another_shape_is_refused_naming_the_checkpoint(bank_dir):
    import gymnasium as gym

    policy = make_policy("maskable-ppo", seed=0)
    for shape, has in (({"num_nodes": 3}, "3 nodes and 10 slots"), ({"max_active": 6}, "7 nodes and 6 slots")):
        observation, _ = gym.make("MARA-v0", bank=str(bank_dir), **shape).reset(seed=0)
        trained = r"seed0\.zip was trained for 7 nodes and 10 slots"
        with pytest.raises(ValueError, match=rf"{trained}, the observation has {has}"):
            policy.act(observation)


def test_the_played_network_is_the_trained_policy_with_its_weights(smoke_run):
    from sb3_contrib import MaskablePPO

    zip_path = smoke_run[0] / "maskable_ppo_seed3.zip"
    played = make_policy("maskable-ppo", checkpoint=zip_path).network
    trained = MaskablePPO.load(zip_path).policy
    assert type(played) is type(trained) and not played.training
    assert str(played) == str(trained)  # the same layers, in the same order
    first, second = played.state_dict(), trained.state_dict()
    assert first.keys() == second.keys() and all(torch.equal(first[name], second[name]) for name in first)


def test_playing_builds_no_torch_optimizer():
    """An optimizer imports torch._dynamo and SymPy (about 70 MiB in every evaluation process playing it)."""
    import subprocess

    code = ("import sys; from mara_agents import make_policy; make_policy('maskable-ppo', seed=0); "
            "print('torch._dynamo' in sys.modules, 'sympy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.split() == ["False", "False"]
