"""MARA-Forecast-v0: the forecast features in every format and front end, the native vector env, one predictor call
per step, and features that expose exactly what the FM-slack rule decides on."""

import functools
import warnings

import gymnasium as gym
import numpy as np
import pettingzoo
import pytest
from gymnasium.utils.env_checker import check_env
from pettingzoo.test import api_test, parallel_api_test, seed_test

import mara_agents  # noqa: F401  (registers MARA-Forecast-v0)
from mara_agents.allocators.slack import SlackPolicy
from mara_agents.rules.slack import slack_order
from mara_agents.envs.forecast import (
    MEDIAN_FEATURES,
    SAMPLE_FEATURES,
    ForecastEnv,
    ForecastVectorEnv,
    env,
    parallel_env,
)
from mara_agents.predictors.base import Prediction
from mara_agents.predictors.demand import make_demand
from mara_agents.predictors.fm.predictor import load_predictor
from mara_agents.predictors.wls import WLSPredictor
from benchmarks.env_bench import fifo_picks
from mara_env.flat import flat_size
from vector_compare import play_both

SMALL = {"arrival_window": 40, "arrival_prob": 0.3}
FORMATS = ("dict", "flat", "rllib")


class CountingPredictor:
    """WLS that counts its calls."""

    def __init__(self):
        self.inner = WLSPredictor()
        self.calls = 0

    def predict(self, query) -> Prediction:
        self.calls += 1
        return self.inner.predict(query)


@pytest.mark.parametrize("observation", FORMATS)
@pytest.mark.parametrize("conflicts", ["idle", "repair"])
def test_check_env_passes_in_every_format(bank_dir, observation, conflicts):
    made = gym.make("MARA-Forecast-v0", bank=str(bank_dir), predictor="wls", observation=observation,
                    conflicts=conflicts, **SMALL)
    assert isinstance(made.unwrapped, ForecastEnv)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # The checker also makes a render_mode="human" env; without a display that one warns by design.
        warnings.filterwarnings("ignore", message="render_mode='human' shows nothing", category=UserWarning)
        check_env(made.unwrapped)


def test_check_env_passes_with_fm_samples(bank_dir):
    fm = load_predictor(n_samples=4)
    check_env(ForecastEnv(bank=str(bank_dir), predictor=fm, forecast="samples", observation="flat", **SMALL))


@pytest.mark.parametrize("observation", FORMATS)
def test_pettingzoo_api_parallel_api_and_seed_tests_pass(bank_dir, observation):
    settings = {"bank": str(bank_dir), "predictor": "wls", "observation": observation, "arrival_prob": 0.3}
    api_test(env(**settings), num_cycles=60)
    parallel_api_test(parallel_env(**settings), num_cycles=60)
    seed_test(functools.partial(env, **settings), num_cycles=30)


def test_registered_everywhere(bank_dir):
    vector = gym.make_vec("MARA-Forecast-v0", num_envs=2, bank=str(bank_dir), predictor="wls")
    assert isinstance(vector.unwrapped, ForecastVectorEnv)
    aec = pettingzoo.make("aec", "MARA-Forecast-v0", bank=str(bank_dir), predictor="wls")
    par = pettingzoo.make("parallel", "MARA-Forecast-v0", bank=str(bank_dir), predictor="wls")
    assert aec.possible_agents == par.possible_agents


@pytest.mark.parametrize("observation", FORMATS)
@pytest.mark.parametrize("conflicts", ["idle", "repair"])
def test_vector_env_matches_sync_vector_env_of_single_forecast_envs(bank_dir, observation, conflicts):
    num_envs = 3
    settings = {"bank": str(bank_dir), "predictor": "wls", "observation": observation, "conflicts": conflicts,
                "flat_history": 4, **SMALL}
    native = gym.make_vec("MARA-Forecast-v0", num_envs=num_envs, **settings)
    reference = gym.make_vec("MARA-Forecast-v0", num_envs=num_envs, vectorization_mode="sync", **settings)
    assert native.single_observation_space == reference.single_observation_space
    rng = np.random.default_rng(5)
    m, k = 7, 10
    assert play_both(native, reference, lambda obs: rng.integers(0, k + 1, (num_envs, m)), 600,
                     {"seed": 9}) >= num_envs


