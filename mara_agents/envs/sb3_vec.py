"""Stable-Baselines3's ``VecEnv`` over MARA's native vector env, so SB3 and sb3-contrib learners step all their
environments (and, on ``MARA-Forecast-v0``, call the predictor) in one batch.

SB3's own ``make_vec_env`` builds a ``DummyVecEnv`` of N single envs: N Python environments, and on the
forecast env N predictor calls per step. :func:`make_sb3_vec_env` builds one
``gym.make_vec(env_id, num_envs=N, vectorization_mode="vector_entry_point")`` instead and
:class:`SB3VectorEnv` gives it SB3's contract:

* **same-step reset** — SB3 expects a finished sub-env to come back already reset, with its last observation
  in ``info["terminal_observation"]``. The native env runs with ``autoreset_mode="Disabled"``; after each
  step the adapter resets exactly the finished sub-envs (``reset(options={"reset_mask": done})``), which keeps
  each sub-env's own generator, so sub-env i plays the episodes ``DummyVecEnv`` would give it from the same
  seed (``seed + i``, SB3's seeding).
* **infos** — one dict per sub-env, holding that sub-env's entries of the batched info (``successes``,
  ``conflicts``, ``repaired``, and ``episode_metrics`` on the step it ends), plus SB3's
  ``terminal_observation`` and ``TimeLimit.truncated``.
* **masks** — ``env_method("action_masks")`` answers from the native env's batched ``action_masks()``, which is
  what sb3-contrib's ``MaskablePPO`` asks for.

Wrap it in SB3's ``VecMonitor`` for the episode returns SB3 logs (:func:`make_sb3_vec_env` does). Needs the
``[sb3]`` extra.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from stable_baselines3.common.vec_env import VecEnv, VecMonitor

MASKS_METHOD = "action_masks"


class SB3VectorEnv(VecEnv):
    """A Gymnasium vector env with ``autoreset_mode`` DISABLED and a ``reset_mask`` reset option (MARA's native
    vector env) as an SB3 ``VecEnv``; see the module docstring."""

    def __init__(self, env: gym.vector.VectorEnv):
        if env.metadata.get("autoreset_mode") != AutoresetMode.DISABLED:
            raise ValueError("SB3VectorEnv needs a vector env made with autoreset_mode=AutoresetMode.DISABLED, got "
                             f"{env.metadata.get('autoreset_mode')!r}")
        self.env = env
        self._actions: np.ndarray | None = None
        super().__init__(env.num_envs, env.single_observation_space, env.single_action_space)

    def reset(self) -> Any:
        """Start every sub-env, with the seeds of the last ``seed()`` call (then forgotten, as SB3 does)."""
        seeds = None if all(seed is None for seed in self._seeds) else list(self._seeds)
        options = self._options[0] if self._options and all(o == self._options[0] for o in self._options) else {}
        if any(options != o for o in self._options):
            raise ValueError("SB3VectorEnv passes one options dict to every sub-env; got different ones")
        observation, info = self.env.reset(seed=seeds, options=options or None)
        self.reset_infos = self._split(info, np.ones(self.num_envs, dtype=bool))
        self._reset_seeds()
        self._reset_options()
        return observation

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = actions

    def step_wait(self) -> tuple[Any, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """One step of every sub-env; finished ones are reset at once (their last observation in the info)."""
        observation, rewards, terminated, truncated, info = self.env.step(self._actions)
        done = np.logical_or(terminated, truncated)
        infos = self._split(info, np.ones(self.num_envs, dtype=bool))
        if done.any():
            for row in np.flatnonzero(done).tolist():
                infos[row]["terminal_observation"] = _row(observation, row)
                infos[row]["TimeLimit.truncated"] = bool(truncated[row] and not terminated[row])
            observation, reset_info = self.env.reset(options={"reset_mask": done})
            for row, extra in zip(np.flatnonzero(done).tolist(), self._split(reset_info, done)):
                self.reset_infos[row] = extra
        return observation, np.asarray(rewards, dtype=np.float32), done, infos

    def _split(self, info: dict[str, Any], rows: np.ndarray) -> list[dict[str, Any]]:
        """Per-sub-env dicts of a batched Gymnasium info (entries under their ``_key`` masks) for ``rows``."""
        split: list[dict[str, Any]] = []
        for row in np.flatnonzero(rows).tolist():
            entry: dict[str, Any] = {}
            for key, value in info.items():
                if key.startswith("_") or not info.get(f"_{key}", np.ones(self.num_envs, bool))[row]:
                    continue
                if isinstance(value, dict):
                    entry[key] = {name: float(values[row]) for name, values in value.items() if not name.startswith("_")}
                else:  # a NumPy scalar becomes a Python one; an object entry (per-task outcomes) stays as it is
                    entry[key] = value[row].item() if isinstance(value[row], np.generic) else value[row]
            split.append(entry)
        return split

    def close(self) -> None:
        self.env.close()

    def _indices(self, indices: Any) -> list[int]:
        return list(self._get_indices(indices))

    def has_attr(self, attr_name: str) -> bool:
        return hasattr(self.env, attr_name)

    def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
        """The vector env's attribute, once per requested sub-env (the sub-envs share one object)."""
        value = getattr(self.env, attr_name)
        return [value for _ in self._indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
        raise AttributeError(f"SB3VectorEnv cannot set {attr_name!r} per sub-env: the sub-envs share one "
                             f"native vector env")

    def env_method(self, method_name: str, *method_args: Any, indices: Any = None, **method_kwargs: Any) -> list[Any]:
        """``action_masks`` per sub-env from the batched masks; any other method is not per sub-env here."""
        if method_name != MASKS_METHOD:
            raise AttributeError(f"SB3VectorEnv only answers env_method({MASKS_METHOD!r}), got {method_name!r}")
        if method_args or method_kwargs:
            raise TypeError(f"{MASKS_METHOD}() takes no arguments, got {method_args!r} and {method_kwargs!r}")
        masks = self.env.action_masks()
        return [masks[row] for row in self._indices(indices)]

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: Any = None) -> list[bool]:
        """No sub-env is wrapped: the native vector env holds them as arrays, not as Gymnasium envs."""
        del wrapper_class
        return [False for _ in self._indices(indices)]


def _row(observation: Any, row: int) -> Any:
    """Sub-env ``row``'s observation, copied, from a batched array or a dict of them."""
    if isinstance(observation, dict):
        return {key: np.array(value[row]) for key, value in observation.items()}
    return np.array(observation[row])


def make_sb3_vec_env(env_id: str, n_envs: int, seed: int | None = None, **env_kwargs: Any) -> VecMonitor:
    """``n_envs`` sub-envs of ``env_id`` (``MARA-v0`` or ``MARA-Forecast-v0``) as one native vector env, in
    :class:`SB3VectorEnv` and SB3's ``VecMonitor``; seeded like ``make_vec_env`` (sub-env i from
    ``seed + i`` at the first reset)."""
    native = gym.make_vec(env_id, num_envs=n_envs, vectorization_mode="vector_entry_point",
                          autoreset_mode=AutoresetMode.DISABLED, **env_kwargs)
    env = SB3VectorEnv(native)
    if seed is not None:
        env.seed(seed)
    return VecMonitor(env)


__all__ = ("SB3VectorEnv", "make_sb3_vec_env")
