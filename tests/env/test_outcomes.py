"""What the envs publish for agents: per-task outcomes at the episode's end, the global features by name, and
the privileged true-remaining accessor that only training-time experts read."""

import gymnasium as gym
import numpy as np
import pytest

import mara_env  # noqa: F401
from curves.bank import load_bank
from mara_env.dynamics import STATUS_NAMES, first_crossings
from mara_env.features import GLOBAL_FEATURE_INDEX
from mara_env.workload import Episode

FAST, SLOW = "toy_fast/test/000", "toy_slow/test/001"


def _episode(bank_dir) -> Episode:
    """Two tasks: the first reaches its target within its budget, the second cannot."""
    bank = load_bank(bank_dir)
    return Episode.from_lists([0, 0], [FAST, SLOW], [float(bank.cumavg(FAST)[9]), 1e-9], [200, 30])


def test_the_episode_end_lists_each_tasks_outcome_in_task_order(bank_dir):
    env = gym.make("MARA-v0", bank=str(bank_dir), arrival_window=1, disable_env_checker=True)
    env.reset(options={"episode": _episode(bank_dir)})
    assert env.unwrapped.task_outcomes() == ("running", "running")
    terminated, info = False, {}
    while not terminated:
        _, _, terminated, _, info = env.step(np.array([1, 2, 0, 0, 0, 0, 0]))
    assert info["task_outcomes"] == ("succeeded", "expired") == env.unwrapped.task_outcomes()
    assert info["episode_metrics"]["successes"] == 1.0
    assert env.unwrapped.episode.curve == (FAST, SLOW)


def test_the_vector_env_publishes_the_outcomes_of_the_sub_envs_that_end(bank_dir):
    envs = gym.make_vec("MARA-v0", num_envs=2, vectorization_mode="vector_entry_point", bank=str(bank_dir),
                        arrival_window=1)
    episode = _episode(bank_dir)
    envs.reset(options={"episode": [episode, episode]})
    actions = np.array([[1, 2, 0, 0, 0, 0, 0], [0] * 7])  # sub-env 1 idles: both its tasks expire
    terminated = np.zeros(2, dtype=bool)
    while not terminated.all():
        _, _, ended, _, info = envs.step(actions)
        for row in np.flatnonzero(ended & ~terminated):  # the given episodes, not those after autoreset
            assert info["_task_outcomes"][row]
            assert info["task_outcomes"][row] == envs.unwrapped.task_outcomes(row)
            assert info["task_outcomes"][row] == (("succeeded", "expired"), ("expired", "expired"))[row]
        terminated |= ended
        actions[terminated] = 0


def test_every_status_has_a_name():
    assert STATUS_NAMES == ("not arrived", "queued", "running", "succeeded", "expired", "abandoned")


def test_the_global_features_are_the_named_quantities(bank_dir):
    env = gym.make("MARA-v0", bank=str(bank_dir), arrival_prob=1.0, max_active=3, disable_env_checker=True)
    obs, _ = env.reset(seed=1)
    for _ in range(5):
        obs, *_ = env.step(np.zeros(7, dtype=np.int64))
    config = env.unwrapped.config
    occupied = int(obs["tasks"][:, 0].sum())
    queued = sum(outcome == "queued" for outcome in env.unwrapped.task_outcomes())
    expected = {"nodes": config.num_nodes / config.max_nodes, "active": occupied / 3, "queue": queued / 3,
                "time": 5 / config.arrival_window}
    for name, value in expected.items():
        assert obs["global"][GLOBAL_FEATURE_INDEX[name]] == np.float32(value), name
    assert queued > 0  # the queue feature was exercised


def test_true_remaining_counts_the_batches_to_the_first_crossing_of_the_replayed_curve(bank_dir):
    env = gym.make("MARA-v0", bank=str(bank_dir), arrival_window=1, disable_env_checker=True)
    with pytest.raises(RuntimeError, match="reset"):
        env.unwrapped.privileged_true_remaining()
    episode = _episode(bank_dir)
    env.reset(options={"episode": episode})
    bank = load_bank(bank_dir)
    crossing = int(np.argmax(bank.cumavg(FAST) <= episode.eps[0])) + 1
    for served in range(3):
        remaining = env.unwrapped.privileged_true_remaining()
        assert remaining.dtype == np.float32 and remaining[0] == crossing - served
        assert remaining[1] > bank.max_length - served  # never reaches its target: past the table's end
        assert not remaining[2:].any()  # empty slots
        env.step(np.array([1, 2, 0, 0, 0, 0, 0]))


def test_first_crossings_broadcast_over_leading_axes():
    loss = np.array([[[0.0, 3.0, 2.0, 1.0], [0.0, 5.0, 5.0, 5.0]]])
    assert first_crossings(loss, np.array([[2.0, 1.0]])).tolist() == [[2, 4]]
