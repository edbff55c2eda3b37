"""Environments over the agents' predictors.

* :mod:`~mara_agents.envs.forecast` — ``MARA-Forecast-v0``: MARA-v0 with a frozen predictor's forecast in the
  observation (registered by ``import mara_agents``).
* :mod:`~mara_agents.envs.sb3_vec` — Stable-Baselines3's ``VecEnv`` over the native vector env.
"""
