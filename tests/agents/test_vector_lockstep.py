"""runner.play_vector_lockstep: each episode's row comes from the step that episode ended, never later."""

from __future__ import annotations

import numpy as np

from mara_agents import runner


class ScriptedVectorEnv:
    """Two sub-envs: sub-env 0 ends at step 1, restarts and ends again at step 3; sub-env 1 ends at step 4.
    Each step's reward and episode metric is the step number, so a row shows which step wrote it."""

    def __init__(self) -> None:
        self.action_space = np.zeros((2, 1))  # only its shape is read
        self.unwrapped = self
        self.t = 0

    def reset(self, **_: object) -> tuple[dict[str, np.ndarray], dict]:
        return {"x": np.zeros((2, 1))}, {}

    def step(self, actions: np.ndarray) -> tuple:
        self.t += 1
        terminated = np.array([self.t in (1, 3), self.t == 4])
        info = {"episode_metrics": {"ended_at": np.full(2, float(self.t)), "_ended_at": terminated}}
        return {"x": np.zeros((2, 1))}, np.full(2, float(self.t)), terminated, np.zeros(2, bool), info

    def close(self) -> None:
        pass


class Idle:
    def reset(self) -> None:
        pass

    def act_batch(self, observations: list) -> np.ndarray:
        return np.zeros((len(observations), 1), dtype=np.int64)


def test_a_restarted_sub_env_ending_again_does_not_overwrite_its_episode_row(monkeypatch):
    monkeypatch.setattr(runner.gym, "make_vec", lambda *args, **kwargs: ScriptedVectorEnv())
    ended = []
    rows = runner.play_vector_lockstep(Idle(), [object(), object()],
                                       on_end=lambda env, i: ended.append((i, env.t)) or {"seen_at": env.t})
    assert [row["ended_at"] for row in rows] == [1.0, 4.0]
    assert [row["return"] for row in rows] == [1.0, 1.0 + 2.0 + 3.0 + 4.0]
    assert ended == [(0, 1), (1, 4)] and [row["seen_at"] for row in rows] == [1, 4]
