"""Evaluation of allocators on the fixed workloads: the paper's experiments plus the Clairvoyant bound.

* :mod:`~mara_agents.evaluation.harness` — plan, cache and run episodes in parallel processes.
* :mod:`~mara_agents.evaluation.methods` — building registered methods (read from the one registry,
  ``mara_agents.allocators.registry``) and user policies (``--policy``).
* :mod:`~mara_agents.evaluation.clairvoyant` — the exact MILP bound with known curves.
* :mod:`~mara_agents.evaluation.experiments` — Tables 2–5, Figure 4 and the Clairvoyant table as grids.
* :mod:`~mara_agents.evaluation.paper` — the paper's published numbers beside ours.
* ``python evaluate.py`` (:mod:`~mara_agents.evaluation.cli`) runs it all and writes ``results/``.
"""

from mara_agents.evaluation.clairvoyant import clairvoyant_successes
from mara_agents.evaluation.harness import Results, Settings, evaluate
from mara_agents.evaluation.methods import MethodError, UserPolicy, parse_user_policy

__all__ = ["MethodError", "Results", "Settings", "UserPolicy", "clairvoyant_successes", "evaluate",
           "parse_user_policy"]
