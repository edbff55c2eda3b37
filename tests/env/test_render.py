"""Rendering: ``ansi`` text, the ``rgb_array`` Gantt chart and the ``human`` window, in every front end."""

import gymnasium as gym
import matplotlib
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import mara_env

matplotlib.use("Agg")  # the human window draws off-screen in tests


def _play(env, steps, seed=0):
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    for _ in range(steps):
        obs, *_ = env.step(rng.integers(0, 11, size=7))
    return obs


def test_rgb_array_passes_the_checker_and_returns_an_image(bank_dir):
    env = gym.make("MARA-v0", bank=str(bank_dir), arrival_prob=0.3, render_mode="rgb_array")
    check_env(env.unwrapped, skip_render_check=False)
    _play(env, 0)
    start = env.render()
    _play(env, 40)
    later = env.render()
    assert start.dtype == np.uint8 and start.ndim == 3 and start.shape[2] == 3
    assert start.shape == later.shape and not np.array_equal(start, later)


def test_record_holds_the_task_each_node_served(bank_dir):
    env = gym.make("MARA-v0", bank=str(bank_dir), arrival_prob=0.5, render_mode="rgb_array", conflicts="repair")
    env.reset(seed=1)
    sim = env.unwrapped.engine.sim
    rng = np.random.default_rng(3)
    for _ in range(30):
        action = rng.integers(0, 11, size=7)
        occupied = sim.slot_task >= 0
        slot_task = sim.slot_task.copy()
        env.step(action)
        served = env.unwrapped.frontend.record.served[-1]
        busy = served >= 0
        assert busy.sum() == len(sim.last_served)  # as many busy nodes as tasks served
        assert set(served[busy].tolist()) == set(slot_task[list(sim.last_served)].tolist())
        assert np.all(np.isin(served[busy], slot_task[occupied]))


def test_human_mode_draws_after_every_step_and_returns_nothing(bank_dir):
    env = gym.make("MARA-v0", bank=str(bank_dir), arrival_prob=0.3, render_mode="human")
    _play(env, 3)
    viewer = env.unwrapped.frontend.viewer
    assert viewer.window is not None
    assert env.render() is None
    env.close()
    assert viewer.window is None


@pytest.mark.parametrize("make", [mara_env.env, mara_env.parallel_env])
def test_pettingzoo_envs_render_the_chart(bank_dir, make):
    env = make(bank=str(bank_dir), arrival_prob=0.3, render_mode="rgb_array")
    env.reset(seed=0)
    image = env.render()
    assert image.dtype == np.uint8 and image.shape[2] == 3


def test_render_before_reset_is_a_clear_error(bank_dir):
    env = gym.make("MARA-v0", bank=str(bank_dir), render_mode="rgb_array", disable_env_checker=True)
    with pytest.raises(RuntimeError, match="reset"):
        env.unwrapped.render()
