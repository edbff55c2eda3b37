"""The Gymnasium front end: registration, API conformance, vector envs, action checking, rendering."""

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import mara_env  # noqa: F401
from mara_agents.allocators.naive import FIFOPolicy


def test_both_ids_make_the_env(bank_dir):
    assert gym.make("MARA-v0", bank=str(bank_dir)).unwrapped.__class__.__name__ == "MARAEnv"
    assert gym.make("mara_env:MARA-v0", bank=str(bank_dir)).unwrapped.__class__.__name__ == "MARAEnv"


def test_check_env_passes_without_warnings(bank_dir):
    env = gym.make("MARA-v0", bank=str(bank_dir), arrival_prob=0.2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # The checker also makes a render_mode="human" env; without a display that one warns by design.
        warnings.filterwarnings("ignore", message="render_mode='human' shows nothing", category=UserWarning)
        check_env(env.unwrapped, skip_render_check=False)


def test_observation_matches_contract(bank_dir):
    env = gym.make("MARA-v0", bank=str(bank_dir), arrival_prob=0.3)
    obs, info = env.reset(seed=1)
    assert set(info) == {"successes", "expirations", "conflicts"}
    assert obs["action_mask"].dtype == np.int8 and obs["action_mask"].shape == (7, 11)
    assert np.all(obs["action_mask"][:, 0] == 1)
    present = obs["tasks"][:, 0] > 0
    assert np.array_equal(obs["action_mask"][0, 1:].astype(bool), present)
    assert np.all(obs["tasks"][~present] == 0)
    assert env.observation_space.contains(obs)


def test_observations_are_fresh_arrays(bank_dir):
    env = gym.make("MARA-v0", bank=str(bank_dir), arrival_prob=0.3)
    first, _ = env.reset(seed=2)
    first["history"][:] = -1.0
    second, *_ = env.step(np.zeros(7, dtype=np.int64))
    assert np.all(second["history"] >= 0)


@pytest.mark.parametrize("action", [np.zeros(6, dtype=int), np.zeros((7, 1), dtype=int), [0] * 8])
def test_wrong_shape_raises(bank_dir, action):
    env = gym.make("MARA-v0", bank=str(bank_dir), disable_env_checker=True)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="shape"):
        env.step(action)


@pytest.mark.parametrize("action", [[11, 0, 0, 0, 0, 0, 0], [-1, 0, 0, 0, 0, 0, 0]])
def test_out_of_range_raises(bank_dir, action):
    env = gym.make("MARA-v0", bank=str(bank_dir), disable_env_checker=True)
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"\[0, 10\]"):
        env.step(np.array(action))


def test_conflicts_become_idle_and_are_counted(bank_dir):
    env = gym.make("MARA-v0", bank=str(bank_dir), arrival_prob=1.0, disable_env_checker=True)
    obs, _ = env.reset(seed=0)
    occupied = np.flatnonzero(obs["tasks"][:, 0]) + 1
    empty = np.flatnonzero(obs["tasks"][:, 0] == 0)
    action = np.array([occupied[0], occupied[0], occupied[0], 0, 0, 0, 0])
    if empty.size:
        action[3] = empty[0] + 1
    _, _, _, _, info = env.step(action)
    assert info["conflicts"] == 2 + int(empty.size > 0)


def test_action_masks_flat_for_maskable_ppo(bank_dir):
    env = gym.make("MARA-v0", bank=str(bank_dir), arrival_prob=0.3)
    obs, _ = env.reset(seed=3)
    flat = env.unwrapped.action_masks()
    assert flat.dtype == bool and flat.shape == (7 * 11,)
    assert np.array_equal(flat, obs["action_mask"].astype(bool).reshape(-1))


def test_ansi_render_lists_slots(bank_dir):
    env = gym.make("MARA-v0", bank=str(bank_dir), arrival_prob=1.0, render_mode="ansi")
    obs, _ = env.reset(seed=0)
    env.step(FIFOPolicy().act(obs))
    text = env.render()
    assert "slot" in text and "queue=" in text and "toy_" in text


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_make_vec_keeps_masks_after_autoreset(bank_dir, mode):
    envs = gym.make_vec("MARA-v0", num_envs=4, vectorization_mode=mode,
                        vector_kwargs={} if mode == "sync" else {"context": "fork"},
                        bank=str(bank_dir), arrival_window=20, arrival_prob=0.3)
    obs, _ = envs.reset(seed=0)
    ends = 0
    for _ in range(400):  # window 20 + budgets <= 315: every sub-env ends at least once
        obs, _, terminated, truncated, _ = envs.step(np.zeros((4, 7), dtype=np.int64))
        ends += int(np.sum(terminated | truncated))
        assert obs["action_mask"].shape == (4, 7, 11)
        assert np.all(obs["action_mask"][:, :, 0] == 1)
    envs.close()
    assert ends > 0
