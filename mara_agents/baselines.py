"""Import path kept for callers outside this package (``mara_env/bench.py``, ``tests/env``); the allocators
live in :mod:`mara_agents.allocators.naive` — import them from there or from :mod:`mara_agents`."""

from mara_agents.allocators.naive import EDFPolicy, FIFOPolicy, RandomPolicy, serve_in_order

__all__ = ["EDFPolicy", "FIFOPolicy", "RandomPolicy", "serve_in_order"]
