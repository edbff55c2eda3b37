"""The node options (``node_speeds``, ``switch_cost``) and the fairness metrics, pinned on hand-computed episodes.

The tiny bank below has three families whose every curve has the per-batch losses 12, 0, 0, …, so its
cumulative-average loss is L(s) = 12 / s: L(1) = 12, L(2) = 6, L(3) = 4, L(4) = 3, L(6) = 2, L(12) = 1.
A target ε is therefore first reached at batch ⌈12 / ε⌉, and every outcome below follows by hand.
"""

from __future__ import annotations

import dataclasses
import functools
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import mara_env  # noqa: F401  (registers MARA-v0)
from curves.bank import BankWriter, CurveRecord, FamilySpec
from mara_env.config import MARAConfig
from mara_env.engine import action_picks
from mara_env.fairness import jain_index
from mara_env.features import NODE_FEATURES, SLOT_NODE_FEATURES
from mara_env.flat import flat_size
from mara_env.workload import Episode

LENGTH = 12
FAMILIES = ("alpha", "beta", "gamma")


@pytest.fixture(scope="module")
def tiny_bank(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("tiny_bank")
    writer = BankWriter(root)
    budget = {"kind": "interval", "low": 5, "high": LENGTH}
    for name in FAMILIES:
        spec = FamilySpec(name, "id", "image", "synthetic", "toy", {"kind": "scaled", "base": 3.0, "low": 0.9,
                                                                    "high": 1.1}, budget)
        writer.declare_family(spec)
        losses = np.zeros(LENGTH, dtype=np.float32)
        losses[0] = 12.0
        writer.add(CurveRecord(name, "test", 0, 0, 0, 32, 1e-3, "toy", "toy", LENGTH), losses)
    return str(root)


def curve(family: str) -> str:
    return f"{family}/test/000"


def make(bank: str, num_nodes: int = 2, **options):
    return gym.make("MARA-v0", bank=bank, num_nodes=num_nodes, max_active=3, arrival_window=1,
                    disable_env_checker=True, **options)


def start(env, families, eps, budgets, arrivals=None):
    episode = Episode.from_lists(arrivals or [0] * len(families), [curve(f) for f in families], eps, budgets)
    return env.reset(options={"episode": episode})


# ---------------------------------------------------------------------------------------------- speeds
def test_a_speed_two_node_runs_two_batches_per_step_and_reveals_both(tiny_bank):
    env = make(tiny_bank, node_speeds=(1, 2))
    start(env, ["alpha"], [0.5], [10])  # ε = 0.5 is never reached (L(12) = 1)
    obs, *_ = env.step([0, 1])  # node 1 (speed 2) serves slot 0: batches 1 and 2
    assert obs["history_len"][0] == 2
    np.testing.assert_array_equal(obs["history"][0, :3], [12.0, 6.0, 0.0])
    obs, *_ = env.step([1, 0])  # node 0 (speed 1): batch 3
    assert obs["history_len"][0] == 3 and obs["history"][0, 2] == 4.0
    assert obs["tasks"][0, 2] == pytest.approx(3 / 10)  # batches_done = s / B


def test_success_at_the_first_crossing_batch_mid_step_and_the_rest_is_not_run(tiny_bank):
    env = make(tiny_bank, node_speeds=(1, 2))
    start(env, ["alpha"], [4.0], [10])  # first crossing: L(3) = 4 ≤ 4
    _, _, terminated, _, info = env.step([0, 1])  # batches 1, 2: L = 12, 6
    assert info["successes"] == 0 and not terminated
    _, reward, terminated, _, info = env.step([0, 1])  # batch 3 succeeds; batch 4 is not run
    sim = env.unwrapped.engine.sim
    assert info["successes"] == 1 and terminated
    assert sim.batches[0] == 3 and sim.left_at[0] == 2
    assert reward == pytest.approx(1.0 - 0.1 * np.log(12 / 6) / np.log(12 / 4))  # success, minus β·q(2) leaving


def test_speed_one_nodes_take_one_batch_per_step(tiny_bank):
    env = make(tiny_bank, node_speeds=(1, 2))
    start(env, ["alpha"], [4.0], [10])
    successes = [env.step([1, 0])[4]["successes"] for _ in range(3)]
    assert successes == [0, 0, 1]  # batch 3 in step 3


def test_a_task_never_runs_past_the_end_of_its_curve(tiny_bank):
    env = make(tiny_bank, node_speeds=(5, 1))
    start(env, ["alpha"], [0.5], [4])  # 4 steps of 5 batches would be 20; the curve has 12
    lengths = [int(env.step([1, 0])[0]["history_len"][0]) for _ in range(3)]
    assert lengths == [5, 10, 12]
    _, _, terminated, _, info = env.step([1, 0])  # step 4 runs nothing and the deadline passes
    assert terminated and info["expirations"] == 1 and env.unwrapped.engine.sim.batches[0] == LENGTH


def test_scores_give_the_top_ranked_slot_to_the_fastest_node():
    config = MARAConfig(num_nodes=3, max_active=3, actions="scores", node_speeds=(1, 4, 2))
    picks = action_picks(config, np.array([0.9, 0.2, 0.5]), np.array([True, True, True]))
    # ranking: slot 0 (0.9), slot 2 (0.5), slot 1 (0.2) → node 1 (speed 4), node 2 (speed 2), node 0
    assert picks.tolist() == [2, 1, 3]


# ---------------------------------------------------------------------------------------------- switching cost
def setup_lengths(env, actions):
    """history_len of slot 0 and its (setup_left, last_node) after each action."""
    rows = []
    for action in actions:
        obs, *_ = env.step(action)
        rows.append((int(obs["history_len"][0]), *obs["slot_nodes"][0].tolist()))
    return rows


def test_first_service_pays_the_setup_then_runs(tiny_bank):
    env = make(tiny_bank, switch_cost=2)
    obs, _ = start(env, ["alpha"], [0.5], [12])
    assert obs["slot_nodes"][0].tolist() == [2.0, 0.0]  # not served yet: any node needs the full c = 2
    # node 0 serves: two setup steps (no batch), then one batch per step
    assert setup_lengths(env, [[1, 0]] * 3) == [(0, 1.0, 1.0), (0, 0.0, 1.0), (1, 0.0, 1.0)]
    assert env.unwrapped.engine.sim.totals["setup"] == 2


def test_a_move_to_another_node_pays_the_setup_again(tiny_bank):
    env = make(tiny_bank, switch_cost=2)
    start(env, ["alpha"], [0.5], [12])
    setup_lengths(env, [[1, 0]] * 3)  # one batch done on node 0
    assert setup_lengths(env, [[0, 1]] * 3) == [(1, 1.0, 2.0), (1, 0.0, 2.0), (2, 0.0, 2.0)]


def test_a_resume_after_a_pause_pays_the_setup_again_and_a_broken_setup_restarts(tiny_bank):
    env = make(tiny_bank, switch_cost=2)
    start(env, ["alpha"], [0.5], [12])
    setup_lengths(env, [[1, 0]] * 3)  # one batch done
    # pause one step (the task is not served: its setup need returns to c), then node 0 again
    assert setup_lengths(env, [[0, 0], [1, 0], [0, 0], [1, 0], [1, 0], [1, 0]]) == [
        (1, 2.0, 0.0), (1, 1.0, 1.0), (1, 2.0, 0.0), (1, 1.0, 1.0), (1, 0.0, 1.0), (2, 0.0, 1.0)]


def test_node_features_show_speed_last_pick_and_setup_left(tiny_bank):
    env = make(tiny_bank, node_speeds=(3, 1), switch_cost=1)
    obs, _ = start(env, ["alpha", "beta"], [0.5, 0.5], [12, 12])
    assert NODE_FEATURES == ("speed", "last_pick", "setup_left")
    assert obs["nodes"].tolist() == [[3.0, 0.0, 0.0], [1.0, 0.0, 0.0]]
    obs, *_ = env.step([2, 1])  # node 0 → slot 1, node 1 → slot 0: both in setup (c = 1)
    assert obs["nodes"].tolist() == [[3.0, 2.0, 0.0], [1.0, 1.0, 0.0]]
    assert obs["slot_nodes"].tolist() == [[0.0, 2.0], [0.0, 1.0], [0.0, 0.0]]
    obs, *_ = env.step([2, 0])  # node 0 runs 3 batches of slot 1; node 1 idles
    assert obs["nodes"].tolist() == [[3.0, 2.0, 0.0], [1.0, 0.0, 0.0]]
    assert obs["slot_nodes"].tolist() == [[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]
    assert obs["history_len"].tolist() == [0, 3, 0]


# ---------------------------------------------------------------------------------------------- reward, metrics
def test_the_shaped_return_is_the_number_of_successes_with_both_options(bank_dir):
    env = gym.make("MARA-v0", bank=str(bank_dir), arrival_prob=0.2, arrival_window=80,
                   node_speeds=(1, 2, 3, 1, 1, 2, 4), switch_cost=2, shaping_beta=0.5, disable_env_checker=True)
    rng = np.random.default_rng(3)
    for seed in range(3):
        env.reset(seed=seed)
        fixed = rng.permutation(11)[:7]  # fixed picks keep tasks on their nodes past the setup
        total, terminated, step = 0.0, False, 0
        while not terminated:
            action = fixed if (step // 25) % 2 == 0 else rng.integers(0, 11, 7)
            _, reward, terminated, _, info = env.step(action)
            total, step = total + reward, step + 1
        metrics = info["episode_metrics"]
        assert metrics["successes"] > 0 and metrics["setup"] > 0
        assert total == pytest.approx(metrics["successes"], abs=1e-9)


def test_fairness_metrics_of_a_known_episode(tiny_bank):
    env = make(tiny_bank, fairness_metrics=True)
    # alpha ε = 4 (batch 3) served by node 0 → succeeds; alpha ε = 0.5 never; beta ε = 6 (batch 2) on node 1
    start(env, ["alpha", "alpha", "beta"], [4.0, 0.5, 6.0], [5, 5, 5])
    terminated = False
    while not terminated:
        _, _, terminated, _, info = env.step([1, 3])
    metrics = info["episode_metrics"]
    assert info["task_outcomes"] == ("succeeded", "expired", "succeeded")
    assert metrics["success_rate/alpha"] == 0.5 and metrics["success_rate/beta"] == 1.0
    assert np.isnan(metrics["success_rate/gamma"])  # no gamma task: left out of the minimum and of Jain's index
    assert metrics["min_family_success_rate"] == 0.5
    assert metrics["jain_index"] == pytest.approx((0.5 + 1.0) ** 2 / (2 * (0.5 ** 2 + 1.0 ** 2)))  # = 0.9


def test_jain_index_by_hand():
    assert jain_index(np.array([0.3, 0.3, 0.3])) == pytest.approx(1.0)
    assert jain_index(np.array([1.0, 0.0, 0.0, 0.0])) == pytest.approx(0.25)
    assert jain_index(np.zeros(3)) == 1.0  # every family fared alike
    assert np.isnan(jain_index(np.zeros(0)))


def test_an_episode_without_tasks_has_nan_fairness(tiny_bank):
    env = make(tiny_bank, fairness_metrics=True)
    env.reset(options={"episode": Episode.from_lists([], [], [], [])})
    info = env.step([0, 0])[4]
    metrics = info["episode_metrics"]
    assert np.isnan(metrics["min_family_success_rate"]) and np.isnan(metrics["jain_index"])
    assert all(np.isnan(metrics[f"success_rate/{name}"]) for name in FAMILIES)


# ---------------------------------------------------------------------------------------------- defaults, checks
DEFAULTS = {"node_speeds": (1,) * 7, "switch_cost": 0, "fairness_metrics": False}


@pytest.mark.parametrize("observation", ["dict", "flat", "rllib"])
def test_defaults_passed_explicitly_equal_the_options_omitted(bank_dir, observation):
    plain = gym.make("MARA-v0", bank=str(bank_dir), arrival_prob=0.2, observation=observation)
    explicit = gym.make("MARA-v0", bank=str(bank_dir), arrival_prob=0.2, observation=observation, **DEFAULTS)
    assert plain.observation_space == explicit.observation_space
    rng = np.random.default_rng(0)
    out = [plain.reset(seed=4), explicit.reset(seed=4)]
    terminated = False
    while not terminated:
        action = rng.integers(0, 11, 7)
        out = [plain.step(action), explicit.step(action)]
        for left, right in zip(*out):
            np.testing.assert_equal(left, right)
        terminated = out[0][2]
    assert set(out[0][4]["episode_metrics"]) == {"tasks", "successes", "success_rate", "utilisation", "queue_full",
                                                  "waiting", "ready", "conflicts", "steps"}


@pytest.mark.parametrize("options, error", [
    ({"node_speeds": (1, 2)}, "node_speeds must hold one speed per node"),
    ({"node_speeds": (1, 1, 1, 0, 1, 1, 1)}, "node_speeds\\[3\\] must be ≥ 1"),
    ({"node_speeds": "1111111"}, "node_speeds must be a sequence"),
    ({"node_speeds": (1, 1.5, 1, 1, 1, 1, 1)}, "node_speeds\\[1\\] must be an integer"),
    ({"switch_cost": -1}, "switch_cost must be ≥ 0"),
    ({"switch_cost": 1.0}, "switch_cost must be an integer"),
    ({"fairness_metrics": 1}, "fairness_metrics must be True or False"),
])
def test_bad_options_are_refused_by_name(bank_dir, options, error):
    with pytest.raises((ValueError, TypeError), match=error):
        gym.make("MARA-v0", bank=str(bank_dir), **options)


def test_a_config_keeps_its_speeds_as_a_tuple_and_allows_other_node_counts_without_them():
    config = MARAConfig(node_speeds=[2, 1, 1, 1, 1, 1, 1])
    assert config.node_speeds == (2, 1, 1, 1, 1, 1, 1) and config.node_options
    assert MARAConfig().replace(num_nodes=3).speeds == (1, 1, 1)
    assert not MARAConfig(node_speeds=(1,) * 7).node_options


OPTIONS = {"node_speeds": (1, 3, 1, 2, 1, 1, 1), "switch_cost": 2, "fairness_metrics": True}


@pytest.mark.parametrize("observation", ["dict", "flat", "rllib"])
@pytest.mark.parametrize("actions", ["picks", "scores"])
def test_check_env_passes_with_the_options(bank_dir, observation, actions):
    env = gym.make("MARA-v0", bank=str(bank_dir), arrival_prob=0.2, observation=observation, actions=actions,
                   **OPTIONS)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped, skip_render_check=True)


def test_the_flat_vector_carries_the_node_features_after_the_global_ones(bank_dir):
    points, m, k = 5, 7, 10
    kwargs = {"bank": str(bank_dir), "arrival_prob": 0.3, "flat_history": points, **OPTIONS}
    as_dict, as_flat = gym.make("MARA-v0", **kwargs), gym.make("MARA-v0", observation="flat", **kwargs)
    obs, _ = as_dict.reset(seed=2)
    flat, _ = as_flat.reset(seed=2)
    for _ in range(30):
        action = np.arange(1, m + 1)
        obs, flat = as_dict.step(action)[0], as_flat.step(action)[0]
    assert flat.shape == (flat_size(k, points, nodes=m),) == as_flat.observation_space.shape
    start = flat_size(k, points)
    assert len(SLOT_NODE_FEATURES) == 2
    np.testing.assert_array_equal(flat[start:], np.concatenate([obs["nodes"].ravel(), obs["slot_nodes"].ravel()]))
    assert obs["nodes"][:, 0].tolist() == list(OPTIONS["node_speeds"])


@pytest.mark.parametrize("options", [OPTIONS, {"node_speeds": (4, 1, 1, 1, 1, 1, 2)}, {"switch_cost": 1}])
@pytest.mark.parametrize("observation", ["dict", "rllib"])
@pytest.mark.parametrize("conflicts", ["idle", "repair"])
def test_the_native_vector_env_matches_single_envs_with_the_options(bank_dir, options, observation, conflicts):
    from vector_compare import play_both

    settings = {"bank": str(bank_dir), "arrival_window": 40, "arrival_prob": 0.3, "observation": observation,
                "conflicts": conflicts, "flat_history": 5, **options}
    native = gym.make_vec("MARA-v0", num_envs=3, vectorization_mode="vector_entry_point", **settings)
    reference = gym.make_vec("MARA-v0", num_envs=3, vectorization_mode="sync", **settings)
    assert native.single_observation_space == reference.single_observation_space
    rng = np.random.default_rng(5)
    fixed = np.tile(np.arange(1, 8), (3, 1))  # keeps tasks on their nodes through the setup

    def choose(obs):
        return fixed if rng.random() < 0.7 else rng.integers(0, 11, size=(3, 7))

    assert play_both(native, reference, choose, 500, {"seed": 9}) >= 3


def test_scores_match_between_the_native_vector_env_and_single_envs(bank_dir):
    from vector_compare import play_both

    settings = {"bank": str(bank_dir), "arrival_window": 40, "arrival_prob": 0.3, "actions": "scores",
                "observation": "flat", "flat_history": 5, **OPTIONS}
    native = gym.make_vec("MARA-v0", num_envs=2, vectorization_mode="vector_entry_point", **settings)
    reference = gym.make_vec("MARA-v0", num_envs=2, vectorization_mode="sync", **settings)
    rng = np.random.default_rng(2)
    scores = rng.uniform(-1, 1, size=(2, 10)).astype(np.float32)
    assert play_both(native, reference, lambda obs: scores, 400, {"seed": 1}) >= 2


def test_a_config_with_options_round_trips_through_replace():
    config = MARAConfig(**OPTIONS)
    assert dataclasses.replace(config) == config and config.replace(switch_cost=0).switch_cost == 0


# ---------------------------------------------------------------------------------------------- PettingZoo
@pytest.mark.parametrize("observation", ["dict", "flat", "rllib"])
def test_pettingzoo_api_tests_pass_with_the_options(bank_dir, observation):
    from pettingzoo.test import api_test, parallel_api_test, seed_test

    kwargs = {"bank": str(bank_dir), "arrival_prob": 0.3, "observation": observation, **OPTIONS}
    api_test(mara_env.env(**kwargs), num_cycles=200)
    parallel_api_test(mara_env.parallel_env(**kwargs), num_cycles=200)
    seed_test(functools.partial(mara_env.env, **kwargs), num_cycles=40)


def test_pettingzoo_nodes_see_the_gym_observation_with_the_options(bank_dir):
    kwargs = {"bank": str(bank_dir), "arrival_prob": 0.3, "flat_history": 4, **OPTIONS}
    single = gym.make("MARA-v0", observation="flat", **kwargs)
    parallel = mara_env.parallel_env(observation="flat", **kwargs)
    as_dict = mara_env.parallel_env(**kwargs)
    flat, _ = single.reset(seed=6)
    views, _ = parallel.reset(seed=6)
    dict_views, _ = as_dict.reset(seed=6)
    rng = np.random.default_rng(1)
    for _ in range(60):
        action = rng.integers(0, 11, 7) if rng.random() < 0.3 else np.arange(1, 8)
        per_node = {f"node_{i}": int(pick) for i, pick in enumerate(action)}
        flat, reward, *_ = single.step(action)
        views, rewards, *_ = parallel.step(per_node)
        dict_views, *_ = as_dict.step(per_node)
        for i in range(7):
            one_hot = np.eye(7, dtype=np.float32)[i]
            np.testing.assert_array_equal(views[f"node_{i}"], np.concatenate([flat, one_hot]))
            assert rewards[f"node_{i}"] == reward
        inner = dict_views["node_0"]["observation"]
        assert as_dict.observation_space("node_0").contains(dict_views["node_0"])
        np.testing.assert_array_equal(inner["nodes"][:, 0], OPTIONS["node_speeds"])


# ---------------------------------------------------------------------------------------------- the two paths agree
def test_the_node_path_at_speed_one_and_no_setup_plays_exactly_the_plain_path(bank_dir):
    """Forced onto the node-aware path, the default setting must give the plain path's every value."""
    kwargs = {"bank": str(bank_dir), "arrival_prob": 0.3, "arrival_window": 120, "disable_env_checker": True}
    plain, forced = gym.make("MARA-v0", **kwargs), gym.make("MARA-v0", **kwargs)
    forced.unwrapped.engine.sim.node_options = True
    vector = gym.make_vec("MARA-v0", num_envs=1, vectorization_mode="vector_entry_point", bank=str(bank_dir),
                          arrival_prob=0.3, arrival_window=120)
    vector.unwrapped.sim.node_options = True
    rng = np.random.default_rng(4)
    (obs, _), (forced_obs, _), _ = plain.reset(seed=8), forced.reset(seed=8), vector.reset(seed=8)
    terminated = False
    while not terminated:
        action = rng.integers(0, 11, 7) if rng.random() < 0.5 else np.arange(1, 8)
        obs, reward, terminated, _, info = plain.step(action)
        forced_obs, forced_reward, _, _, forced_info = forced.step(action)
        vector_obs, vector_reward, *_ = vector.step(action[None])
        assert set(forced_obs) - set(obs) == {"nodes", "slot_nodes"}
        for key in obs:
            np.testing.assert_array_equal(obs[key], forced_obs[key], err_msg=key)
            np.testing.assert_array_equal(obs[key], vector_obs[key][0], err_msg=key)
        assert reward == forced_reward == vector_reward[0]
    assert info == forced_info and info["episode_metrics"]["successes"] > 0
