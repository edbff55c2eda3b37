"""``MARA-Forecast-v0``: MARA-v0 with a frozen predictor's forecast in the observation, for any learner.

``import mara_agents`` registers ``gym.make("MARA-Forecast-v0", predictor="fm", forecast="median", **options)``
(every ``MARA-v0`` option), ``gym.make_vec("MARA-Forecast-v0", num_envs=N, ...)`` (the native vector env,
:class:`ForecastVectorEnv`), and the PettingZoo constructors :func:`env` and :func:`parallel_env`.

Every step adds F features per slot, computed by :class:`ForecastFeatures` from the one demand stage
(:class:`~mara_agents.predictors.demand.Demand`) in one batched predictor call — for all N sub-envs of a vector
env, and once per simulator step for all nodes of a PettingZoo env. They expose exactly what the FM-slack rule
(:mod:`mara_agents.allocators.slack`) decides on, normalised by each slot's available time B like the other
per-slot features, so a learner can imitate that rule or improve on it:

====  ===================  ==========================================================================
 i    name                 value (0 for an empty slot)
====  ===================  ==========================================================================
 0    forecast_ready       1 once the task has 4 observations (the predictor is trusted), else 0
 1    predicted_remaining  predicted remaining batches / B (before 4 observations: the cap 2·B − s)
 2    slack                (steps to the deadline − predicted remaining) / B
 3    fits                 1 if forecast_ready and slack ≥ 0 (predicted to finish alone in time)
 4    slack_priority       1 − (position in FM-slack's serving order) / K: 1 for the slot it serves first
 5    slack_serves         1 if FM-slack would serve the slot this step (among its first M)
 6+j  slack_node_j         1 if FM-slack's node j serves the slot, j = 0 … M − 1 (its joint action)
 6+M  predicted_q10        ``forecast="samples"`` only: 10 % quantile of FM's per-sample estimates / B
 7+M  predicted_q90        ``forecast="samples"`` only: 90 % quantile of FM's per-sample estimates / B
 8+M  fits_fraction        ``forecast="samples"`` only: share of samples that finish in time (0 in warm-up)
====  ===================  ==========================================================================

The ``slack_node_j`` one-hots are FM-slack's joint action spread over the slots: a per-node policy head
(MaskablePPO's ``MultiDiscrete``, one categorical per node) reads its node's column and copies it with a
single linear map, where a ranking feature alone would need the network to turn "the j-th best slot" into that
slot's index.

In the ``dict`` format they are the entry ``"forecast"`` (K, F); in ``flat`` and ``rllib`` the K · F values
follow the global features, slot by slot (``mara_env.flat``). ``docs/environment.md`` lists the flat layout
index by index.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode
from pettingzoo import AECEnv
from pettingzoo.utils import wrappers

from mara_agents.predictors.base import MIN_OBSERVATIONS, Predictor
from mara_agents.predictors.demand import GENERATION_CAP_FACTOR, PREDICTORS, Demand, make_predictor
from mara_agents.rules.slack import slack_keys
from mara_agents.rules.slots import steps_to_deadline
from mara_env import FORECAST_ENV_ID
from mara_env.config import MARAConfig
from mara_env.features import TASK_FEATURE_INDEX
from mara_env.gym_env import MARAEnv
from mara_env.pettingzoo_env import MARAParallelEnv, raw_env
from mara_env.vector_env import MARAVectorEnv

ENV_ID = FORECAST_ENV_ID
FORECASTS = ("median", "samples")
MEDIAN_FEATURES = ("forecast_ready", "predicted_remaining", "slack", "fits", "slack_priority", "slack_serves")
SAMPLE_FEATURES = ("predicted_q10", "predicted_q90", "fits_fraction")
QUANTILES = (0.1, 0.9)
_PRESENT = TASK_FEATURE_INDEX["present"]
_EMPTY = 3  # the group of an empty slot: after FM-slack's three groups


@lru_cache(maxsize=4)
def shared_predictor(name: str) -> Predictor:
    """The shipped frozen predictor ``name``, loaded once per process (envs only read it)."""
    return make_predictor(name)


def forecast_features(predictor: str | Predictor | Demand, forecast: str, num_nodes: int) -> ForecastFeatures:
    """:class:`ForecastFeatures` over a predictor given by name (``"fm"``, ``"wls"``: the shipped frozen
    ones), as an object, or as a demand stage; ``ValueError`` naming the argument for a bad value."""
    if isinstance(predictor, str):
        if predictor not in PREDICTORS:
            raise ValueError(f"predictor must be one of {PREDICTORS} or a Predictor, got {predictor!r}")
        if forecast == "samples" and predictor != "fm":
            raise ValueError(f"forecast='samples' needs a sampling predictor (predictor='fm'), got {predictor!r}")
        demand = Demand(shared_predictor(predictor), predictor)
    elif isinstance(predictor, Demand):
        demand = predictor
    elif isinstance(predictor, Predictor):
        demand = Demand(predictor)
    else:
        raise ValueError(f"predictor must be one of {PREDICTORS}, a Predictor or a Demand, got {predictor!r}")
    return ForecastFeatures(demand, forecast, num_nodes)


class ForecastFeatures:
    """The forecast's per-slot features (a :class:`mara_env.features.SlotFeatures`): one demand-stage call per
    observation, single or batched."""

    key = "forecast"

    def __init__(self, demand: Demand, forecast: str, num_nodes: int):
        if forecast not in FORECASTS:
            raise ValueError(f"forecast must be one of {FORECASTS}, got {forecast!r}")
        self.demand = demand
        self.forecast = forecast
        self.num_nodes = num_nodes
        self.names = (MEDIAN_FEATURES + tuple(f"slack_node_{node}" for node in range(num_nodes))
                      + (SAMPLE_FEATURES if forecast == "samples" else ()))
        cap = float(GENERATION_CAP_FACTOR)
        bounds = {"predicted_remaining": (0.0, cap), "slack": (-cap, 1.0), "predicted_q10": (0.0, cap),
                  "predicted_q90": (0.0, cap)}
        self.low = np.array([bounds.get(name, (0.0, 1.0))[0] for name in self.names], dtype=np.float32)
        self.high = np.array([bounds.get(name, (0.0, 1.0))[1] for name in self.names], dtype=np.float32)

    def __call__(self, observation: Mapping[str, np.ndarray]) -> np.ndarray:
        """(…, K, F) float32 features of a dict observation with any leading batch axes."""
        predicted, samples = self.demand.forecast(observation)
        if self.forecast == "samples" and samples is None:
            raise ValueError("forecast='samples' needs a predictor that returns per-sample estimates (FM)")
        present = np.asarray(observation["tasks"])[..., _PRESENT] > 0
        budget = np.asarray(observation["budget"], dtype=np.float64)
        per_b = np.divide(1.0, budget, out=np.zeros(budget.shape), where=present)
        steps_left = steps_to_deadline(observation, ...)
        warm = np.asarray(observation["history_len"]) < MIN_OBSERVATIONS
        ready = present & ~warm
        group, within = slack_keys(steps_left, predicted, warm)
        group = np.where(present, group, _EMPTY)
        order = np.lexsort((within, group), axis=-1)
        position = np.argsort(order, axis=-1)
        num_slots = present.shape[-1]
        slack = steps_left - predicted
        columns = [ready, predicted * per_b, slack * per_b, ready & (slack >= 0),
                   np.where(present, 1.0 - position / num_slots, 0.0), present & (position < self.num_nodes)]
        # FM-slack's joint action: node i serves the i-th slot of its order; with no more tasks than nodes it
        # serves every slot in slot order instead (mara_agents.rules.uncontended), which is as good.
        contended = present.sum(axis=-1, keepdims=True) > self.num_nodes
        node = np.where(contended, position, np.cumsum(present, axis=-1) - 1)
        columns += [present & (node == j) for j in range(self.num_nodes)]
        if self.forecast == "samples":
            spread = np.where(np.isnan(samples), predicted[..., None], samples)
            for quantile in np.quantile(spread, QUANTILES, axis=-1):
                columns.append(np.where(present, quantile, 0.0) * per_b)
            in_time = (spread <= steps_left[..., None]).mean(axis=-1)
            columns.append(np.where(ready, in_time, 0.0))
        return np.stack([np.asarray(column, dtype=np.float64) for column in columns], axis=-1).astype(np.float32)


def _with_features(config: MARAConfig | None, overrides: dict[str, Any], predictor: str | Predictor | Demand,
                   forecast: str) -> tuple[MARAConfig, ForecastFeatures]:
    """The env's config (``config`` with the keyword ``overrides``) and its forecast features."""
    merged = (config or MARAConfig()).replace(**overrides)
    return merged, forecast_features(predictor, forecast, merged.num_nodes)