def test_one_predictor_call_per_vector_step_for_all_sub_envs(bank_dir):
    counting = CountingPredictor()
    envs = ForecastVectorEnv(8, bank=str(bank_dir), predictor=counting, **SMALL)
    obs, _ = envs.reset(seed=0)
    assert counting.calls == 1
    asked = 0
    for _ in range(100):
        before = counting.calls
        obs, *_ = envs.step(fifo_picks(obs))
        assert counting.calls - before <= 1  # unserved tasks keep their answer: a step may need none
        asked += counting.calls - before
    assert asked >= 50


def test_one_predictor_call_per_simulator_step_in_the_aec_env(bank_dir):
    counting = CountingPredictor()
    aec = env(bank=str(bank_dir), predictor=counting, observation="flat", **SMALL)
    aec.reset(seed=0)
    for cycle in range(20):
        for _ in aec.possible_agents:
            aec.observe(aec.agent_selection)
            aec.step(0)
        assert counting.calls <= cycle + 2


def test_flat_block_is_the_dict_entry_and_the_features_are_fm_slacks_decision(bank_dir):
    """slack_priority ranks the slots as FM-slack does, slack_serves marks the slots it serves."""
    settings = {"bank": str(bank_dir), "predictor": "wls", "arrival_prob": 0.4, "arrival_window": 60}
    as_dict = gym.make("MARA-Forecast-v0", **settings)
    as_flat = gym.make("MARA-Forecast-v0", observation="flat", flat_history=3, **settings)
    rule = SlackPolicy(make_demand("wls"))
    obs, _ = as_dict.reset(seed=4)
    flat, _ = as_flat.reset(seed=4)
    base, k, f = flat_size(10, 3), 10, len(MEDIAN_FEATURES) + 7
    contended = 0
    for _ in range(60):
        forecast = obs["forecast"]
        np.testing.assert_array_equal(flat[base:].reshape(k, f), forecast)
        present = obs["tasks"][:, 0] > 0
        assert np.all(forecast[~present] == 0)
        predicted = forecast[:, 1] * np.where(present, obs["budget"], 0)
        order = slack_order(obs, rule.demand(obs))
        np.testing.assert_array_equal(np.argsort(-forecast[:, 4])[: present.sum()], order)
        action = rule.act(obs)
        served = sorted(action[action > 0] - 1)
        assert served == np.flatnonzero(forecast[:, 5]).tolist()
        node_columns = forecast[:, 6:13]  # slack_node_j: the slot node j serves
        for node, pick in enumerate(action):
            assert node_columns[:, node].tolist() == [float(pick == slot + 1) for slot in range(k)]
        np.testing.assert_allclose(predicted, rule.demand(obs), rtol=1e-6)
        contended += present.sum() > 7
        obs, _, done, _, _ = as_dict.step(action)
        flat, *_ = as_flat.step(action)
        if done:
            break
    assert contended >= 5


def test_samples_add_the_spread_and_need_a_sampling_predictor(bank_dir):
    fm = load_predictor(n_samples=4)
    single = ForecastEnv(bank=str(bank_dir), predictor=fm, forecast="samples", arrival_prob=0.5)
    obs, _ = single.reset(seed=1)
    for _ in range(12):
        obs, *_ = single.step(fifo_picks({key: value[None] for key, value in obs.items()})[0])
    forecast = obs["forecast"]
    assert forecast.shape == (10, len(MEDIAN_FEATURES) + 7 + len(SAMPLE_FEATURES))
    ready = forecast[:, 0] == 1
    assert ready.any()
    q10, median, q90 = forecast[:, 13], forecast[:, 1], forecast[:, 14]
    assert np.all(q10 <= median + 1e-6) and np.all(median <= q90 + 1e-6)
    assert np.all((forecast[:, 15] >= 0) & (forecast[:, 15] <= 1)) and np.all(forecast[~ready, 15] == 0)
    assert single.observation_space.contains(obs)
    with pytest.raises(ValueError, match="forecast='samples'.*'wls'"):
        ForecastEnv(bank=str(bank_dir), predictor="wls", forecast="samples")
    with pytest.raises(ValueError, match="forecast must be one of"):
        ForecastEnv(bank=str(bank_dir), predictor="wls", forecast="mean")
    with pytest.raises(ValueError, match="predictor must be one of"):
        ForecastEnv(bank=str(bank_dir), predictor="lstm")
