"""The abandon action (``abandon=True``): hand-computed episodes (docs/environment.md, "Abandoning a task"), the
claim rule in every front end and format, the checkers, and the default env left as it was."""

import functools
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from pettingzoo.test import api_test, parallel_api_test, seed_test

import mara_env
from curves.bank import load_bank
from mara_env.abandon import feasible_alone
from benchmarks.env_bench import fifo_picks
from mara_env.config import MARAConfig
from mara_env.shaping import log_progress
from mara_env.simulator import ABANDONED, EXPIRED, SUCCEEDED
from mara_env.workload import Episode
from vector_compare import play_both

CURVE = "toy_fast/test/000"  # L(1) … L(5) = 1.937, 2.027, 1.939, 1.806, 1.734: first ≤ 1.81 at s = 4
OTHER = "toy_slow/test/001"
SMALL = {"arrival_window": 40, "arrival_prob": 0.3, "num_nodes": 3, "max_active": 4}


def make_env(bank_dir, **overrides):
    settings = {"arrival_window": 1, "abandon": True, **overrides}
    return gym.make("MARA-v0", bank=str(bank_dir), disable_env_checker=True, **settings)


def episode_a():
    """Two hopeless tasks in the two slots, a task that needs 4 batches waiting in the queue."""
    return Episode.from_lists([0, 0, 0], [CURVE, OTHER, CURVE], [1e-6, 1e-6, 1.81], [10, 10, 10])


def test_episode_a_abandoning_frees_the_slot_for_the_queue_in_the_same_step(bank_dir):
    env = make_env(bank_dir, num_nodes=2, max_active=2)
    env.reset(options={"episode": episode_a()})
    sim = env.unwrapped.engine.sim
    before = [env.step(np.array([1, 2]))[1] for _ in range(2)]  # both tasks run a batch at t = 0 and t = 1
    other = load_bank(bank_dir).cumavg(OTHER)
    q_other = float(log_progress(other[:1], other[1:2], np.array([1e-6]))[0])
    obs, reward, _, _, info = env.step(np.array([0, 4]))  # t = 2: node 1 abandons slot 1 (K + 2 = 4)
    assert info == {"successes": 0, "expirations": 0, "conflicts": 0, "abandoned": 1}
    assert reward == pytest.approx(-0.1 * q_other)  # task 1 leaves Φ; task 2 enters it with 0
    assert sim.status[1] == ABANDONED and sim.left_at[1] == 3 and sim.batches[1] == 2
    assert sim.slot_task.tolist() == [0, 2]  # the queue refilled slot 1 in the same step
    assert obs["tasks"][1, 0] == 1 and obs["history_len"][1] == 0
    rewards = [env.step(np.array([2, 0]))[1] for _ in range(4)]  # task 2 runs 4 batches: t = 3 … 6
    assert sim.status[2] == SUCCEEDED and sim.left_at[2] == 7
    rewards += [env.step(np.array([0, 0]))[1] for _ in range(2)]
    _, last, terminated, _, info = env.step(np.array([0, 0]))  # t = 9: task 0 reaches its deadline 10
    assert terminated and info["expirations"] == 1 and sim.status[0] == EXPIRED
    assert info["task_outcomes"] == ("expired", "abandoned", "succeeded")
    metrics = info["episode_metrics"]
    assert (metrics["successes"], metrics["abandoned"], metrics["abandoned_feasible"]) == (1, 1, 0)
    assert metrics["wasted_node_steps"] == 4  # tasks 0 and 1 ran 2 batches each and did not succeed
    assert metrics["wasted_node_steps/toy_fast"] == 2 and metrics["wasted_node_steps/toy_slow"] == 2
    assert metrics["wasted_node_steps/toy_rl"] == 0
    assert sum(before) + reward + sum(rewards) + last == pytest.approx(1.0)  # the return is the success count


@pytest.mark.parametrize(("budget", "feasible"), [(4, 1), (3, 0)])
def test_episode_b_claims_resolve_in_node_order_and_feasibility_is_the_oracles(bank_dir, budget, feasible):
    env = make_env(bank_dir, num_nodes=3, max_active=2)
    env.reset(options={"episode": Episode.from_lists([0, 0], [CURVE, OTHER], [1.81, 1e-6], [budget, 5])})
    # node 0 abandons slot 0 (K + 1 = 3); node 1's pick of slot 0 conflicts; node 2 abandons slot 1
    _, reward, terminated, _, info = env.step(np.array([3, 1, 4]))
    assert (info["abandoned"], info["conflicts"], info["successes"]) == (2, 1, 0)
    assert terminated and reward == 0.0
    metrics = info["episode_metrics"]
    # task 0 needs 4 batches: it could still make it with 4 steps left, not with 3
    assert metrics["abandoned_feasible"] == feasible and metrics["wasted_node_steps"] == 0
    assert metrics["utilisation"] == 0.0


