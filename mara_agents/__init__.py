"""Allocators and demand predictors for MARA-v0.

``make_policy(name)`` builds a registered allocator; every allocator follows the :class:`Policy` protocol
(``reset()``, ``act(observation) -> joint action``) and plays the PettingZoo envs through :class:`NodeActor`.
"""

from __future__ import annotations

from mara_agents.baselines import EDFPolicy, FIFOPolicy, RandomPolicy
from mara_agents.policy import NodeActor, Policy
from mara_agents.registry import POLICIES, make_policy


__all__ = ["POLICIES", "EDFPolicy", "FIFOPolicy", "NodeActor", "Policy", "RandomPolicy", "make_policy"]
