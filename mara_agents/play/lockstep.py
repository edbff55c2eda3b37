"""The one play loop: N episodes on a MARA vector env, stepped together, one decision per step for all of them.

Evaluation (:mod:`~mara_agents.evaluation.harness`), :func:`evaluate_workload` (and so checkpoint validation),
DAgger's data collection (:mod:`~mara_agents.training.imitation`) and PPO's rollouts
(:mod:`~mara_agents.training.rollout`) all play through :class:`Lockstep`.  Each step it asks
``decide(observation, rows)`` for the joint actions of the sub-envs ``rows`` whose episodes it plays, steps the
vector env once, adds the rewards to each episode's return and, for every episode that ended, makes its row: the
env's episode metrics, the undiscounted ``return`` and whatever ``on_end(env, sub_env)`` adds (read before the
sub-env restarts).

The vector env runs with autoreset disabled (:func:`make_vector_env`), and the loop resets an ended sub-env
at once: with ``restart`` the sub-env plays on (the episode ``restart`` names, or the env's next random
one), which is what training wants; without, it is *retired*: it steps on a random episode nobody reads, its
actions are idle, and the loop ends when no episode it plays is left, which is what evaluation wants.  The
native vector env is bit-identical to single ``MARA-v0`` envs, so a policy that decides each observation on
its own gets the same rows as when it plays each episode alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

import mara_env  # noqa: F401  (registers MARA-v0)
from mara_agents.play.policy import Policy, is_batched
from mara_env.config import MARAConfig
from mara_env.engine import load_sources
from mara_env.simulator import oracle_successes
from mara_env.workload import Episode

Decide = Callable[[dict[str, np.ndarray], np.ndarray], np.ndarray]  # (observation, rows) → actions of those rows
OnEnd = Callable[[Any, int], dict[str, Any]]  # (vector env, sub-env) → fields added to the ended episode's row


def make_vector_env(num_envs: int, *, copy: bool = False, **kwargs: Any) -> gym.vector.VectorEnv:
    """N ``MARA-v0`` sub-envs in the native vector env with autoreset disabled, as :class:`Lockstep` plays them.

    ``copy=False`` hands out the env's own ``history`` buffer, which the next step overwrites: right for a
    decision that reads the observation at once; ``copy=True`` for one that may keep it.  Other keyword
    arguments go to the env (``config``, ``bank``, ``workload``, any ``MARAConfig`` field).
    """
    return gym.make_vec("MARA-v0", num_envs=num_envs, vectorization_mode="vector_entry_point",
                        autoreset_mode=AutoresetMode.DISABLED, copy=copy, **kwargs)


def sub_observation(observation: dict[str, np.ndarray], row: int) -> dict[str, np.ndarray]:
    """Sub-env ``row``'s observation, as a single ``MARA-v0`` env gives it."""
    return {key: value[row] for key, value in observation.items()}


@dataclass(frozen=True)
class Played:
    """What one :meth:`Lockstep.play` call saw: each step's rewards and terminations (T, N), and the rows of
    the episodes that ended, as (sub-env, row) in the order they ended."""

    rewards: np.ndarray
    terminated: np.ndarray
    ended: list[tuple[int, dict[str, Any]]]