def test_repair_never_moves_an_abandon(bank_dir):
    env = make_env(bank_dir, num_nodes=3, max_active=2, conflicts="repair")
    env.reset(options={"episode": Episode.from_lists([0, 0], [CURVE, OTHER], [1e-6, 1e-6], [10, 10])})
    sim = env.unwrapped.engine.sim
    _, _, _, _, info = env.step(np.array([1, 3, 0]))  # node 1 would abandon the slot node 0 serves: it idles
    assert (info["repaired"], info["abandoned"], info["conflicts"]) == (1, 0, 0)
    assert sim.batches.tolist() == [1, 0]
    _, _, _, _, info = env.step(np.array([4, 2, 2]))  # node 0 abandons slot 1; both picks move to slot 0
    assert (info["repaired"], info["abandoned"]) == (2, 1)
    assert sim.batches.tolist() == [2, 0] and sim.status[1] == ABANDONED


def test_scores_abandon_first_then_serve_with_the_nodes_left(bank_dir):
    env = make_env(bank_dir, num_nodes=2, max_active=3, actions="scores")
    assert env.action_space == gym.spaces.Box(-1.0, 1.0, (6,), np.float32)
    env.reset(options={"episode": Episode.from_lists([0, 0, 0], [CURVE, OTHER, CURVE], [1e-6] * 3, [10] * 3)})
    sim = env.unwrapped.engine.sim
    _, _, _, _, info = env.step(np.array([0.2, 0.9, 0.5, -1.0, 0.3, 0.0], dtype=np.float32))
    assert info["abandoned"] == 1 and sim.status[1] == ABANDONED  # slot 1 is abandoned though it ranks first
    assert sim.batches.tolist() == [0, 0, 1]  # the one node left serves slot 2, the best of the rest


def test_feasible_alone_counts_the_steps_left_on_the_fastest_node():
    config = MARAConfig(abandon=True)
    crossing, batches = np.array([10, 10, 10]), np.array([4, 4, 4])
    assert feasible_alone(crossing, batches, np.array([6, 5, 7]), config).tolist() == [True, False, True]
    options = MARAConfig(num_nodes=2, node_speeds=(1, 3), switch_cost=1, abandon=True)
    assert feasible_alone(crossing, batches, np.array([3, 2, 1]), options).tolist() == [True, False, False]


def test_the_aec_mask_removes_picked_and_abandoned_slots_from_later_nodes(bank_dir):
    env = mara_env.env(bank=str(bank_dir), abandon=True, num_nodes=3, max_active=3, arrival_window=1)
    env.reset(options={"episode": Episode.from_lists([0, 0], [CURVE, OTHER], [1e-6, 1e-6], [10, 10])})
    assert env.action_space("node_0") == gym.spaces.Discrete(7)
    assert env.observe("node_0")["action_mask"].tolist() == [1, 1, 1, 0, 1, 1, 0]
    env.step(5)  # node 0 abandons slot 1
    assert env.observe("node_1")["action_mask"].tolist() == [1, 1, 0, 0, 1, 0, 0]
    env.step(1)  # node 1 serves slot 0
    assert env.observe("node_2")["action_mask"].tolist() == [1, 0, 0, 0, 0, 0, 0]
    env.step(0)
    assert env.unwrapped.engine.sim.task_outcomes() == ("running", "abandoned")
    assert env.infos["node_0"]["abandoned"] == 1


def test_spaces_and_masks_grow_by_k_choices_per_node(bank_dir):
    shapes = {}
    for observation in ("dict", "rllib"):
        env = gym.make("MARA-v0", bank=str(bank_dir), abandon=True, observation=observation, num_nodes=3,
                       max_active=4)
        obs, info = env.reset(seed=0)
        assert env.action_space == gym.spaces.MultiDiscrete([9, 9, 9])
        assert "abandoned" in info
        shapes[observation] = obs["action_mask"].shape
        mask = env.unwrapped.action_masks().reshape(3, 9)
        assert np.array_equal(mask[:, 1:5], mask[:, 5:]) and mask[:, 0].all()
    assert shapes == {"dict": (3, 9), "rllib": (27,)}
    parallel = mara_env.parallel_env(bank=str(bank_dir), abandon=True, num_nodes=3, max_active=4)
    observations, _ = parallel.reset(seed=0)
    assert observations["node_0"]["action_mask"].shape == (9,)
    assert parallel.observation_space("node_0")["observation"]["picks"].high.max() == 8


def test_default_env_keeps_its_spaces_and_info(bank_dir):
    env = gym.make("MARA-v0", bank=str(bank_dir), num_nodes=3, max_active=4)
    _, info = env.reset(seed=0)
    assert env.action_space == gym.spaces.MultiDiscrete([5, 5, 5])
    assert sorted(info) == ["conflicts", "expirations", "successes"]
    with pytest.raises(ValueError, match=r"\[0, 4\]"):
        env.step(np.array([5, 0, 0]))


def test_out_of_range_choices_and_bad_flags_are_refused(bank_dir):
    env = make_env(bank_dir, num_nodes=3, max_active=4)
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"\[0, 8\].*4\+j = abandon"):
        env.step(np.array([9, 0, 0]))
    aec = mara_env.env(bank=str(bank_dir), abandon=True, num_nodes=3, max_active=4)
    aec.reset(seed=0)
    with pytest.raises(ValueError, match=r"node_0.*\[0, 8\]"):
        aec.step(9)
    with pytest.raises(TypeError, match="abandon"):
        MARAConfig(abandon=1)


