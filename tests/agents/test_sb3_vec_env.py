"""SB3's VecEnv over the native vector env plays exactly what SB3's own ``make_vec_env`` (a DummyVecEnv of single
envs) plays from the same seed: observations, rewards, dones, masks, terminal observations and episode metrics,
through several episodes per sub-env; and it refuses what it cannot serve."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from stable_baselines3.common.env_util import make_vec_env

import mara_env  # noqa: F401  (registers MARA-v0)
from mara_agents.envs.sb3_vec import SB3VectorEnv, make_sb3_vec_env

ENVS = 3
OPTIONS = {"observation": "flat", "conflicts": "repair", "arrival_window": 10}


def test_plays_what_sb3s_dummy_vec_env_plays(bank_dir):
    options = {**OPTIONS, "bank": str(bank_dir)}
    reference = make_vec_env("MARA-v0", n_envs=ENVS, seed=5, env_kwargs=options)
    native = make_sb3_vec_env("MARA-v0", ENVS, seed=5, **options)
    np.testing.assert_array_equal(native.reset(), reference.reset())
    rng = np.random.default_rng(0)
    ended = 0
    for _ in range(1500):
        masks = np.stack(native.env_method("action_masks"))
        np.testing.assert_array_equal(masks, np.stack(reference.env_method("action_masks")))
        actions = rng.integers(0, 11, size=(ENVS, 7))
        got, expected = native.step(actions), reference.step(actions)
        for got_part, expected_part in zip(got[:3], expected[:3]):
            np.testing.assert_array_equal(got_part, expected_part)
        for got_info, expected_info in zip(got[3], expected[3]):
            assert ("terminal_observation" in got_info) == ("terminal_observation" in expected_info)
            if "terminal_observation" in got_info:
                ended += 1
                np.testing.assert_array_equal(got_info["terminal_observation"], expected_info["terminal_observation"])
                np.testing.assert_equal(got_info["episode_metrics"], expected_info["episode_metrics"])
                assert got_info["task_outcomes"] == expected_info["task_outcomes"]
                assert got_info["episode"]["l"] == expected_info["episode"]["l"]
                assert got_info["TimeLimit.truncated"] == expected_info["TimeLimit.truncated"]
            assert got_info["successes"] == expected_info["successes"]
        if ended >= 2 * ENVS:
            break
    assert ended >= 2 * ENVS, ended  # every sub-env went through same-step resets


def test_refuses_a_vector_env_that_resets_by_itself_and_unknown_methods(bank_dir):
    with pytest.raises(ValueError, match="autoreset_mode"):
        SB3VectorEnv(gym.make_vec("MARA-v0", num_envs=2, vectorization_mode="vector_entry_point",
                                  bank=str(bank_dir)))
    env = make_sb3_vec_env("MARA-v0", 2, seed=0, **OPTIONS, bank=str(bank_dir))
    env.reset()
    with pytest.raises(AttributeError, match="action_masks"):
        env.env_method("render")