class ForecastEnv(MARAEnv):
    """``gym.make("MARA-Forecast-v0")``: :class:`mara_env.gym_env.MARAEnv` plus the forecast features.

    ``predictor``: ``"fm"`` (default) or ``"wls"`` — the shipped frozen predictors — or a ``Predictor`` /
    ``Demand`` object; ``forecast``: ``"median"`` (6 features per slot) or ``"samples"`` (9, FM only). Every
    other argument is ``MARA-v0``'s.
    """

    def __init__(self, render_mode: str | None = None, config: MARAConfig | None = None,
                 predictor: str | Predictor | Demand = "fm", forecast: str = "median", **overrides: Any):
        super().__init__(render_mode, *_with_features(config, overrides, predictor, forecast))


class ForecastVectorEnv(MARAVectorEnv):
    """``gym.make_vec("MARA-Forecast-v0", num_envs=N)``: the native vector env plus the forecast features, one
    predictor call per step for all N sub-envs; the same trajectories as ``SyncVectorEnv`` over N
    :class:`ForecastEnv` (with a batch-invariant predictor such as WLS, bit for bit)."""

    def __init__(self, num_envs: int, config: MARAConfig | None = None,
                 predictor: str | Predictor | Demand = "fm", forecast: str = "median",
                 autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP, render_mode: str | None = None,
                 copy: bool = True, **overrides: Any):
        merged, features = _with_features(config, overrides, predictor, forecast)
        super().__init__(num_envs, merged, autoreset_mode, render_mode, copy, features)


