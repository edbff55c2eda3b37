"""Allocators and demand predictors for MARA-v0.

``make_policy(name)`` builds a registered allocator (:mod:`mara_agents.allocators`); every allocator follows the
:class:`Policy` protocol (``reset()``, ``act(observation) -> joint action``) and plays the PettingZoo envs
through :class:`NodeActor`.  Demand estimates come from :mod:`mara_agents.predictors` (``make_demand``);
MAT's model and policy live in :mod:`mara_agents.mat`, its training in :mod:`mara_agents.training`;
``evaluate.py`` runs :mod:`mara_agents.evaluation`.  The folders by role, in their import order:
``play``, ``predictors``, ``rules``, ``envs``, ``mat``, ``allocators``, ``training``, ``evaluation``, ``live``
(``docs/layout.md``).

Importing it registers ``MARA-Forecast-v0`` (:mod:`mara_agents.envs.forecast`): MARA-v0 with a frozen
predictor's forecast in the observation, as a Gymnasium env, a native vector env and PettingZoo envs.
"""

from __future__ import annotations

import gymnasium
import pettingzoo

from mara_agents.allocators import POLICIES, EDFPolicy, FIFOPolicy, Method, RandomPolicy, make_policy
from mara_agents.play.policy import NodeActor, Policy

__all__ = ["POLICIES", "EDFPolicy", "FIFOPolicy", "Method", "NodeActor", "Policy", "RandomPolicy", "make_policy"]

from mara_agents.envs.forecast import ENV_ID as FORECAST_ENV_ID  # noqa: E402
from mara_env import forecast_env_placeholder  # noqa: E402

_registered = gymnasium.registry.get(FORECAST_ENV_ID)
if _registered is None or _registered.entry_point is forecast_env_placeholder:  # replace mara_env's placeholder
    gymnasium.registry.pop(FORECAST_ENV_ID, None)
    gymnasium.register(id=FORECAST_ENV_ID, entry_point="mara_agents.envs.forecast:ForecastEnv",
                       vector_entry_point="mara_agents.envs.forecast:ForecastVectorEnv")
if hasattr(pettingzoo, "register") and hasattr(pettingzoo, "aec_registry"):
    if FORECAST_ENV_ID not in pettingzoo.aec_registry:
        pettingzoo.register("aec", FORECAST_ENV_ID, "mara_agents.envs.forecast:env")
    if FORECAST_ENV_ID not in pettingzoo.parallel_registry:
        pettingzoo.register("parallel", FORECAST_ENV_ID, "mara_agents.envs.forecast:parallel_env")
