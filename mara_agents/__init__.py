"""Allocators and demand predictors for MARA-v0.

``make_policy(name)`` builds a registered allocator (:mod:`mara_agents.allocators`); every allocator follows the
:class:`Policy` protocol (``reset()``, ``act(observation) -> joint action``) and plays the PettingZoo envs
through :class:`NodeActor`.  Demand estimates come from :mod:`mara_agents.predictors` (``make_demand``);
MAT's model and training live in :mod:`mara_agents.mat`; ``evaluate.py`` runs :mod:`mara_agents.evaluation`.
"""

from __future__ import annotations

from mara_agents.allocators import POLICIES, EDFPolicy, FIFOPolicy, Method, RandomPolicy, make_policy
from mara_agents.policy import NodeActor, Policy

__all__ = ["POLICIES", "EDFPolicy", "FIFOPolicy", "Method", "NodeActor", "Policy", "RandomPolicy", "make_policy"]
