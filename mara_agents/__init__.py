"""Allocators and demand predictors for MARA-v0.

``make_policy(name)`` builds a registered allocator; every allocator follows the :class:`Policy` protocol
(``reset()``, ``act(observation) -> joint action``) and plays the PettingZoo envs through :class:`NodeActor`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mara_agents.baselines import EDFPolicy, FIFOPolicy, RandomPolicy
from mara_agents.policy import NodeActor, Policy

POLICIES: dict[str, Callable[..., Policy]] = {
    "fifo": FIFOPolicy,
    "edf": EDFPolicy,
    "random": RandomPolicy,
}


def make_policy(name: str, **kwargs: Any) -> Policy:
    """Build a registered allocator by name (``fifo``, ``edf``, ``random``, ...)."""
    if name not in POLICIES:
        raise ValueError(f"unknown policy {name!r}; choose one of {sorted(POLICIES)}")
    return POLICIES[name](**kwargs)


__all__ = ["POLICIES", "EDFPolicy", "FIFOPolicy", "NodeActor", "Policy", "RandomPolicy", "make_policy"]
