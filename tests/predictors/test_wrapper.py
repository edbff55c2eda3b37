"""The observation wrappers that add ``predicted_remaining`` (issue 4, item 5)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from mara_env.features import NUM_TASK_FEATURES, TASK_FEATURE_INDEX
from mara_agents.predictors.base import Prediction, PredictorQuery
from mara_agents.predictors.wls import WLSPredictor
from mara_agents.predictors.wrapper import PredictedRemaining, PredictedRemainingVector, add_predictions

K, H, M = 4, 50, 2


def observation(lengths: list[int], budget: float = 40.0, remaining_time: float = 0.5) -> dict[str, np.ndarray]:
    """A MARA-shaped observation: slot k holds a power-law task with lengths[k] observations (0 = empty)."""
    tasks = np.zeros((K, NUM_TASK_FEATURES), np.float32)
    history = np.zeros((K, H), np.float32)
    budgets = np.zeros(K, np.float32)
    for k, n in enumerate(lengths):
        if n == 0 and k % 2:
            continue  # odd empty slots are absent, even ones hold a task that has not run yet
        tasks[k, TASK_FEATURE_INDEX["present"]] = 1
        tasks[k, TASK_FEATURE_INDEX["remaining_time"]] = remaining_time
        tasks[k, TASK_FEATURE_INDEX["target_loss"]] = 0.5
        tasks[k, TASK_FEATURE_INDEX["log_batch_size"]] = np.log(32)
        tasks[k, TASK_FEATURE_INDEX["log_lr"]] = np.log(1e-3)
        history[k, :n] = 2.0 * np.arange(1, n + 1) ** -0.5
        budgets[k] = budget
    return {"tasks": tasks, "history": history, "history_len": np.array(lengths, np.int64),
            "action_mask": np.ones((M, K + 1), np.int8), "global": np.zeros(4, np.float32), "budget": budgets}


class FakeMARA(gym.Env):
    """Just the observation contract of MARA-v0: histories grow by one point per step."""

    metadata = {"autoreset_mode": gym.vector.AutoresetMode.NEXT_STEP}

    def __init__(self):
        self.observation_space = gym.spaces.Dict({
            "tasks": gym.spaces.Box(-np.inf, np.inf, (K, NUM_TASK_FEATURES), np.float32),
            "history": gym.spaces.Box(0, np.inf, (K, H), np.float32),
            "history_len": gym.spaces.Box(0, H, (K,), np.int64),
            "action_mask": gym.spaces.Box(0, 1, (M, K + 1), np.int8),
            "global": gym.spaces.Box(-np.inf, np.inf, (4,), np.float32),
            "budget": gym.spaces.Box(0, np.inf, (K,), np.float32)})
        self.action_space = gym.spaces.MultiDiscrete([K + 1] * M)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return observation([0, 0, 2, 6]), {}

    def step(self, action):
        self.t += 1
        return observation([0, 0, 2 + self.t, 6 + self.t]), 0.0, self.t >= 5, False, {}


class CountingPredictor:
    """WLS that counts its calls."""

    def __init__(self):
        self.calls = 0

    def predict(self, query: PredictorQuery) -> Prediction:
        self.calls += 1
        return WLSPredictor().predict(query)


def test_wrapper_adds_predicted_remaining_with_one_call_per_step():
    predictor = CountingPredictor()
    env = PredictedRemaining(FakeMARA(), predictor)
    obs, _ = env.reset(seed=0)
    assert predictor.calls == 1 and env.observation_space.contains(obs)
    remaining = obs["predicted_remaining"]
    assert remaining.dtype == np.float32 and remaining.shape == (K,)
    # slot 0: present, 0 observations → the generation cap 2·B − s = 80; slot 1: empty → 0;
    # slot 2: 2 observations → its cap 78; slot 3: 6 observations → the WLS estimate, below its cap 74
    assert remaining[:3].tolist() == [80.0, 0.0, 78.0] and 0 < remaining[3] < 74
    obs, *_ = env.step(env.action_space.sample())
    assert predictor.calls == 2 and env.observation_space.contains(obs)


def test_wrapper_estimates_equal_a_direct_predictor_call():
    obs = observation([0, 0, 9, 25])
    query = PredictorQuery(obs["history"][3:4].astype(np.float64), np.array([25]), np.array([32.0]),
                           np.array([1e-3]), np.array([0.5]), np.array([2 * 40.0 - 25]))
    expected = WLSPredictor().predict(query).remaining[0]
    assert np.isclose(add_predictions(obs, WLSPredictor())["predicted_remaining"][3], expected, rtol=1e-5)


def test_stacked_observations_get_the_same_predictions_as_single_ones():
    singles = [observation([0, 0, 2 + i, 7 + 3 * i], remaining_time=0.3 + 0.1 * i) for i in range(3)]
    stacked = {key: np.stack([o[key] for o in singles]) for key in singles[0]}
    batched = add_predictions(stacked, WLSPredictor())["predicted_remaining"]
    assert batched.shape == (3, K)
    for i, single in enumerate(singles):
        np.testing.assert_array_equal(batched[i], add_predictions(single, WLSPredictor())["predicted_remaining"])


def test_vector_wrapper_predicts_for_all_environments_in_one_call():
    predictor = CountingPredictor()
    envs = PredictedRemainingVector(gym.vector.SyncVectorEnv([FakeMARA, FakeMARA, FakeMARA]), predictor)
    obs, _ = envs.reset(seed=0)
    assert predictor.calls == 1 and obs["predicted_remaining"].shape == (3, K)
    assert envs.observation_space.contains(obs)
    assert envs.single_observation_space["predicted_remaining"].shape == (K,)
    obs, *_ = envs.step(envs.action_space.sample())
    assert predictor.calls == 2
    np.testing.assert_array_equal(obs["predicted_remaining"][0], obs["predicted_remaining"][2])


def test_wrapper_rejects_an_observation_space_without_the_contract():
    env = FakeMARA()
    env.observation_space = gym.spaces.Dict({"tasks": env.observation_space["tasks"]})
    try:
        PredictedRemaining(env, WLSPredictor())
    except ValueError as exc:
        assert "budget" in str(exc)
    else:
        raise AssertionError("a space without history/budget must be rejected")


@pytest.mark.filterwarnings("ignore:.*different from the unwrapped version")  # checking the wrapper is the point
def test_wrapped_mara_env_passes_the_gymnasium_checker_and_honours_the_cap(bank_dir):
    from gymnasium.utils.env_checker import check_env

    import mara_env  # noqa: F401  (registers MARA-v0)

    env = PredictedRemaining(gym.make("MARA-v0", bank=str(bank_dir)), WLSPredictor())
    check_env(env.unwrapped)
    check_env(env, skip_render_check=True)
    obs, _ = env.reset(seed=3)
    for _ in range(40):
        obs, *_ = env.step(env.action_space.sample())
        present = obs["tasks"][:, TASK_FEATURE_INDEX["present"]] > 0
        cap = np.where(present, 2 * obs["budget"] - obs["history_len"], 0)
        early = obs["history_len"] < 4
        assert np.all(obs["predicted_remaining"] <= cap + 1e-3)
        np.testing.assert_array_equal(obs["predicted_remaining"][early], cap[early])
        assert env.observation_space.contains(obs)


@pytest.mark.filterwarnings("ignore:Observation")  # MARA's node observations are Dicts by design
def test_pettingzoo_wrappers_pass_the_api_tests_and_predict_once_per_step(bank_dir):
    from pettingzoo.test import api_test, parallel_api_test

    import mara_env

    from mara_agents.predictors.wrapper import PredictedRemainingAEC, PredictedRemainingParallel

    predictor = CountingPredictor()
    aec = PredictedRemainingAEC(mara_env.env(bank=str(bank_dir), max_cycles=30), predictor)
    api_test(aec, num_cycles=30)
    aec.reset(seed=0)
    before = predictor.calls
    nodes = [aec.observe(agent) for agent in aec.possible_agents]  # one step, all nodes
    assert predictor.calls - before <= 1
    assert all(aec.observation_space(a).contains(o) for a, o in zip(aec.possible_agents, nodes))
    np.testing.assert_array_equal(nodes[0]["observation"]["predicted_remaining"],
                                  nodes[-1]["observation"]["predicted_remaining"])
    parallel = PredictedRemainingParallel(mara_env.parallel_env(bank=str(bank_dir), max_cycles=30), predictor)
    parallel_api_test(parallel, num_cycles=30)
    observations, _ = parallel.reset(seed=0)
    assert all(parallel.observation_space(a).contains(o) for a, o in observations.items())