class Lockstep:
    """N episodes on a vector env whose autoreset is disabled, played together (see the module docstring).

    ``restart(terminated)`` gives the reset options (besides the mask) for the sub-envs that just ended, e.g.
    ``{"episode": [...]}``; ``None`` from it starts the env's next random episode.  Without ``restart`` the
    ended sub-envs are retired.  The state (observation, returns, which sub-envs are played) carries over
    from one :meth:`play` call to the next, so training collects rollouts of any length from one loop.
    """

    def __init__(self, env: gym.vector.VectorEnv, *, seed: int | Sequence[int] | None = None,
                 options: dict[str, Any] | None = None,
                 restart: Callable[[np.ndarray], dict[str, Any] | None] | None = None, on_end: OnEnd | None = None):
        self.env = env
        self.restart = restart
        self.on_end = on_end
        self.observation, _ = env.reset(seed=seed, options=options)
        self.running = np.ones(env.num_envs, dtype=bool)  # sub-envs whose episode is still played
        self.returns = np.zeros(env.num_envs)

    def play(self, decide: Decide, steps: int | None = None) -> Played:
        """Play ``steps`` vector steps, or (``None``) until no played episode is left."""
        actions = np.zeros(self.env.action_space.shape, dtype=np.int64)
        rewards, terminations, ended = [], [], []
        while self.running.any() if steps is None else len(rewards) < steps:
            rows = np.flatnonzero(self.running)
            actions[:] = 0  # idle in retired sub-envs
            actions[rows] = decide(self.observation, rows)
            self.observation, reward, terminated, _, info = self.env.step(actions)
            rewards.append(reward)
            terminations.append(terminated)
            self.returns += reward
            if terminated.any():
                ended += self._end(terminated, info)
        shape = (len(rewards), self.env.num_envs)
        return Played(np.reshape(rewards, shape), np.reshape(terminations, shape), ended)

    def _end(self, terminated: np.ndarray, info: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
        """The rows of the played episodes that just ended; then every ended sub-env restarts or retires."""
        metrics = info["episode_metrics"]
        keys = [key for key in metrics if not key.startswith("_")]
        ended = []
        for row in np.flatnonzero(terminated & self.running).tolist():
            record = {**{key: float(metrics[key][row]) for key in keys}, "return": float(self.returns[row])}
            if self.on_end is not None:
                record.update(self.on_end(self.env, row))
            ended.append((row, record))
        self.returns[terminated] = 0.0
        options = (self.restart(terminated) if self.restart is not None else None) or {}
        self.observation, _ = self.env.reset(options={**options, "reset_mask": terminated.copy()})
        if self.restart is None:
            self.running &= ~terminated
        return ended


def policy_decision(policies: Policy | Sequence[Policy]) -> Decide:
    """The decision of one batched policy (``act_batch`` over the played observations, one call per step) or
    of one policy per sub-env (each ``act`` on its own sub-env's observation)."""
    if not isinstance(policies, Sequence):
        return lambda observation, rows: policies.act_batch([sub_observation(observation, row) for row in rows])
    return lambda observation, rows: np.stack([policies[row].act(sub_observation(observation, row)) for row in rows])


def play_episodes(policies: Policy | Sequence[Policy], episodes: Sequence[Episode | int], *, copy: bool = False,
                  on_end: OnEnd | None = None, **env_kwargs: Any) -> list[dict[str, Any]]:
    """Play the episodes side by side, one per sub-env, and return their rows in the order given.

    ``policies`` is one batched policy (:func:`~mara_agents.play.policy.is_batched`), which decides for all
    running episodes in one call per step, or one policy per episode.  Each is ``reset()`` first.  Episodes
    are ``Episode`` objects, or indices into the ``workload`` file named in ``env_kwargs``.
    """
    if not episodes:
        return []
    for policy in [policies] if not isinstance(policies, Sequence) else policies:
        policy.reset()
    env = make_vector_env(len(episodes), copy=copy, **env_kwargs)
    try:
        loop = Lockstep(env, seed=0, options={"episode": list(episodes)}, on_end=on_end)
        rows: list[dict[str, Any]] = [{} for _ in episodes]
        for row, record in loop.play(policy_decision(policies)).ended:
            rows[row] = record
        return rows
    finally:
        env.close()


def play_episode(policy: Policy, episode: Episode | int, **env_kwargs: Any) -> dict[str, Any]:
    """Play one episode to its end: the env's episode metrics plus the undiscounted ``return``."""
    return play_episodes([policy], [episode], copy=True, **env_kwargs)[0]


def evaluate_workload(policy: Policy, workload: str | Path, *, bank: str | Path | None = None,
                      episodes: list[int] | None = None, **overrides: Any) -> list[dict[str, float]]:
    """Play ``policy`` on every (or the listed) episode of a workload file.

    A batched policy (``act_batch``) plays all the episodes in lock-step; any other plays them one after the
    other, its state carried from one episode to the next as a user would play them.  Each row holds the
    episode metrics, the episode's root and index, and the Oracle bound (independent feasibility) for the
    same episode, so callers can check Oracle ≥ method per episode.
    """
    config = MARAConfig(workload=str(workload), bank=None if bank is None else str(bank), **overrides)
    _, curves, loaded = load_sources(config)
    indices = list(range(len(loaded.episodes)) if episodes is None else episodes)
    if is_batched(policy):
        played = play_episodes(policy, indices, config=config)
    else:
        played = [play_episode(policy, index, config=config) for index in indices]
    rows = []
    for index, metrics in zip(indices, played):
        episode = loaded.episodes[index]
        feasible = oracle_successes(episode, curves, config.node_speeds, config.switch_cost)
        rows.append({**metrics, "root": episode.root, "episode": episode.index,
                     "oracle_successes": float(feasible.sum()),
                     "oracle_rate": float(feasible.mean()) if feasible.size else float("nan")})
    return rows
