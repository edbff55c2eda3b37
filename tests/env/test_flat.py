"""The ``flat`` and ``rllib`` observations: layout, normalised history, dtypes and masks in every front end."""

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from pettingzoo.test import api_test, parallel_api_test

import mara_env
from mara_env.features import NUM_GLOBAL_FEATURES, NUM_TASK_FEATURES
from mara_env.flat import flat_size, flatten_observation, history_log_ratios


def test_history_block_holds_log_ratios_of_earlier_losses_to_the_current_one():
    history = np.array([[4.0, 2.0, 1.0, 0.0], [3.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]], dtype=np.float32)
    ratios = history_log_ratios(history, np.array([3, 1, 0]), points=3)
    assert ratios.dtype == np.float32 and ratios.shape == (3, 3)
    assert np.allclose(ratios[0], [np.log(2.0), np.log(4.0), 0.0])  # L(2)/L(3), L(1)/L(3), none
    assert np.all(ratios[1:] == 0.0)  # one point has no earlier point; an empty slot has none at all


def test_flat_vector_lays_out_slots_then_global(bank_dir):
    env = gym.make("MARA-v0", bank=str(bank_dir), arrival_prob=0.5)
    obs, _ = env.reset(seed=2)
    for _ in range(20):
        obs, *_ = env.step(np.array([1, 2, 3, 0, 0, 0, 0]))
    flat = flatten_observation(obs, points=5)
    per_slot = NUM_TASK_FEATURES + 5
    assert flat.shape == (flat_size(10, 5),) == (10 * per_slot + NUM_GLOBAL_FEATURES,)
    assert np.array_equal(flat[:NUM_TASK_FEATURES], obs["tasks"][0])
    assert np.array_equal(flat[per_slot:per_slot + NUM_TASK_FEATURES], obs["tasks"][1])
    assert np.array_equal(flat[-NUM_GLOBAL_FEATURES:], obs["global"])
    assert np.any(flat[NUM_TASK_FEATURES:per_slot] > 0)  # slot 0 was served: its loss fell


def test_flatten_accepts_a_batch(bank_dir):
    env = gym.make("MARA-v0", bank=str(bank_dir), arrival_prob=0.5)
    observations = []
    obs, _ = env.reset(seed=4)
    for _ in range(3):
        obs, *_ = env.step(np.array([1, 2, 0, 0, 0, 0, 0]))
        observations.append(obs)
    stacked = {key: np.stack([o[key] for o in observations]) for key in observations[0]}
    one_by_one = np.stack([flatten_observation(o, 8) for o in observations])
    assert np.array_equal(flatten_observation(stacked, 8), one_by_one)


@pytest.mark.parametrize(("observation", "actions"), [("flat", "picks"), ("rllib", "picks"), ("flat", "scores")])
def test_gym_env_passes_the_checker(bank_dir, observation, actions):
    env = gym.make("MARA-v0", bank=str(bank_dir), arrival_prob=0.2, observation=observation, flat_history=4,
                   actions=actions)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped, skip_render_check=True)


def test_gym_flat_is_a_compact_float32_box(bank_dir):
    env = gym.make("MARA-v0", bank=str(bank_dir), observation="flat", flat_history=16)
    obs, _ = env.reset(seed=0)
    assert env.observation_space.dtype == np.float32 and obs.dtype == np.float32
    assert obs.shape == (10 * (11 + 16) + 4,)
    assert gym.wrappers.FlattenObservation(env).observation_space.dtype == np.float32
    assert env.unwrapped.action_masks().shape == (7 * 11,)


def test_gym_rllib_format_carries_the_flat_vector_and_mask(bank_dir):
    env = gym.make("MARA-v0", bank=str(bank_dir), arrival_prob=0.5, observation="rllib")
    flat_env = gym.make("MARA-v0", bank=str(bank_dir), arrival_prob=0.5, observation="flat")
    obs, _ = env.reset(seed=1)
    flat, _ = flat_env.reset(seed=1)
    assert set(obs) == {"observations", "action_mask"}
    assert np.array_equal(obs["observations"], flat)
    assert np.array_equal(obs["action_mask"].astype(bool), env.unwrapped.action_masks())


@pytest.mark.parametrize("observation", ["flat", "rllib"])
def test_pettingzoo_envs_pass_the_api_tests(bank_dir, observation):
    api_test(mara_env.env(bank=str(bank_dir), arrival_prob=0.3, observation=observation), num_cycles=100)
    parallel_api_test(mara_env.parallel_env(bank=str(bank_dir), arrival_prob=0.3, observation=observation),
                      num_cycles=100)


def test_parallel_flat_appends_the_node_one_hot_and_puts_the_mask_in_infos(bank_dir):
    env = mara_env.parallel_env(bank=str(bank_dir), arrival_prob=0.5, observation="flat")
    gym_env = gym.make("MARA-v0", bank=str(bank_dir), arrival_prob=0.5, observation="flat")
    observations, infos = env.reset(seed=5)
    shared, _ = gym_env.reset(seed=5)
    for i, agent in enumerate(env.possible_agents):
        assert np.array_equal(observations[agent][:shared.size], shared)
        assert np.array_equal(observations[agent][shared.size:], np.eye(7, dtype=np.float32)[i])
        assert infos[agent]["action_mask"].dtype == np.int8
        assert np.array_equal(infos[agent]["action_mask"].astype(bool), gym_env.unwrapped.action_masks()[:11])


def test_aec_flat_mask_in_infos_excludes_slots_taken_earlier_in_the_cycle(bank_dir):
    env = mara_env.env(bank=str(bank_dir), arrival_prob=1.0, observation="flat")
    env.reset(seed=0)
    for _ in range(7 * 3):  # three idle cycles let tasks in
        env.step(0)
    first = env.last()[4]["action_mask"].copy()
    slot = int(np.flatnonzero(first[1:])[0]) + 1
    env.step(slot)
    second = env.last()[4]["action_mask"]
    assert env.agent_selection == "node_1" and first[slot] == 1 and second[slot] == 0


@pytest.mark.parametrize("observation", ["flat", "rllib"])
def test_aec_flat_vector_follows_the_state_through_steps_and_resets(bank_dir, observation):
    """Every node turn sees the flat vector of the state it acts in (the env computes it once per state), as
    a new array: the same vector as the Gymnasium env playing the same picks, plus the node's one-hot."""
    kwargs = {"bank": str(bank_dir), "arrival_prob": 0.5, "observation": "flat"}
    env = mara_env.env(**{**kwargs, "observation": observation})
    gym_env = gym.make("MARA-v0", disable_env_checker=True, **kwargs)
    rng = np.random.default_rng(0)
    for seed in (3, 4):  # a second episode: the vector must not carry over from the first
        env.reset(seed=seed)
        shared, _ = gym_env.reset(seed=seed)
        for _ in range(12):
            picks = rng.integers(0, 11, size=7)
            for node, agent in enumerate(env.possible_agents):
                view = env.observe(agent)
                vector = view if observation == "flat" else view["observations"]
                np.testing.assert_array_equal(vector[:shared.size], shared)
                np.testing.assert_array_equal(vector[shared.size:], np.eye(7, dtype=np.float32)[node])
                vector[:] = -1.0  # a caller's change reaches no later view
                env.step(int(picks[node]))
            shared, *_ = gym_env.step(picks)
