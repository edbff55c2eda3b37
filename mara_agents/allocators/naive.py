"""Naive allocators that need no predictor: FIFO, EDF (the paper's baselines) and uniform random.

FIFO and EDF are work-conserving: every node serves a task while unserved active tasks remain.  Both read
only the observation, in whole steps (:mod:`~mara_agents.rules.slots`), so equal deadlines or equal waits tie
exactly and ties go to the lower slot index.
"""

from __future__ import annotations

import math

import numpy as np

from mara_agents.rules.nodes import RemembersSwitchCost, has_nodes, place
from mara_agents.rules.slots import present_slots, serve_in_order, steps_since_arrival, steps_to_deadline


class RankingPolicy(RemembersSwitchCost):
    """A rule that serves the M first slots of a ranking (:meth:`rank`).  With node features
    (:mod:`~mara_agents.rules.nodes`) the same M tasks are served and placed in rank order: the fastest
    free node to the first, and with a switching cost a running task keeps its node.  The ranking itself is
    stateless; :meth:`reset` forgets the switching cost seen."""

    def rank(self, observation: dict[str, np.ndarray]) -> np.ndarray:
        """The occupied slots, most urgent first."""
        raise NotImplementedError

    def act(self, observation: dict[str, np.ndarray]) -> np.ndarray:
        order = self.rank(observation)
        num_nodes = observation["action_mask"].shape[0]
        if has_nodes(observation):
            return place(order[:num_nodes], self.switch.view(observation))
        return serve_in_order(order, num_nodes)


class FIFOPolicy(RankingPolicy):
    """Serve the M earliest arrivals among active tasks."""

    def rank(self, observation: dict[str, np.ndarray]) -> np.ndarray:
        slots = present_slots(observation)
        return slots[np.argsort(-steps_since_arrival(observation, slots), kind="stable")]


class EDFPolicy(RankingPolicy):
    """Serve the M active tasks with the earliest deadlines."""

    def rank(self, observation: dict[str, np.ndarray]) -> np.ndarray:
        slots = present_slots(observation)
        return slots[np.argsort(steps_to_deadline(observation, slots), kind="stable")]


class RandomPolicy:
    """A joint action drawn uniformly from all legal matchings (nodes → distinct occupied slots or idle).

    With n occupied slots and M nodes there are C(n, j)·M!/(M − j)! matchings that serve j tasks; we draw j
    with that weight, then the j slots and the j serving nodes uniformly.
    """

    def __init__(self, seed: int | None = None):
        self.seed = seed
        self.rng = np.random.default_rng(seed)

    def reset(self) -> None:
        """Keep the generator running across episodes: the sequence depends only on the seed."""

    def act(self, observation: dict[str, np.ndarray]) -> np.ndarray:
        slots = present_slots(observation)
        m, n = observation["action_mask"].shape[0], slots.size
        counts = np.array([math.comb(n, j) * math.perm(m, j) for j in range(min(m, n) + 1)], dtype=float)
        served = int(self.rng.choice(counts.size, p=counts / counts.sum()))
        action = np.zeros(m, dtype=np.int64)
        nodes = self.rng.choice(m, size=served, replace=False)
        action[nodes] = self.rng.choice(slots, size=served, replace=False) + 1
        return action
