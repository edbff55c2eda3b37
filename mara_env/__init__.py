"""MARA-v0: allocate discrete compute nodes among learning tasks with deadlines (Gymnasium + PettingZoo).

``import mara_env`` registers ``MARA-v0`` with Gymnasium (``gym.make("MARA-v0")``; ``gym.make_vec("MARA-v0",
num_envs=N)`` gives the native batched :class:`mara_env.vector_env.MARAVectorEnv`, ``vectorization_mode="sync"``
or ``"async"`` the generic wrappers) and, where the installed PettingZoo has a registry, the AEC and parallel
variants with PettingZoo. ``MARA-Forecast-v0`` is registered as a placeholder that asks for ``import mara_agents``,
which registers the env itself. ``MARA-live-v0`` is the same contract over real training batches run on Ray
(:class:`mara_env.live.env.LiveMARAEnv`; needs the ``[ray]`` extra). This package imports neither torch nor
``mara_agents``.
"""

from __future__ import annotations

from typing import Any, NoReturn

import gymnasium
import pettingzoo

from mara_env.config import MARAConfig
from mara_env.pettingzoo_env import env, parallel_env
from mara_env.simulator import oracle_successes
from mara_env.tasksets import TASK_SETS, register_task_set
from mara_env.workload import Episode, Workload, load_workload, save_workload

__all__ = ["MARAConfig", "Episode", "Workload", "TASK_SETS", "env", "parallel_env", "load_workload",
           "save_workload", "oracle_successes", "register_task_set"]

ENV_ID = "MARA-v0"
LIVE_ENV_ID = "MARA-live-v0"
FORECAST_ENV_ID = "MARA-Forecast-v0"  # registered by mara_agents (it needs torch); until then, the placeholder


def forecast_env_placeholder(**_: Any) -> NoReturn:
    """What ``gym.make("MARA-Forecast-v0")`` calls before ``import mara_agents`` replaces it: an error that
    says which import registers the env, where Gymnasium alone would only say that the id does not exist."""
    raise gymnasium.error.Error(f"{FORECAST_ENV_ID} is registered by the mara_agents package (it needs torch): "
                                "`import mara_agents` before gym.make")


if ENV_ID not in gymnasium.registry:
    gymnasium.register(id=ENV_ID, entry_point="mara_env.gym_env:MARAEnv",
                       vector_entry_point="mara_env.vector_env:MARAVectorEnv")
if LIVE_ENV_ID not in gymnasium.registry:
    gymnasium.register(id=LIVE_ENV_ID, entry_point="mara_env.live.env:LiveMARAEnv")
if FORECAST_ENV_ID not in gymnasium.registry:
    gymnasium.register(id=FORECAST_ENV_ID, entry_point=forecast_env_placeholder,
                       vector_entry_point=forecast_env_placeholder)

if hasattr(pettingzoo, "register") and hasattr(pettingzoo, "aec_registry"):
    if ENV_ID not in pettingzoo.aec_registry:
        pettingzoo.register("aec", ENV_ID, "mara_env.pettingzoo_env:env")
    if ENV_ID not in pettingzoo.parallel_registry:
        pettingzoo.register("parallel", ENV_ID, "mara_env.pettingzoo_env:parallel_env")
