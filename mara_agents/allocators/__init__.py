"""Every allocator behind the :class:`~mara_agents.play.policy.Policy` protocol, and the one registry of them.

* :mod:`~mara_agents.allocators.naive` — FIFO, EDF (the paper's baselines) and uniform random.
* :mod:`~mara_agents.allocators.lara` — LARA over WLS or FM; :mod:`~mara_agents.allocators.slack` — FM-slack.
* the trained MAT policy (inference only) is :mod:`~mara_agents.mat.policy`, registered here.
* :mod:`~mara_agents.allocators.registry` — :data:`POLICIES` and :func:`make_policy`.
"""

from mara_agents.allocators.naive import EDFPolicy, FIFOPolicy, RandomPolicy
from mara_agents.allocators.registry import POLICIES, Method, make_policy

__all__ = ["POLICIES", "EDFPolicy", "FIFOPolicy", "Method", "RandomPolicy", "make_policy"]
