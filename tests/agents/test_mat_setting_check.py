"""A MAT policy refuses to play an env of another setting than the one its checkpoint records."""

from __future__ import annotations

import os

import gymnasium as gym
import numpy as np
import pytest

import mara_env  # noqa: F401  (registers MARA-v0)
from mara_agents.mat.policy import load_mat_policy
from mara_agents.evaluation.fingerprint import policy_fingerprint
from mara_agents.mat.checkpoint import export_policy
from mara_agents.mat.ensemble import load_mat_ensemble
from mara_agents.mat.model import MATModel
from mara_agents.mat.setting import Setting
from mara_agents.play.lockstep import play_episode
from mara_env.features import TASK_FEATURE_INDEX

from conftest import SHORT_WINDOW, tiny_config

SPEEDS = (1, 1, 1, 2, 2, 2, 4)
TRAINED = Setting(7, SPEEDS, 2)


def _first_observation(bank_dir, short_file, **options):
    """The first observation with a task of a short episode played with the env ``options``."""
    env = gym.make("MARA-v0", bank=str(bank_dir), workload=str(short_file), arrival_window=SHORT_WINDOW, **options)
    obs, _ = env.reset(options={"episode": 0})
    while not obs["tasks"][:, TASK_FEATURE_INDEX["present"]].any():
        obs, *_ = env.step(np.zeros(7, dtype=np.int64))
    return obs


def _checkpoint(bank_dir, path, **options):
    """An untrained policy exported for the setting of the env ``options``."""
    config = tiny_config(bank_dir, path.parent / "run", **options)
    export_policy(path, MATModel(config.hparams()), "wls", {}, config.setting)
    return path


def test_an_observation_shows_the_settings_it_contradicts(bank_dir, short_file):
    costly = _first_observation(bank_dir, short_file, node_speeds=SPEEDS, switch_cost=2)
    default = _first_observation(bank_dir, short_file)
    assert TRAINED.contradiction(costly) is None and Setting().contradiction(default) is None
    assert Setting(7, SPEEDS, 1).contradiction(costly) == "num_nodes=7, node_speeds=1,1,1,2,2,2,4, switch_cost=2"
    assert Setting().contradiction(costly) == "num_nodes=7, node_speeds=1,1,1,2,2,2,4, switch_cost=2"
    assert TRAINED.contradiction(default) == "num_nodes=7, node_speeds=all 1, switch_cost=0"
    assert Setting(4).contradiction(default) == "num_nodes=7, node_speeds=all 1, switch_cost=0"
    # No task shows c in full: only that it is at least the setup counts shown (2 here).
    unseen = {**costly, "tasks": np.zeros_like(costly["tasks"])}
    assert TRAINED.contradiction(unseen) is None and Setting(7, SPEEDS, 5).contradiction(unseen) is None
    assert Setting(7, SPEEDS, 1).contradiction(unseen) == "num_nodes=7, node_speeds=1,1,1,2,2,2,4, switch_cost>=2"
    quiet = {**unseen, "slot_nodes": np.zeros_like(costly["slot_nodes"])}
    assert Setting(7, switch_cost=1).contradiction(quiet) == "num_nodes=7, node_speeds=1,1,1,2,2,2,4, switch_cost>=0"


def test_a_policy_plays_only_the_setting_its_checkpoint_records(bank_dir, short_file, tmp_path):
    path = _checkpoint(bank_dir, tmp_path / "c2.pt", node_speeds=SPEEDS, switch_cost=2)
    policy = load_mat_policy(path)
    episode = dict(workload=str(short_file), bank=str(bank_dir), arrival_window=SHORT_WINDOW)
    assert play_episode(policy, 0, node_speeds=SPEEDS, switch_cost=2, **episode)["conflicts"] == 0
    for options, env in (({"node_speeds": SPEEDS, "switch_cost": 1}, "switch_cost=1"), ({}, "switch_cost=0")):
        with pytest.raises(ValueError, match=f"{path} was trained in {TRAINED.describe()}; the env it is asked to "
                                             f"play has .*{env}: play it with --num-nodes 7 --node-speeds"):
            play_episode(policy, 0, **options, **episode)
    ensemble = load_mat_ensemble([path, path])
    with pytest.raises(ValueError, match=f"{path}\\+{path} was trained in .*switch_cost=2;"):
        play_episode(ensemble, 0, node_speeds=SPEEDS, switch_cost=1, **episode)


def test_a_default_checkpoint_refuses_node_options_and_plays_the_default_env(bank_dir, short_file, tmp_path):
    policy = load_mat_policy(_checkpoint(bank_dir, tmp_path / "default.pt"))
    episode = dict(workload=str(short_file), bank=str(bank_dir), arrival_window=SHORT_WINDOW)
    assert play_episode(policy, 0, **episode)["conflicts"] == 0
    with pytest.raises(ValueError, match="switch_cost=0; the env it is asked to play has .*switch_cost(=2|>=1):"):
        play_episode(policy, 0, switch_cost=2, **episode)


def test_the_checkpoint_names_kept_for_the_error_leave_the_evaluation_cache_key_content_based(bank_dir, tmp_path):
    path = _checkpoint(bank_dir, tmp_path / "c2.pt", node_speeds=SPEEDS, switch_cost=2)
    spelled = os.path.relpath(path)
    assert policy_fingerprint(load_mat_policy(path)) == policy_fingerprint(load_mat_policy(spelled))
    ensemble = load_mat_ensemble([path, path])
    assert policy_fingerprint(ensemble) == policy_fingerprint(load_mat_ensemble(f"{spelled}+{path}"))
