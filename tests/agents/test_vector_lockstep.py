"""lockstep.Lockstep, the one play loop: rows come from the step an episode ended, never later; retired sub-envs
get idle actions and no decisions; restarted ones play on with fresh returns."""

from __future__ import annotations

import numpy as np
import pytest

from mara_agents.play.lockstep import Lockstep, play_episodes


class ScriptedVectorEnv:
    """Two sub-envs: sub-env 0 ends at steps 1 and 3, sub-env 1 at step 4.  Each step's reward and episode
    metric is the step number, so a row shows which step wrote it; resets and actions are recorded."""

    num_envs = 2
    action_space = np.zeros((2, 1))  # only its shape is read

    def __init__(self) -> None:
        self.t = 0
        self.resets: list[tuple[int, list[bool] | None, object]] = []
        self.actions: list[list[int]] = []

    def reset(self, *, seed: object = None, options: dict | None = None) -> tuple[dict[str, np.ndarray], dict]:
        options = options or {}
        mask = options.get("reset_mask")
        self.resets.append((self.t, None if mask is None else mask.tolist(), options.get("episode")))
        return {"x": np.full((2, 1), float(self.t))}, {}

    def step(self, actions: np.ndarray) -> tuple:
        self.actions.append(actions[:, 0].tolist())
        self.t += 1
        terminated = np.array([self.t in (1, 3), self.t == 4])
        info = {"episode_metrics": {"ended_at": np.full(2, float(self.t)), "_ended_at": terminated}}
        return {"x": np.full((2, 1), float(self.t))}, np.full(2, float(self.t)), terminated, np.zeros(2, bool), info


def test_retired_sub_envs_idle_and_each_row_is_written_on_the_step_its_episode_ended():
    env, asked = ScriptedVectorEnv(), []
    loop = Lockstep(env, on_end=lambda env, i: {"seen_at": env.t})

    def decide(observation: dict, rows: np.ndarray) -> np.ndarray:
        asked.append(rows.tolist())
        return np.full((len(rows), 1), 7)

    played = loop.play(decide)
    assert [(row, record["ended_at"], record["seen_at"]) for row, record in played.ended] == [(0, 1.0, 1), (1, 4.0, 4)]
    assert [record["return"] for _, record in played.ended] == [1.0, 1.0 + 2.0 + 3.0 + 4.0]
    assert asked == [[0, 1], [1], [1], [1]] and env.actions == [[7, 7], [0, 7], [0, 7], [0, 7]]
    assert played.rewards.shape == played.terminated.shape == (4, 2)
    assert played.terminated[:, 0].tolist() == [True, False, True, False]  # the retired sub-env is reset each time
    assert [mask for _, mask, _ in env.resets] == [None, [True, False], [True, False], [False, True]]


def test_restarted_sub_envs_play_on_with_fresh_returns_and_the_episodes_restart_names():
    env = ScriptedVectorEnv()
    loop = Lockstep(env, restart=lambda ended: {"episode": ["next" if e else None for e in ended]})
    first = loop.play(lambda observation, rows: np.zeros((len(rows), 1), dtype=np.int64), steps=2)
    second = loop.play(lambda observation, rows: np.zeros((len(rows), 1), dtype=np.int64), steps=2)
    assert [(row, record["return"]) for row, record in first.ended + second.ended] == [(0, 1.0), (0, 5.0), (1, 10.0)]
    assert env.resets[1] == (1, [True, False], ["next", None])
    assert loop.observation["x"][0, 0] == 4.0 and loop.running.all()


@pytest.mark.parametrize("steps", [0, 3])
def test_a_fixed_number_of_steps_stops_there(steps):
    played = Lockstep(ScriptedVectorEnv(), restart=lambda ended: None).play(
        lambda observation, rows: np.zeros((len(rows), 1), dtype=np.int64), steps=steps)
    assert played.rewards.shape == (steps, 2)


def test_no_episodes_give_no_rows_and_build_no_env():
    assert play_episodes([], []) == []


def test_played_rows_carry_the_metrics_the_env_options_add(bank_dir):
    from curves.bank import load_bank
    from mara_agents import FIFOPolicy
    from mara_env.tasksets import TASK_SETS

    bank = load_bank(bank_dir)
    episodes = [TASK_SETS["id"].sample(bank, np.random.default_rng(seed), 0.1, 40, ("test",)) for seed in (0, 1)]
    rows = play_episodes([FIFOPolicy(), FIFOPolicy()], episodes, bank=str(bank_dir), arrival_window=40,
                         node_speeds=(1, 2, 1, 1, 1, 1, 3), switch_cost=1, fairness_metrics=True)
    assert len(rows) == 2
    for row in rows:
        assert 0.0 < row["setup"] < 1.0 and 0.0 < row["jain_index"] <= 1.0
        assert row["min_family_success_rate"] <= row["success_rate"] <= 1.0
        assert row["return"] == pytest.approx(row["successes"], abs=1e-9)
