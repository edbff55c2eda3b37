"""Invariants of the simulator under random (often conflicting) actions and random configurations."""

import gymnasium as gym
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mara_env  # noqa: F401
from mara_env.simulator import ABANDONED, EXPIRED, SUCCEEDED

configs = st.fixed_dictionaries({
    "num_nodes": st.integers(1, 8),
    "max_active": st.integers(1, 10),
    "arrival_prob": st.floats(0.0, 1.0),
    "arrival_window": st.integers(1, 40),
    "task_set": st.sampled_from(["id", "rl_ood", "vit_ood"]),
})
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def play(env, seed, action_seed):
    """Random raw actions (legal-shaped, often conflicting); returns per-step records and the final info."""
    rng = np.random.default_rng(action_seed)
    obs, _ = env.reset(seed=seed)
    sim = env.unwrapped.engine.sim
    choices, m = env.unwrapped.config.node_choices, env.unwrapped.config.num_nodes
    steps, total = [], 0.0
    while True:
        occupied_before = sim.slot_task.copy()
        action = rng.integers(0, choices, size=m)
        obs, reward, terminated, truncated, info = env.step(action)
        total += reward
        steps.append((action, occupied_before, sim.last_served, obs, reward))
        if terminated or truncated:
            return steps, total, info


@SETTINGS
@given(config=configs, seed=st.integers(0, 2**16), action_seed=st.integers(0, 2**16))
def test_matching_budget_and_single_ending(bank_dir, config, seed, action_seed):
    env = gym.make("MARA-v0", bank=str(bank_dir), disable_env_checker=True, **config)
    steps, _, info = play(env, seed, action_seed)
    sim = env.unwrapped.engine.sim
    for _, occupied_before, served, _, _ in steps:
        assert len(set(served)) == len(served), "a task got two nodes"
        assert all(occupied_before[slot] >= 0 for slot in served), "a node served an empty slot"
        assert len(served) <= config["num_nodes"]
    assert np.all(sim.batches <= sim.budget)
    assert np.all(np.isin(sim.status, [SUCCEEDED, EXPIRED])), "some task never ended"
    metrics = info["episode_metrics"]
    assert metrics["tasks"] == len(sim.episode)
    assert sim.totals["successes"] + sim.totals["expirations"] == len(sim.episode)


@SETTINGS
@given(config=configs, seed=st.integers(0, 2**16), action_seed=st.integers(0, 2**16))
def test_shaped_return_equals_success_count(bank_dir, config, seed, action_seed):
    env = gym.make("MARA-v0", bank=str(bank_dir), disable_env_checker=True, **config)
    _, total, info = play(env, seed, action_seed)
    assert abs(total - info["episode_metrics"]["successes"]) < 1e-9


@SETTINGS
@given(config=configs, seed=st.integers(0, 2**16), action_seed=st.integers(0, 2**16))
def test_sparse_and_shaped_share_trajectories(bank_dir, config, seed, action_seed):
    shaped = play(gym.make("MARA-v0", bank=str(bank_dir), disable_env_checker=True, **config), seed, action_seed)
    sparse = play(gym.make("MARA-v0", bank=str(bank_dir), disable_env_checker=True, reward="sparse", **config),
                  seed, action_seed)
    assert len(shaped[0]) == len(sparse[0])
    for (_, _, served_a, obs_a, _), (_, _, served_b, obs_b, reward_b) in zip(shaped[0], sparse[0]):
        assert served_a == served_b
        assert all(np.array_equal(obs_a[key], obs_b[key]) for key in obs_a)
        assert reward_b == int(reward_b)
    np.testing.assert_equal(shaped[2]["episode_metrics"], sparse[2]["episode_metrics"])  # NaN-aware


@SETTINGS
@given(config=configs, seed=st.integers(0, 2**16), action_seed=st.integers(0, 2**16))
def test_with_abandon_every_task_ends_once_and_the_return_is_the_success_count(bank_dir, config, seed, action_seed):
    env = gym.make("MARA-v0", bank=str(bank_dir), disable_env_checker=True, abandon=True, **config)
    _, total, info = play(env, seed, action_seed)
    sim = env.unwrapped.engine.sim
    assert np.all(np.isin(sim.status, [SUCCEEDED, EXPIRED, ABANDONED])), "some task never ended"
    totals = sim.totals
    assert totals["successes"] + totals["expirations"] + totals["abandoned"] == len(sim.episode)
    metrics = info["episode_metrics"]
    assert abs(total - metrics["successes"]) < 1e-9
    assert metrics["abandoned"] == np.count_nonzero(sim.status == ABANDONED)
    assert 0 <= metrics["abandoned_feasible"] <= metrics["abandoned"]
    # one batch per served node-step with the default node options
    assert metrics["wasted_node_steps"] == sim.batches[sim.status != SUCCEEDED].sum()


def test_same_seed_same_episode_actions_and_metrics(bank_dir):
    runs = []
    for _ in range(2):
        env = gym.make("MARA-v0", bank=str(bank_dir), arrival_prob=0.1, disable_env_checker=True)
        steps, total, info = play(env, seed=123, action_seed=7)
        runs.append((steps, total, info))
    (steps_a, total_a, info_a), (steps_b, total_b, info_b) = runs
    assert total_a == total_b and info_a == info_b and len(steps_a) == len(steps_b)
    for a, b in zip(steps_a, steps_b):
        assert np.array_equal(a[0], b[0]) and a[2] == b[2] and a[4] == b[4]
        assert all(np.array_equal(a[3][key], b[3][key]) for key in a[3])


def test_different_seeds_give_different_episodes(bank_dir):
    env = gym.make("MARA-v0", bank=str(bank_dir), arrival_prob=0.1, disable_env_checker=True)
    env.reset(seed=1)
    first = env.unwrapped.engine.sim.episode
    env.reset(seed=2)
    assert env.unwrapped.engine.sim.episode.curve != first.curve


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(config=configs, seed=st.integers(0, 2**16), action_seed=st.integers(0, 2**16))
def test_native_vector_env_matches_single_envs_under_random_configs(bank_dir, config, seed, action_seed):
    """Raw random actions (conflicts included) on N = 3: every observation, reward and info agrees."""
    native = gym.make_vec("MARA-v0", num_envs=3, vectorization_mode="vector_entry_point", bank=str(bank_dir),
                          **config)
    reference = gym.make_vec("MARA-v0", num_envs=3, vectorization_mode="sync", bank=str(bank_dir), **config)
    rng = np.random.default_rng(action_seed)
    for left, right in zip(native.reset(seed=seed), reference.reset(seed=seed)):
        np.testing.assert_equal(left, right)
    for _ in range(400):  # past the window and the longest budget: sub-envs end and autoreset
        actions = rng.integers(0, config["max_active"] + 1, size=(3, config["num_nodes"]))
        for left, right in zip(native.step(actions), reference.step(actions)):
            np.testing.assert_equal(left, right)  # nested dicts of arrays, NaN-aware