class ForecastAECEnv(raw_env):
    """The PettingZoo AEC env (``mara_env.pettingzoo_env.raw_env``) plus the forecast features, computed once per
    simulator step for all nodes; ``predictor`` and ``forecast`` as in :class:`ForecastEnv`."""

    metadata = {**raw_env.metadata, "name": "mara_forecast_v0"}

    def __init__(self, render_mode: str | None = None, max_cycles: int | None = None, agent_reward: str = "team",
                 config: MARAConfig | None = None, predictor: str | Predictor | Demand = "fm",
                 forecast: str = "median", **overrides: Any):
        super().__init__(render_mode, max_cycles, agent_reward, *_with_features(config, overrides, predictor, forecast))


class ForecastParallelEnv(MARAParallelEnv):
    """The PettingZoo parallel env plus the forecast features; arguments as in :class:`ForecastAECEnv`."""

    metadata = {**MARAParallelEnv.metadata, "name": "mara_forecast_v0"}

    def __init__(self, render_mode: str | None = None, max_cycles: int | None = None, agent_reward: str = "team",
                 config: MARAConfig | None = None, predictor: str | Predictor | Demand = "fm",
                 forecast: str = "median", **overrides: Any):
        super().__init__(render_mode, max_cycles, agent_reward, *_with_features(config, overrides, predictor, forecast))


def env(**kwargs: Any) -> AECEnv:
    """The forecast AEC env, in PettingZoo's ``OrderEnforcingWrapper`` as ``mara_env.env()`` is."""
    return wrappers.OrderEnforcingWrapper(ForecastAECEnv(**kwargs))


def parallel_env(**kwargs: Any) -> ForecastParallelEnv:
    """The forecast parallel env."""
    return ForecastParallelEnv(**kwargs)
