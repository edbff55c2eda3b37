"""The PettingZoo front ends pass PettingZoo's own tests and agree with the Gymnasium env."""

import functools
import types

import gymnasium as gym
import numpy as np
import pettingzoo
from pettingzoo.test import api_test, max_cycles_test, parallel_api_test, seed_test

import mara_env
from mara_agents.allocators.naive import FIFOPolicy, RandomPolicy
from mara_agents.play.policy import NodeActor


def test_aec_api(bank_dir):
    api_test(mara_env.env(bank=str(bank_dir), arrival_prob=0.3), num_cycles=300)


def test_parallel_api(bank_dir):
    parallel_api_test(mara_env.parallel_env(bank=str(bank_dir), arrival_prob=0.3), num_cycles=300)


def test_seed(bank_dir):
    seed_test(functools.partial(mara_env.env, bank=str(bank_dir), arrival_prob=0.3), num_cycles=50)


def test_max_cycles_truncates(bank_dir):
    module = types.SimpleNamespace(env=functools.partial(mara_env.env, bank=str(bank_dir)),
                                   parallel_env=functools.partial(mara_env.parallel_env, bank=str(bank_dir)))
    max_cycles_test(module)


def test_registered_with_pettingzoo_registry(bank_dir):
    aec = pettingzoo.make("aec", "MARA-v0", bank=str(bank_dir))
    par = pettingzoo.make("parallel", "MARA-v0", bank=str(bank_dir))
    assert aec.possible_agents == par.possible_agents == [f"node_{i}" for i in range(7)]


def test_aec_mask_excludes_slots_taken_by_earlier_nodes(bank_dir):
    env = mara_env.env(bank=str(bank_dir), arrival_prob=1.0)
    env.reset(seed=0)
    first = env.observe("node_0")["action_mask"]
    slot = int(np.flatnonzero(first[1:])[0]) + 1
    env.step(slot)
    second = env.observe("node_1")["action_mask"]
    assert first[slot] == 1 and second[slot] == 0
    assert second[0] == 1 and second.sum() == first.sum() - 1


def test_aec_views_are_new_arrays_a_caller_may_modify(bank_dir):
    env = mara_env.env(bank=str(bank_dir), arrival_prob=1.0)
    env.reset(seed=0)
    first = env.observe("node_0")
    occupied = env.unwrapped.engine.sim.slot_task >= 0
    assert first["action_mask"].tolist() == [1] + occupied.astype(int).tolist()
    assert "action_mask" not in first["observation"]
    before = {key: value.copy() for key, value in first["observation"].items()}
    first["action_mask"][:] = 0
    for value in first["observation"].values():
        value[...] = -7
    again = env.observe("node_0")
    assert again["action_mask"].tolist() == [1] + occupied.astype(int).tolist()
    for key, value in before.items():
        np.testing.assert_array_equal(again["observation"][key], value)


def _gym_trajectory(bank_dir, policy, seed):
    env = gym.make("MARA-v0", bank=str(bank_dir), arrival_prob=0.1, disable_env_checker=True)
    obs, _ = env.reset(seed=seed)
    policy.reset()
    actions, rewards = [], []
    while True:
        action = policy.act(obs)
        obs, reward, terminated, truncated, info = env.step(action)
        actions.append(action.tolist())
        rewards.append(reward)
        if terminated or truncated:
            return actions, rewards, info["episode_metrics"]


def test_aec_and_gym_give_identical_trajectories(bank_dir):
    actions, rewards, metrics = _gym_trajectory(bank_dir, RandomPolicy(seed=5), seed=11)
    env = mara_env.env(bank=str(bank_dir), arrival_prob=0.1)
    env.reset(seed=11)
    actor = NodeActor(RandomPolicy(seed=5))
    actor.reset()
    aec_actions, aec_rewards, current = [], [], []
    for agent in env.agent_iter():
        obs, _, terminated, truncated, _ = env.last()
        if terminated or truncated:
            env.step(None)
            continue
        choice = actor.act(agent, obs)
        current.append(choice)
        env.step(choice)
        if agent == "node_6":  # the cycle is complete: the simulator has advanced
            aec_actions.append(current)
            current = []
            aec_rewards.append(env.rewards[agent])
            last_info = env.infos[agent]
    assert aec_actions == actions
    assert np.allclose(aec_rewards, rewards)
    assert last_info["episode_metrics"] == metrics


def test_parallel_and_gym_give_identical_metrics(bank_dir):
    _, rewards, metrics = _gym_trajectory(bank_dir, FIFOPolicy(), seed=4)
    env = mara_env.parallel_env(bank=str(bank_dir), arrival_prob=0.1)
    observations, _ = env.reset(seed=4)
    actor = NodeActor(FIFOPolicy())
    par_rewards = []
    while env.agents:
        observations, reward, _, _, infos = env.step(actor.act_parallel(observations))
        par_rewards.append(reward["node_0"])
    assert np.allclose(par_rewards, rewards)
    assert infos["node_0"]["episode_metrics"] == metrics


def test_env_is_raw_env_in_the_order_enforcing_wrapper(bank_dir):
    from pettingzoo.utils.wrappers import OrderEnforcingWrapper

    from mara_env.pettingzoo_env import raw_env

    env = mara_env.env(bank=str(bank_dir))
    assert isinstance(env, OrderEnforcingWrapper) and isinstance(env.unwrapped, raw_env)


def test_parallel_masks_are_static_the_same_for_every_node(bank_dir):
    env = mara_env.parallel_env(bank=str(bank_dir), arrival_prob=1.0)
    observations, _ = env.reset(seed=0)
    for _ in range(3):
        observations, *_ = env.step({agent: 1 for agent in env.agents})
    masks = np.stack([observations[a]["action_mask"] for a in env.possible_agents])
    assert np.all(masks == masks[0]) and masks[0, 0] == 1
    assert np.array_equal(masks[0, 1:].astype(bool), env.engine.sim.slot_task >= 0)


def _episode_rewards(bank_dir, agent_reward):
    env = mara_env.parallel_env(bank=str(bank_dir), arrival_prob=0.1, arrival_window=60, conflicts="repair",
                                agent_reward=agent_reward)
    observations, _ = env.reset(seed=7)
    per_agent = np.zeros(7)
    while env.agents:
        observations, rewards, _, _, infos = env.step({a: 1 + i % 3 for i, a in enumerate(env.agents)})
        per_agent += [rewards[a] for a in env.possible_agents]
    return per_agent, infos["node_0"]["episode_metrics"]["successes"]


def test_share_splits_the_team_reward_so_the_sum_over_nodes_counts_it_once(bank_dir):
    team, successes = _episode_rewards(bank_dir, "team")
    share, same_successes = _episode_rewards(bank_dir, "share")
    assert successes == same_successes > 0
    assert np.allclose(team, successes)  # every node gets the whole team return (shaping telescopes)
    assert np.allclose(share, successes / 7) and np.isclose(share.sum(), successes)
