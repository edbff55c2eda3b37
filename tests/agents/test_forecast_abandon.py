"""MARA-Forecast-v0 with ``abandon=True``: the forecast env takes MARA-v0's abandon action in every front end, the
checkers pass, and its native vector env plays the same trajectories as SyncVectorEnv."""

import functools
import warnings

import gymnasium as gym
import numpy as np
from gymnasium.utils.env_checker import check_env
from pettingzoo.test import api_test, parallel_api_test, seed_test

import mara_agents  # noqa: F401  (registers MARA-Forecast-v0)
from mara_agents.envs.forecast import env, parallel_env
from vector_compare import play_both

SMALL = {"arrival_window": 40, "arrival_prob": 0.3, "num_nodes": 3, "max_active": 4, "abandon": True}


def test_check_env_passes_and_the_action_space_has_the_abandon_choices(bank_dir):
    made = gym.make("MARA-Forecast-v0", bank=str(bank_dir), predictor="wls", **SMALL)
    assert made.action_space == gym.spaces.MultiDiscrete([9, 9, 9])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(made.unwrapped, skip_render_check=True)


def test_pettingzoo_checkers_pass_with_abandon(bank_dir):
    settings = {"bank": str(bank_dir), "predictor": "wls", **SMALL}
    api_test(env(**settings), num_cycles=100)
    parallel_api_test(parallel_env(**settings), num_cycles=100)
    seed_test(functools.partial(env, **settings), num_cycles=30)


def test_native_vector_env_matches_sync_vector_env_with_abandon(bank_dir):
    num_envs = 2
    native = gym.make_vec("MARA-Forecast-v0", num_envs=num_envs, vectorization_mode="vector_entry_point",
                          bank=str(bank_dir), predictor="wls", **SMALL)
    reference = gym.make_vec("MARA-Forecast-v0", num_envs=num_envs, vectorization_mode="sync", bank=str(bank_dir),
                             predictor="wls", **SMALL)
    rng = np.random.default_rng(1)

    def choose(obs):
        return np.where(rng.random((num_envs, 3)) < 0.02, rng.integers(5, 9, (num_envs, 3)),
                        rng.integers(0, 5, (num_envs, 3)))

    play_both(native, reference, choose, 150, {"seed": 3})
