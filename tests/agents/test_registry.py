"""``make_policy``: every method by name plays the Gymnasium env, workload files and both PettingZoo envs."""

from __future__ import annotations

import numpy as np
import pytest

import mara_agents
import mara_env
from mara_agents import NodeActor, make_policy
from mara_agents.play.lockstep import evaluate_workload

from conftest import SHORT_WINDOW


@pytest.fixture()
def policies(trained, fm_checkpoint):
    return {
        "mara-wls": make_policy("mara-wls", checkpoint=trained.checkpoint),
        "mara-wls-sampled": make_policy("mara-wls", checkpoint=trained.checkpoint, sample=True),
        "lara": make_policy("lara"),
        "lara-fm": make_policy("lara-fm", fm_checkpoint=str(fm_checkpoint)),
        "slack-fm": make_policy("slack-fm", fm_checkpoint=str(fm_checkpoint)),
        "fifo": make_policy("fifo"),
        "edf": make_policy("edf"),
        "random": make_policy("random", seed=0),
    }


def test_registry_lists_every_method_of_the_paper():
    assert {"mara", "mara-wls", "mara-sparse", "lara", "lara-fm", "fifo", "edf", "random"} <= set(mara_agents.POLICIES)
    with pytest.raises(ValueError, match="unknown policy"):
        make_policy("oracle")


def test_a_missing_mat_checkpoint_is_a_clear_error(tmp_path):
    with pytest.raises(RuntimeError, match="not found"):
        make_policy("mara", checkpoint=tmp_path / "missing.pt")


def test_every_policy_plays_a_workload_file_without_a_wrapper(policies, bank_dir, short_file):
    for name, policy in policies.items():
        rows = evaluate_workload(policy, short_file, bank=bank_dir, episodes=[0], arrival_window=SHORT_WINDOW)
        assert rows[0]["conflicts"] == 0, name
        assert 0.0 <= rows[0]["success_rate"] <= 1.0, name


@pytest.mark.parametrize("name", ["mara-wls", "lara-fm"])
def test_policies_play_the_pettingzoo_aec_env_within_the_masks(policies, bank_dir, name):
    env = mara_env.env(bank=str(bank_dir), arrival_prob=0.2)
    env.reset(seed=0)
    actor = NodeActor(policies[name])
    actor.reset()
    for _ in range(7 * 60):
        agent = env.agent_selection
        observation, _, terminated, truncated, _ = env.last()
        action = None if terminated or truncated else actor.act(agent, observation)
        if action is not None:
            assert observation["action_mask"][action] == 1
        env.step(action)
    assert not env.terminations[env.agent_selection]


def test_policies_play_the_pettingzoo_parallel_env(policies, bank_dir):
    env = mara_env.parallel_env(bank=str(bank_dir), arrival_prob=0.2)
    observations, _ = env.reset(seed=1)
    actor = NodeActor(policies["mara-wls"])
    for _ in range(40):
        actions = actor.act_parallel(observations)
        observations, _, _, _, infos = env.step(actions)
        assert all(info["conflicts"] == 0 for info in infos.values())
    assert np.isfinite(list(actions.values())).all()


def test_playing_mara_imports_no_training_code():
    """A fresh interpreter builds and plays ``mara``: no PPO, rollout, training or config module is loaded."""
    import subprocess
    import sys

    script = ("import sys, gymnasium as gym\n"
              "from mara_agents import make_policy\n"
              "policy = make_policy('mara')\n"
              "env = gym.make('MARA-v0')\n"
              "observation, _ = env.reset(seed=0)\n"
              "env.step(policy.act(observation))\n"
              "print(' '.join(m for m in sys.modules if m.startswith('mara_agents')))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = set(done.stdout.split())
    assert "mara_agents.mat.policy" in loaded
    training = {f"mara_agents.mat.{name}" for name in ("train", "ppo", "rollout", "config", "validation")}
    assert not loaded & training, loaded & training


def test_the_abandoning_allocators_are_registered_as_needing_the_abandon_action(fm_checkpoint):
    from mara_agents.allocators.abandon import ABANDONING, AbandoningPolicy
    needing = {name for name, method in mara_agents.POLICIES.items() if method.abandon}
    assert needing == {*ABANDONING, "mat-il+abandon"}  # the hand-written rules and the learned policy
    for name, (_, _, _, chosen, room) in ABANDONING.items():
        policy = make_policy(name, fm_checkpoint=str(fm_checkpoint))
        assert isinstance(policy, AbandoningPolicy) and (policy.threshold, policy.make_room) == (chosen, room)
    assert make_policy("edf+abandon", threshold=1.5, make_room=False).threshold == 1.5
    with pytest.raises(TypeError, match="make_room must be True or False, got 1"):
        make_policy("edf+abandon", make_room=1)
    with pytest.raises(ValueError, match="threshold must be a positive number, got -1"):
        make_policy("edf+abandon", threshold=-1)


def test_the_cache_key_of_an_abandoning_allocator_follows_its_threshold():
    from mara_agents.evaluation.fingerprint import policy_fingerprint
    chosen, other = make_policy("edf+abandon"), make_policy("edf+abandon", threshold=1.5)
    assert policy_fingerprint(chosen) == policy_fingerprint(make_policy("edf+abandon"))
    assert policy_fingerprint(chosen) != policy_fingerprint(other)
