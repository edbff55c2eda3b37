"""Put the demand stage's estimates into the environment observation (paper Algorithm 1 line 17).

The wrappers add ``predicted_remaining`` (K,) float32 — the estimated remaining batches per slot, 0 for
empty slots and the remaining generation cap before 4 observations (see :mod:`~mara_agents.predictors.demand`)
— computed in one batched predictor call per step (per vector step for :class:`PredictedRemainingVector`).
Each wrapper takes a predictor or a :class:`~mara_agents.predictors.demand.Demand` and goes through the same
demand stage as the allocators.

They need the ``dict`` observation. For the ``flat`` and ``rllib`` formats, and for features a learner can use
directly (slack, feasibility, FM-slack's ranking), use ``MARA-Forecast-v0`` (:mod:`mara_agents.envs.forecast`).

For PettingZoo, :class:`PredictedRemainingAEC` and :class:`PredictedRemainingParallel` add the same key to
every node's ``observation`` entry; the per-slot arrays are shared by all nodes of a step, so they too make
one predictor call per simulator step.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import batch_space
from pettingzoo import AECEnv, ParallelEnv
from pettingzoo.utils.wrappers import BaseParallelWrapper, BaseWrapper

from mara_agents.predictors.base import Predictor
from mara_agents.predictors.demand import GENERATION_CAP_FACTOR, Demand, as_demand

KEY = "predicted_remaining"
_REQUIRED = ("tasks", "history", "history_len", "budget")


def add_predictions(observation: Mapping[str, np.ndarray], demand: Demand | Predictor) -> dict[str, np.ndarray]:
    """A new observation dict with ``predicted_remaining`` added; works for single and stacked observations."""
    return {**observation, KEY: as_demand(demand)(observation)}


def _extended_space(space: gym.Space) -> gym.spaces.Dict:
    if not isinstance(space, gym.spaces.Dict) or any(key not in space.spaces for key in _REQUIRED):
        raise ValueError(f"the observation space must be a Dict with keys {_REQUIRED}, got {space}")
    # An estimate never exceeds the cap, 2·B − s ≤ 2·B.
    high = GENERATION_CAP_FACTOR * space["budget"].high.astype(np.float32)
    remaining = gym.spaces.Box(low=0.0, high=high, dtype=np.float32)
    return gym.spaces.Dict({**space.spaces, KEY: remaining})


class PredictedRemaining(gym.ObservationWrapper, gym.utils.RecordConstructorArgs):
    """Adds ``predicted_remaining`` (K,) float32 to a single MARA environment's observation.

    Example::

        env = PredictedRemaining(gym.make("MARA-v0"), load_predictor("mara_agents/predictors/checkpoints/fm.pt"))
    """

    def __init__(self, env: gym.Env, predictor: Demand | Predictor):
        gym.utils.RecordConstructorArgs.__init__(self, predictor=predictor)  # lets env.spec rebuild the stack
        gym.ObservationWrapper.__init__(self, env)
        self.demand = as_demand(predictor)
        self.observation_space = _extended_space(env.observation_space)

    def observation(self, observation: dict[str, Any]) -> dict[str, Any]:
        """The observation plus one batched prediction for all slots."""
        return add_predictions(observation, self.demand)


class PredictedRemainingVector(gym.vector.VectorObservationWrapper):
    """The same for ``gymnasium.make_vec`` environments: one predictor call for all slots of all envs."""

    def __init__(self, env: gym.vector.VectorEnv, predictor: Demand | Predictor):
        super().__init__(env)
        self.demand = as_demand(predictor)
        self.single_observation_space = _extended_space(env.single_observation_space)
        self.observation_space = batch_space(self.single_observation_space, env.num_envs)

    def observations(self, observations: dict[str, Any]) -> dict[str, Any]:
        """The stacked observations plus ``predicted_remaining`` (num_envs, K)."""
        return add_predictions(observations, self.demand)


def _node_space(space: gym.spaces.Dict) -> gym.spaces.Dict:
    """A PettingZoo node space ``{"observation": Dict, "action_mask": …}`` with the inner Dict extended."""
    return gym.spaces.Dict({**space.spaces, "observation": _extended_space(space["observation"])})


class _SharedPrediction:
    """Predicts once per simulator step: nodes of one step see identical per-slot arrays, so the estimate
    is reused until those arrays change."""

    def __init__(self, predictor: Demand | Predictor):
        self.demand = as_demand(predictor)
        self._key: bytes | None = None
        self._value: np.ndarray | None = None

    def __call__(self, inner: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        key = b"".join(np.ascontiguousarray(inner[k]).tobytes() for k in ("tasks", "history_len", "budget"))
        if key != self._key:
            self._key, self._value = key, self.demand(inner)
        return {**inner, KEY: self._value.copy()}


class PredictedRemainingAEC(BaseWrapper):
    """Adds ``predicted_remaining`` (K,) to each node's ``observation`` in the PettingZoo AEC env."""

    def __init__(self, env: AECEnv, predictor: Demand | Predictor):
        super().__init__(env)
        self._predict = _SharedPrediction(predictor)
        self._spaces = {agent: _node_space(env.observation_space(agent)) for agent in env.possible_agents}

    def observation_space(self, agent: str) -> gym.spaces.Space:
        """The node's space with ``predicted_remaining`` in its ``observation`` Dict (same object each call)."""
        return self._spaces[agent]

    def observe(self, agent: str) -> dict[str, Any] | None:
        """The node's observation plus the step's shared prediction."""
        observation = super().observe(agent)
        if observation is None:
            return None
        return {**observation, "observation": self._predict(observation["observation"])}


class PredictedRemainingParallel(BaseParallelWrapper):
    """Adds ``predicted_remaining`` (K,) to each node's ``observation`` in the PettingZoo parallel env."""

    def __init__(self, env: ParallelEnv, predictor: Demand | Predictor):
        super().__init__(env)
        self._predict = _SharedPrediction(predictor)
        self._spaces = {agent: _node_space(env.observation_space(agent)) for agent in env.possible_agents}

    def observation_space(self, agent: str) -> gym.spaces.Space:
        """The node's space with ``predicted_remaining`` in its ``observation`` Dict (same object each call)."""
        return self._spaces[agent]

    def _extend(self, observations: dict[str, Any]) -> dict[str, Any]:
        return {agent: {**obs, "observation": self._predict(obs["observation"])}
                for agent, obs in observations.items()}

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None):
        """Reset, then add the prediction to every node's observation."""
        observations, infos = self.env.reset(seed=seed, options=options)
        return self._extend(observations), infos

    def step(self, actions: dict[str, Any]):
        """Step, then add the prediction to every node's observation."""
        observations, rewards, terminations, truncations, infos = self.env.step(actions)
        return self._extend(observations), rewards, terminations, truncations, infos
