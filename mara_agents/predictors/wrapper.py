"""Plug a frozen predictor into the environment observation (DESIGN §5, paper Algorithm 1 line 17).

The wrappers add ``predicted_remaining`` (K,) float32 — the estimated remaining batches per slot, 0 for
empty slots and the remaining cap before 4 observations — computed in one batched predictor call per step
(per vector step for :class:`PredictedRemainingVector`).  Allocators read it from the observation.

Everything is read from the observation contract (``mara_env/features.py``): ``tasks`` (K, F),
``history`` (K, H_max), ``history_len`` (K,) and ``budget`` (K,), the available time B per slot.  A slot's cap
is its remaining *generation cap* 2·B − s: every bank curve is recorded to twice its available time (paper
Appendix A.2, "each task runs to twice its scheduling budget"), s batches are done, and an estimate may
not look past the recorded curve.  The cap deliberately reaches beyond the deadline (at most B − s more
batches can still run): a task whose forecast never meets ε then reads as needing more than it has left,
instead of exactly the steps left, which would make "just fits" and "never gets there" identical.

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

from mara_env.features import TASK_FEATURE_INDEX
from mara_agents.predictors.base import Predictor, PredictorQuery

KEY = "predicted_remaining"
GENERATION_CAP_FACTOR = 2  # curves are recorded to twice the available time (curves/README.md)
_REQUIRED = ("tasks", "history", "history_len", "budget")


def observation_query(observation: Mapping[str, np.ndarray]) -> PredictorQuery:
    """One :class:`PredictorQuery` row per slot of an observation with any leading batch axes."""
    tasks = np.asarray(observation["tasks"])
    features = tasks.reshape(-1, tasks.shape[-1]).astype(np.float64)
    present = features[:, TASK_FEATURE_INDEX["present"]] > 0
    budget = np.asarray(observation["budget"], dtype=np.float64).reshape(-1)
    length = np.where(present, np.asarray(observation["history_len"]).reshape(-1), 0).astype(np.int64)
    cap = np.where(present, np.maximum(GENERATION_CAP_FACTOR * budget - length, 0.0), 0.0)
    history = np.asarray(observation["history"])
    return PredictorQuery(
        history=history.reshape(-1, history.shape[-1]),
        length=length,
        batch_size=np.rint(np.exp(features[:, TASK_FEATURE_INDEX["log_batch_size"]])),  # an integer, stored as a log
        lr=np.exp(features[:, TASK_FEATURE_INDEX["log_lr"]]),
        eps=features[:, TASK_FEATURE_INDEX["target_loss"]],
        cap=cap)


def predict_remaining(observation: Mapping[str, np.ndarray], predictor: Predictor) -> np.ndarray:
    """Remaining-batch estimates shaped like ``history_len`` (…, K), float32, in one predictor call."""
    estimate = predictor.predict(observation_query(observation)).remaining
    return estimate.astype(np.float32).reshape(np.shape(observation["history_len"]))


def add_predictions(observation: Mapping[str, np.ndarray], predictor: Predictor) -> dict[str, np.ndarray]:
    """A new observation dict with ``predicted_remaining`` added; works for single and stacked observations."""
    return {**observation, KEY: predict_remaining(observation, predictor)}


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

    def __init__(self, env: gym.Env, predictor: Predictor):
        gym.utils.RecordConstructorArgs.__init__(self, predictor=predictor)  # lets env.spec rebuild the stack
        gym.ObservationWrapper.__init__(self, env)
        self.predictor = predictor
        self.observation_space = _extended_space(env.observation_space)

    def observation(self, observation: dict[str, Any]) -> dict[str, Any]:
        """The observation plus one batched prediction for all slots."""
        return add_predictions(observation, self.predictor)


class PredictedRemainingVector(gym.vector.VectorObservationWrapper):
    """The same for ``gymnasium.make_vec`` environments: one predictor call for all slots of all envs."""

    def __init__(self, env: gym.vector.VectorEnv, predictor: Predictor):
        super().__init__(env)
        self.predictor = predictor
        self.single_observation_space = _extended_space(env.single_observation_space)
        self.observation_space = batch_space(self.single_observation_space, env.num_envs)

    def observations(self, observations: dict[str, Any]) -> dict[str, Any]:
        """The stacked observations plus ``predicted_remaining`` (num_envs, K)."""
        return add_predictions(observations, self.predictor)


def _node_space(space: gym.spaces.Dict) -> gym.spaces.Dict:
    """A PettingZoo node space ``{"observation": Dict, "action_mask": …}`` with the inner Dict extended."""
    return gym.spaces.Dict({**space.spaces, "observation": _extended_space(space["observation"])})


class _SharedPrediction:
    """Predicts once per simulator step: nodes of one step see identical per-slot arrays, so the estimate
    is reused until those arrays change."""

    def __init__(self, predictor: Predictor):
        self.predictor = predictor
        self._key: bytes | None = None
        self._value: np.ndarray | None = None

    def __call__(self, inner: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        key = b"".join(np.ascontiguousarray(inner[k]).tobytes() for k in ("tasks", "history_len", "budget"))
        if key != self._key:
            self._key, self._value = key, predict_remaining(inner, self.predictor)
        return {**inner, KEY: self._value.copy()}


class PredictedRemainingAEC(BaseWrapper):
    """Adds ``predicted_remaining`` (K,) to each node's ``observation`` in the PettingZoo AEC env."""

    def __init__(self, env: AECEnv, predictor: Predictor):
        super().__init__(env)
        self.predictor = predictor
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

    def __init__(self, env: ParallelEnv, predictor: Predictor):
        super().__init__(env)
        self.predictor = predictor
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
