"""The shared shape of allocators that rank tasks from a frozen predictor's remaining-demand estimates.

LARA (:mod:`~mara_agents.allocators.lara`) and the slack ranking (:mod:`~mara_agents.allocators.slack`) differ
only in how they turn one observation and its slots' estimates into a joint action.  Everything else is
common and lives here: they are self-contained (each computes the estimates from the raw observation's history
through its own demand stage, :class:`~mara_agents.predictors.demand.Demand`, so they play the plain Gymnasium
env, workload files and, via :class:`~mara_agents.play.policy.NodeActor`, the PettingZoo envs without a wrapper),
and ``act_batch`` decides for many episodes with one predictor call, which the evaluation harness uses to play
workloads in lock-step.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mara_agents.predictors.base import Predictor
from mara_agents.predictors.demand import Demand, as_demand


class PredictiveAllocator:
    """Base class: subclasses implement :meth:`decide` for one observation."""

    def __init__(self, demand: Demand | Predictor):
        self.demand = as_demand(demand)

    def reset(self) -> None:
        """Stateless between steps: every decision is recomputed from the observation."""

    def act(self, observation: dict[str, np.ndarray]) -> np.ndarray:
        return self.act_batch([observation])[0]

    def act_batch(self, observations: Sequence[dict[str, np.ndarray]]) -> np.ndarray:
        """Actions (N, M): one predictor call for all N observations, then one decision each."""
        _, predicted = self.demand.stacked(observations)
        return np.stack([self.decide(observation, row) for observation, row in zip(observations, predicted)])

    def decide(self, observation: dict[str, np.ndarray], predicted: np.ndarray) -> np.ndarray:
        """The joint action (M,) for one observation given its slots' predicted remaining batches (K,)."""
        raise NotImplementedError
