"""Privileged experts for imitation: allocators that read what the simulator knows and a policy never sees.

Training only.  :class:`PrivilegedObservation` adds one key to the dict observation, ``true_remaining``: for
each occupied slot, the batches its task still needs before its cumulative-average loss reaches ε, read
from the curve the simulator replays (the curve ahead of a task is never part of the observation).  A task
whose curve never reaches ε within the recorded curve reads as needing more than the curve's remaining
length, so it sorts after every task that can finish.  Empty slots read 0.  :func:`vector_true_remaining`
reads the same for every sub-env of a vector env, for the privileged critic (:mod:`mara_agents.mat.critic`).

:class:`PrivilegedSlackExpert` is the FM-slack ranking (:mod:`mara_agents.allocators.slack`) over these true
demands instead of a forecast: warm-up tasks first (earliest deadline first — a deployed policy must observe a
task before it can know anything about it, so an expert that skipped them could not be imitated), then the
tasks that can still finish by their deadline, least slack first, then the hopeless ones, which are served
only by nodes nothing else needs (serving costs nothing, and greedy MAT decoding is work-conserving anyway).
The MAT student imitates it from the observation and the FM estimates alone
(:mod:`mara_agents.mat.imitation`); the deployed policy never sees ``true_remaining``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from mara_agents.allocators.slack import SlackPolicy
from mara_env.batched import BatchSimulator
from mara_env.gym_env import MARAEnv
from mara_env.simulator import Simulator
from mara_env.vector_env import MARAVectorEnv

TRUE_REMAINING = "true_remaining"


def first_crossings(sim: Simulator) -> np.ndarray:
    """Per task of the loaded episode: the first batch count s ≥ 1 at which L(s) ≤ ε, or the table width + 1
    when the replayed curve never gets there."""
    below = sim.loss_table[:, 1:] <= sim.eps[:, None]
    width = below.shape[1]
    return np.where(below.any(axis=1), below.argmax(axis=1) + 1, width + 1)


def true_remaining(sim: Simulator, crossings: np.ndarray) -> np.ndarray:
    """(K,) float32: batches each occupied slot's task still needs to reach ε (0 for empty slots)."""
    tasks = sim.slot_task
    occupied = tasks >= 0
    remaining = np.zeros(tasks.shape, dtype=np.float32)
    remaining[occupied] = crossings[tasks[occupied]] - sim.batches[tasks[occupied]]
    return remaining


def batched_true_remaining(sim: BatchSimulator) -> np.ndarray:
    """(N, K) float32: :func:`true_remaining` for every episode of a batched simulator (0 for empty slots)."""
    remaining = np.zeros(sim.slot_task.shape, dtype=np.float32)
    occupied = sim.slot_task >= 0
    if not occupied.any():
        return remaining
    losses = sim.table.loss
    curves = losses[sim.slot_curve[occupied] // losses.shape[1]]  # slot_curve is the row's flat offset
    below = curves[:, 1:] <= sim.slot_eps[occupied][:, None]
    crossings = np.where(below.any(axis=1), below.argmax(axis=1) + 1, below.shape[1] + 1)
    remaining[occupied] = crossings - sim.slot_batches[occupied]
    return remaining


def vector_true_remaining(envs: gym.vector.VectorEnv) -> np.ndarray:
    """(N, K) float32 true remaining batches of every sub-env of a MARA vector env: the native one
    (:class:`~mara_env.vector_env.MARAVectorEnv`) or a ``SyncVectorEnv`` of single MARA envs."""
    base = envs.unwrapped
    if isinstance(base, MARAVectorEnv):
        return batched_true_remaining(base.sim)
    if isinstance(base, gym.vector.SyncVectorEnv) and all(isinstance(env.unwrapped, MARAEnv) for env in base.envs):
        sims = [env.unwrapped.engine.sim for env in base.envs]
        return np.stack([true_remaining(sim, first_crossings(sim)) for sim in sims])
    raise TypeError(f"true remaining batches need a MARA vector env (native or sync), got {type(base).__name__}")


class PrivilegedObservation(gym.ObservationWrapper):
    """Adds ``true_remaining`` (K,) to the dict observation of a MARA Gymnasium env (training only)."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        if not isinstance(env.observation_space, spaces.Dict):
            raise ValueError("PrivilegedObservation needs the dict observation (observation='dict')")
        sim = env.unwrapped.engine.sim
        self.observation_space = spaces.Dict({
            **env.observation_space.spaces,
            TRUE_REMAINING: spaces.Box(0.0, float(sim.history_width + 1), (sim.num_slots,), np.float32)})
        self._episode: Any = None
        self._crossings = np.zeros(0, dtype=np.int64)

    def observation(self, observation: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        sim = self.env.unwrapped.engine.sim
        if sim.episode is not self._episode:  # tabulated once per episode
            self._episode, self._crossings = sim.episode, first_crossings(sim)
        return {**observation, TRUE_REMAINING: true_remaining(sim, self._crossings)}


class PrivilegedSlackExpert(SlackPolicy):
    """The slack ranking over the true remaining batches in ``observation["true_remaining"]``."""

    def __init__(self) -> None:  # no predictor: the demand is read from the privileged observation
        self.demand = None

    def act_batch(self, observations: Sequence[dict[str, np.ndarray]]) -> np.ndarray:
        """Actions (N, M); each observation must carry ``true_remaining`` (:class:`PrivilegedObservation`)."""
        if any(TRUE_REMAINING not in observation for observation in observations):
            raise ValueError(f"the privileged expert needs observations with {TRUE_REMAINING!r} "
                             "(wrap the env in PrivilegedObservation)")
        return np.stack([self.decide(observation, observation[TRUE_REMAINING]) for observation in observations])
