"""Hand-built episodes pin the simulator's step order: execute → success → expiry → advance → arrivals → admit."""

import gymnasium as gym
import numpy as np
import pytest

import mara_env  # noqa: F401
from curves.bank import load_bank
from mara_env.shaping import log_progress
from mara_env.simulator import EXPIRED, SUCCEEDED
from mara_env.workload import Episode

CURVE = "toy_fast/test/000"
OTHER = "toy_slow/test/001"


def make_env(bank_dir, **overrides):
    settings = {"arrival_window": 1, **overrides}
    return gym.make("MARA-v0", bank=str(bank_dir), disable_env_checker=True, **settings)


def first_crossing(curve, eps):
    return int(np.argmax(curve <= eps)) + 1


def serve_slot0(m=7):
    action = np.zeros(m, dtype=np.int64)
    action[0] = 1
    return action


def test_task_succeeds_at_its_first_crossing_and_leaves(bank_dir):
    curve = load_bank(bank_dir).cumavg(CURVE)
    eps = float(curve[19])
    crossing = first_crossing(curve, eps)
    env = make_env(bank_dir)
    env.reset(options={"episode": Episode.from_lists([0], [CURVE], [eps], [300])})
    for step in range(1, crossing + 1):
        obs, reward, terminated, _, info = env.step(serve_slot0())
        assert obs["history_len"][0] == (step if step < crossing else 0)
        assert info["successes"] == (1 if step == crossing else 0)
    assert terminated and obs["tasks"][0, 0] == 0
    assert env.unwrapped.engine.sim.status[0] == SUCCEEDED


def test_unserved_task_expires_when_deadline_is_reached(bank_dir):
    env = make_env(bank_dir)
    env.reset(options={"episode": Episode.from_lists([0], [CURVE], [1e-6], [3])})
    expirations = [env.step(np.zeros(7, dtype=np.int64))[4]["expirations"] for _ in range(3)]
    assert expirations == [0, 0, 1]
    assert env.unwrapped.engine.sim.status[0] == EXPIRED


def test_served_task_executes_at_most_its_budget(bank_dir):
    env = make_env(bank_dir)
    env.reset(options={"episode": Episode.from_lists([0], [CURVE], [1e-6], [5])})
    terminated = False
    while not terminated:
        _, _, terminated, _, _ = env.step(serve_slot0())
    assert env.unwrapped.engine.sim.batches[0] == 5


def test_queued_task_expires_without_admission(bank_dir):
    env = make_env(bank_dir, max_active=1)
    env.reset(options={"episode": Episode.from_lists([0, 0], [CURVE, OTHER], [1e-6, 1e-6], [10, 4])})
    sim = env.unwrapped.engine.sim
    for _ in range(4):
        env.step(serve_slot0())
    assert sim.status[1] == EXPIRED and sim.admitted_at[1] == -1
    assert sim.slot_task[0] == 0


def test_freed_slots_refill_lowest_index_first_and_slots_are_stable(bank_dir):
    tasks = Episode.from_lists([0, 0, 0, 2, 2], [CURVE, OTHER, CURVE, OTHER, CURVE], [1e-6] * 5, [50, 2, 50, 50, 50])
    env = make_env(bank_dir, max_active=3, arrival_window=5)
    env.reset(options={"episode": tasks})
    sim = env.unwrapped.engine.sim
    assert sim.slot_task.tolist() == [0, 1, 2]
    env.step(np.zeros(7, dtype=np.int64))
    env.step(np.zeros(7, dtype=np.int64))  # task 1 expires at t+1 = 2; tasks 3, 4 arrive at t = 2
    assert sim.slot_task.tolist() == [0, 3, 2]
    assert list(sim.queue) == [4]


def test_arrivals_are_observable_in_their_arrival_step(bank_dir):
    env = make_env(bank_dir, arrival_window=10)
    obs, _ = env.reset(options={"episode": Episode.from_lists([3], [CURVE], [1e-6], [50])})
    for t in range(3):
        assert obs["tasks"][0, 0] == 0
        obs, *_ = env.step(np.zeros(7, dtype=np.int64))
    assert obs["tasks"][0, 0] == 1 and obs["global"][3] == pytest.approx(3 / 10)


def test_shaped_reward_is_beta_times_potential_change(bank_dir):
    curve = load_bank(bank_dir).cumavg(CURVE)
    eps = float(curve.min() * 0.5)
    env = make_env(bank_dir)
    env.reset(options={"episode": Episode.from_lists([0], [CURVE], [eps], [300])})
    rewards = [env.step(serve_slot0())[1] for _ in range(3)]
    q = [float(log_progress(np.array([curve[0]]), np.array([curve[s - 1]]), np.array([eps]))[0]) for s in (1, 2, 3)]
    assert rewards[0] == pytest.approx(0.1 * q[0]) and q[0] == 0.0
    assert rewards[1] == pytest.approx(0.1 * (q[1] - q[0]))
    assert rewards[2] == pytest.approx(0.1 * (q[2] - q[1]))


def test_features_describe_the_slot(bank_dir):
    bank = load_bank(bank_dir)
    curve = bank.cumavg(CURVE)
    env = make_env(bank_dir)
    env.reset(options={"episode": Episode.from_lists([0], [CURVE], [0.2], [100])})
    for _ in range(2):
        obs, *_ = env.step(serve_slot0())
    row = obs["tasks"][0]
    record = bank.records[CURVE]
    expected = [1.0, 98 / 100, 2 / 100, curve[1], curve[0], 0.2, np.log(curve[1] / 0.2), 0.5,
                np.log(record.batch_size), np.log(record.lr), 0.0]
    assert np.allclose(row, expected, rtol=1e-5)
    assert np.allclose(obs["history"][0, :3], [curve[0], curve[1], 0.0], rtol=1e-6)
    assert obs["budget"][0] == 100


def test_log_progress_follows_eq_13():
    first, eps = np.array([2.0, 2.0, 2.0, 0.5]), np.array([0.5, 0.5, 0.5, 0.5])
    loss = np.array([2.0, 1.0, 0.25, 0.9])
    # log(L0 / max(L, eps)) / log(L0 / eps): 0 at the start, 1/2 halfway in log space, clipped at 1 once the
    # target is passed, and 1 for a task whose first loss already meets its target.
    np.testing.assert_allclose(log_progress(first, loss, eps), [0.0, 0.5, 1.0, 1.0])
    assert log_progress(np.array([2.0]), np.array([3.0]), np.array([0.5]))[0] == 0.0  # a rising loss clips at 0