def fifo_with_abandons(rng, num_envs, num_slots, chance):
    """FIFO's picks (which reach successes), the last node abandoning a random slot with probability ``chance``."""
    def choose(obs):
        picks = fifo_picks(obs)
        abandons = rng.integers(num_slots + 1, 2 * num_slots + 1, num_envs)
        picks[:, -1] = np.where(rng.random(num_envs) < chance, abandons, picks[:, -1])
        return picks
    return choose


def make_vector_pair(bank_dir, num_envs, **settings):
    config = {**SMALL, "abandon": True, **settings}
    native = gym.make_vec("MARA-v0", num_envs=num_envs, vectorization_mode="vector_entry_point", bank=str(bank_dir),
                          **config)
    reference = gym.make_vec("MARA-v0", num_envs=num_envs, vectorization_mode="sync", bank=str(bank_dir), **config)
    return native, reference


@pytest.mark.parametrize("settings", [{}, {"conflicts": "repair"}, {"node_speeds": (2, 1, 1), "switch_cost": 1}])
def test_same_trajectories_as_sync_vector_env_with_abandon(bank_dir, settings):
    num_envs = 4
    native, reference = make_vector_pair(bank_dir, num_envs, **settings)
    assert native.single_action_space == reference.single_action_space == gym.spaces.MultiDiscrete([9] * 3)
    choose = fifo_with_abandons(np.random.default_rng(5), num_envs, 4, 0.02)
    assert play_both(native, reference, choose, 500, {"seed": 2}) >= num_envs
    np.testing.assert_array_equal(native.unwrapped.action_masks(), np.stack(reference.call("action_masks")))


@pytest.mark.parametrize("settings", [{"actions": "scores"}, {"observation": "rllib"}])
def test_scores_and_rllib_match_sync_vector_env_with_abandon(bank_dir, settings):
    num_envs = 3
    native, reference = make_vector_pair(bank_dir, num_envs, **settings)
    rng = np.random.default_rng(9)
    if "actions" in settings:
        def choose(obs):
            scores = rng.uniform(-1.0, 1.0, (num_envs, 8))
            scores[:, 4:] = np.minimum(scores[:, 4:], rng.uniform(-1.0, -0.8, (num_envs, 4)))  # abandon seldom
            return scores.astype(np.float32)
    else:
        def choose(obs):
            return np.where(rng.random((num_envs, 3)) < 0.05, rng.integers(5, 9, (num_envs, 3)),
                            rng.integers(0, 5, (num_envs, 3)))
    assert play_both(native, reference, choose, 700, {"seed": 4}) >= num_envs


def test_never_abandoning_plays_the_default_episode(bank_dir):
    """With abandon=True and only choices 0 … K the dynamics, rewards and default metrics are the default env's."""
    plain, extended = (gym.make("MARA-v0", bank=str(bank_dir), disable_env_checker=True, abandon=flag, **SMALL)
                       for flag in (False, True))
    rng = np.random.default_rng(3)
    a, _ = plain.reset(seed=6)
    b, _ = extended.reset(seed=6)
    while True:
        action = rng.integers(0, 5, size=3)
        a, reward_a, end_a, _, info_a = plain.step(action)
        b, reward_b, end_b, _, info_b = extended.step(action)
        assert reward_a == reward_b and end_a == end_b
        assert all(np.array_equal(a[key], b[key]) for key in a if key != "action_mask")
        assert np.array_equal(a["action_mask"], b["action_mask"][:, :5])
        assert info_b.pop("abandoned") == 0
        if end_a:
            extra = set(info_b["episode_metrics"]) - set(info_a["episode_metrics"])
            assert {"abandoned", "abandoned_feasible", "wasted_node_steps"} <= extra
            info_b["episode_metrics"] = {key: info_b["episode_metrics"][key] for key in info_a["episode_metrics"]}
            np.testing.assert_equal(info_a, info_b)
            return


@pytest.mark.parametrize("settings", [{}, {"actions": "scores"}, {"observation": "rllib"},
                                      {"node_speeds": (2, 1, 1), "switch_cost": 1}])
def test_check_env_passes_with_abandon(bank_dir, settings):
    env = gym.make("MARA-v0", bank=str(bank_dir), abandon=True, arrival_prob=0.3, num_nodes=3, **settings)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped, skip_render_check=True)


def test_pettingzoo_checkers_pass_with_abandon(bank_dir):
    settings = {"bank": str(bank_dir), "arrival_prob": 0.3, "abandon": True}
    api_test(mara_env.env(**settings), num_cycles=200)
    parallel_api_test(mara_env.parallel_env(**settings), num_cycles=200)
    seed_test(functools.partial(mara_env.env, **settings), num_cycles=50)


def test_the_gantt_chart_draws_an_abandoned_task(bank_dir):
    env = make_env(bank_dir, num_nodes=2, max_active=2, render_mode="rgb_array")
    env.reset(options={"episode": episode_a()})
    env.step(np.array([1, 4]))
    image = env.render()
    assert image.shape == (400, 640, 3)
