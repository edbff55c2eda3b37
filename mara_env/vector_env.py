"""The native vector env: ``gym.make_vec("MARA-v0", num_envs=N, vectorization_mode="vector_entry_point")``.

One :class:`MARAVectorEnv` holds N episodes in NumPy arrays (:class:`mara_env.batched.BatchSimulator`) and
steps them all with one fixed sequence of array operations, instead of N Python environments. It is a
drop-in replacement for ``SyncVectorEnv`` over N ``MARA-v0`` envs and returns the same trajectories:

* **seeding** — ``reset(seed=s)`` seeds sub-env i with ``s + i`` (a list gives one seed per sub-env, ``None``
  keeps each sub-env's generator), exactly as ``SyncVectorEnv`` seeds its envs, so sub-env i plays the
  episodes ``gym.make("MARA-v0").reset(seed=s + i)`` would;
* **workloads** — with ``workload=...`` every sub-env replays the file in turn from episode 0, as a single
  env does; ``reset(options={"episode": i})`` starts every sub-env at episode i, and
  ``options={"episode": [i_0, …, i_{N-1}]}`` gives each its own (indices or ``Episode`` objects);
* **autoreset** — ``metadata["autoreset_mode"]`` is ``AutoresetMode.NEXT_STEP`` (Gymnasium's default): the
  step after a sub-env terminates ignores its action and returns its reset observation with reward 0 and the
  reset info. ``autoreset_mode=AutoresetMode.DISABLED`` instead requires ``reset(options={"reset_mask": m})``
  for the ended sub-envs before the next step (useful to pick the next workload episode yourself);
* **infos** — the single env's info keys batched as ``SyncVectorEnv`` batches them: ``successes``,
  ``expirations``, ``conflicts`` (and ``repaired``) as (N,) int arrays with ``_key`` masks; on the steps where
  sub-envs terminate, ``episode_metrics`` (a dict of (N,) arrays) with mask ``_episode_metrics`` and
  ``task_outcomes`` (an (N,) object array holding each terminated sub-env's tuple of task outcomes) with mask
  ``_task_outcomes``.

Observations are those of ``MARAEnv`` in its ``observation=`` format (``dict``, ``flat`` or ``rllib``) with a
leading N axis, and actions those of its ``actions=`` mode (``picks``: (N, M) choices; ``scores``: (N, K) slot
scores), each checked by the single env's checks (``ValueError`` naming ``actions``). The ``flat`` vectors of
all sub-envs are computed together by :func:`mara_env.flat.flatten_observation` over the batched arrays. No later
call changes an array it returns. In the ``dict`` format ``history`` (N·K·H_max floats, the largest by far)
may be one handed out two calls before that nothing references any more, brought up to date
(:mod:`mara_env.history_copies`), which saves copying the whole buffer; ``copy=False`` (as
``SyncVectorEnv(copy=False)``) returns the env's own ``history`` buffer instead, overwritten by the next
``step`` or ``reset``. The ``flat`` and ``rllib`` formats never copy it.

Every ``MARAConfig`` setting is served, ``conflicts="repair"`` included (then ``info["repaired"]`` counts the
picks moved, as in the single env); ``slot_features`` appends per-slot features as the single env does, in one
call for all N sub-envs per step. There is no rendering.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from mara_env.batched import BatchSimulator
from mara_env.config import MARAConfig
from mara_env.dynamics import step_info, team_reward
from mara_env.engine import EpisodeSource, action_picks, load_sources, reset_info, resolve_conflicts
from mara_env.features import SlotFeatures
from mara_env.flat import format_observation
from mara_env.gym_env import gym_action_space, gym_observation_space, node_mask
from mara_env.workload import Episode

AUTORESET_MODES = (AutoresetMode.NEXT_STEP, AutoresetMode.DISABLED)
# The loss history (N, K, H_max) float32 is the largest array by far; this bound on it is far above any
# sensible num_envs (about 28 to a few thousand) and far below what would exhaust a machine's memory.
MAX_HISTORY_BYTES = 8 * 2**30


def _check_memory(num_envs: int, max_active: int, max_length: int) -> None:
    """Refuse a ``num_envs`` whose loss history would exceed :data:`MAX_HISTORY_BYTES`, naming the bound in
    sub-envs, before anything of size N is allocated."""
    per_env = max_active * max_length * np.dtype(np.float32).itemsize
    if num_envs * per_env > MAX_HISTORY_BYTES:
        raise ValueError(f"num_envs={num_envs} is too large: the loss history alone would take "
                         f"{num_envs * per_env / 2**30:.1f} GiB ({max_active} slots x {max_length} losses x 4 bytes "
                         f"per sub-env); at most {MAX_HISTORY_BYTES // per_env} sub-envs fit this env's bound")


class MARAVectorEnv(gym.vector.VectorEnv):
    """N MARA-v0 episodes stepped together in NumPy; see the module docstring for the contract."""

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": []}

    def __init__(self, num_envs: int, config: MARAConfig | None = None,
                 autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
                 render_mode: str | None = None, copy: bool = True, slot_features: SlotFeatures | None = None,
                 **overrides: Any):
        if isinstance(num_envs, bool) or not isinstance(num_envs, (int, np.integer)) or num_envs < 1:
            raise ValueError(f"num_envs must be a positive integer, got {num_envs!r}")
        if render_mode is not None:
            raise ValueError(f"the native vector env does not render; render_mode must be None, got {render_mode!r}")
        try:
            mode = AutoresetMode(autoreset_mode)
        except ValueError:
            mode = None
        if mode not in AUTORESET_MODES:
            raise ValueError(f"autoreset_mode must be one of {[m.value for m in AUTORESET_MODES]}, "
                             f"got {autoreset_mode!r}")
        base = config or MARAConfig()
        self.config = base.replace(**overrides) if overrides else base
        self.num_envs = int(num_envs)
        self.copy = bool(copy)
        self.slot_features = slot_features
        self._info_keys = tuple(reset_info(self.config, 0))
        self.metadata = {**self.metadata, "autoreset_mode": mode}
        self.single_action_space = gym_action_space(self.config)
        _, bank, workload = load_sources(self.config)
        _check_memory(self.num_envs, self.config.max_active, bank.max_length)
        self.single_observation_space = gym_observation_space(self.config, bank.max_length, slot_features)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.sim = BatchSimulator(self.config, bank, self.num_envs)
        self.sources = [EpisodeSource(self.config, bank, workload) for _ in range(self.num_envs)]
        self.rngs = [seeding.np_random(None)[0] for _ in range(self.num_envs)]
        self._needs_reset = np.ones(self.num_envs, dtype=bool)
        self._started = False

    # ------------------------------------------------------------------ reset
    def reset(self, *, seed: int | Sequence[int | None] | None = None,
              options: dict[str, Any] | None = None) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Start new episodes in all sub-envs, or only in ``options["reset_mask"]`` (bool (N,))."""
        seeds = self._seeds(seed)
        options = dict(options or {})
        mask = options.pop("reset_mask", None)
        if mask is None:
            rows = list(range(self.num_envs))
        else:
            mask = np.asarray(mask)
            if mask.dtype != np.bool_ or mask.shape != (self.num_envs,) or not mask.any():
                raise ValueError(f"options['reset_mask'] must be a bool array of shape ({self.num_envs},) with at "
                                 f"least one True, got {mask!r}")
            if not self._started and not mask.all():
                raise ValueError("the first reset() must reset every sub-env (no reset_mask, or all True)")
            rows = np.flatnonzero(mask).tolist()
        for row in rows:
            if seeds[row] is not None:
                self.rngs[row] = seeding.np_random(seeds[row])[0]
        self._start(rows, self._episode_options(options, rows))
        self._started = True
        return self._observe(), self._reset_info(rows)

    def _seeds(self, seed: int | Sequence[int | None] | None) -> list[int | None]:
        if seed is None:
            return [None] * self.num_envs
        if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
            return [int(seed) + i for i in range(self.num_envs)]
        seeds = list(seed)
        if len(seeds) != self.num_envs:
            raise ValueError(f"seed must be None, an int or {self.num_envs} seeds, got {len(seeds)} seeds")
        return seeds

    def _episode_options(self, options: dict[str, Any], rows: list[int]) -> list[dict[str, Any]]:
        """Per-sub-env options: a sequence under ``"episode"`` gives each sub-env its own entry."""
        chosen = options.get("episode")
        if isinstance(chosen, (list, tuple, np.ndarray)):
            if len(chosen) != self.num_envs:
                raise ValueError(f"options['episode'] must hold one entry per sub-env ({self.num_envs}), "
                                 f"got {len(chosen)}")
            return [{**options, "episode": chosen[row]} for row in rows]
        return [options] * len(rows)

    def _start(self, rows: list[int], options: list[dict[str, Any]]) -> None:
        episodes: list[Episode] = [self.sources[row].next(self.rngs[row], opts) for row, opts in zip(rows, options)]
        self.sim.load(rows, episodes)
        self._needs_reset[rows] = False

    # ------------------------------------------------------------------ step
    def step(self, actions: Any) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Advance every sub-env one step (sub-envs that ended last step reset instead, in NEXT_STEP mode)."""
        if not self._started:
            raise RuntimeError("call reset() before step()")
        restarting = self._needs_reset.copy()
        restart = bool(restarting.any())
        if restart and self.metadata["autoreset_mode"] == AutoresetMode.DISABLED:
            raise RuntimeError(f"sub-envs {np.flatnonzero(restarting).tolist()} have terminated; reset them with "
                               f"reset(options={{'reset_mask': mask}}) before step()")
        picks = self._parse_actions(actions, restarting if restart else None)
        picks, repaired = resolve_conflicts(self.config, picks, self.sim.occupied)
        outcome = self.sim.step(picks)
        rewards = team_reward(self.config, outcome["successes"], outcome["phi_before"], outcome["phi_after"])
        terminated = outcome["terminated"] & ~restarting
        counters = step_info(outcome["successes"], outcome["expirations"], outcome["conflicts"], repaired,
                             outcome.get("abandoned"))
        info = {}
        every = np.ones(self.num_envs, dtype=bool)
        for key, values in counters.items():
            info[key], info[f"_{key}"] = (np.where(restarting, 0, values) if restart else values), every.copy()
        if terminated.any():
            info.update(self._episode_end_info(terminated))
        if restart:
            rows = np.flatnonzero(restarting).tolist()
            self._start(rows, [{}] * len(rows))
            rewards[restarting] = 0.0
        self._needs_reset = terminated.copy()
        truncated = np.zeros(self.num_envs, dtype=bool)
        return self._observe(), rewards, terminated, truncated, info

    def _parse_actions(self, actions: Any, restarting: np.ndarray | None) -> np.ndarray:
        """The (N, M) int64 picks the actions ask for, checked by the single env's checks
        (:func:`mara_env.engine.action_picks`). Rows of restarting sub-envs (``None``: none) are ignored
        (picks set to idle, scores to 0)."""
        array = np.asarray(actions)
        width = self.config.node_choices - 1 if self.config.actions == "scores" else self.config.num_nodes
        if restarting is not None and array.shape == (self.num_envs, width):
            array = np.where(restarting[:, None], np.zeros((), array.dtype), array)
        return action_picks(self.config, array, self.sim.occupied, self.num_envs, "actions")

    def _observe(self) -> Any:
        """The batched observation in the configured format (the ``flat`` one computed for all sub-envs at
        once from the simulator's own history buffer, which it does not keep)."""
        dict_format = self.config.observation == "dict"
        observation = self.sim.observation(self.copy if dict_format else False)
        values = None if self.slot_features is None else self.slot_features(observation)
        return format_observation(observation, self.config.observation, self.config.flat_history,
                                  self.slot_features, values)

    def action_masks(self) -> np.ndarray:
        """(N, M · (K + 1)) bool (M · (2K + 1) with ``abandon=True``): each sub-env's ``MARAEnv.action_masks()``
        stacked (the mask of the ``flat`` format, for maskable policies on the native vector env)."""
        if not self._started:
            raise RuntimeError("call reset() before action_masks()")
        per_node = node_mask(self.config, self.sim.occupied)
        return np.tile(per_node, (1, self.config.num_nodes))

    def _reset_info(self, rows: list[int]) -> dict[str, Any]:
        """The reset info (every counter zero) of the sub-envs ``rows``, batched with masks."""
        mask = np.zeros(self.num_envs, dtype=bool)
        mask[rows] = True
        info: dict[str, Any] = {}
        for key in self._info_keys:
            info[key], info[f"_{key}"] = np.zeros(self.num_envs, dtype=np.int64), mask.copy()
        return info

    def _episode_end_info(self, terminated: np.ndarray) -> dict[str, Any]:
        """``episode_metrics`` (a dict of (N,) arrays) and ``task_outcomes`` (an (N,) object array of tuples) of
        the sub-envs that terminated this step, each with its mask, as ``SyncVectorEnv`` batches them."""
        rows = np.flatnonzero(terminated).tolist()
        per_row = [self.sim.metrics(row) for row in rows]
        metrics: dict[str, np.ndarray] = {}
        for key in per_row[0]:
            values = np.zeros(self.num_envs, dtype=np.float64)
            values[rows] = [row_metrics[key] for row_metrics in per_row]
            metrics[key], metrics[f"_{key}"] = values, terminated.copy()
        outcomes = np.full(self.num_envs, None, dtype=object)
        for row in rows:
            outcomes[row] = self.sim.task_outcomes(row)
        return {"episode_metrics": metrics, "_episode_metrics": terminated.copy(),
                "task_outcomes": outcomes, "_task_outcomes": terminated.copy()}

    def task_outcomes(self, row: int) -> tuple[str, ...]:
        """Sub-env ``row``'s task statuses by name, in its episode's task order (``MARAEnv.task_outcomes``);
        read on the step a sub-env terminates, before it restarts, they are its final outcomes."""
        return self.sim.task_outcomes(row)

    def privileged_true_remaining(self) -> np.ndarray:
        """Privileged, for training-time experts and critics only (never a deployed policy's input): (N, K)
        float32, ``MARAEnv.privileged_true_remaining`` of every sub-env."""
        if not self._started:
            raise RuntimeError("call reset() before privileged_true_remaining()")
        return self.sim.true_remaining()

    def close_extras(self, **kwargs: Any) -> None:
        """Nothing to release: the episodes live in this process's arrays."""

