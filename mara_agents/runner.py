"""Play a policy on episodes or whole workload files and collect per-episode metrics."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import mara_env  # noqa: F401  (registers MARA-v0)
from mara_agents.policy import Policy, is_batched
from mara_env.simulator import oracle_successes
from mara_env.workload import Episode


def play_episode(env: gym.Env, policy: Policy, *, seed: int | None = None,
                 options: dict[str, Any] | None = None) -> dict[str, float]:
    """Run one episode to its end; returns the env's episode metrics plus the undiscounted return."""
    observation, _ = env.reset(seed=seed, options=options)
    policy.reset()
    total = 0.0
    while True:
        observation, reward, terminated, truncated, info = env.step(policy.act(observation))
        total += float(reward)
        if terminated or truncated:
            return {**info.get("episode_metrics", {}), "return": total}


def play_lockstep(policy: Any, envs: Sequence[gym.Env], options: Sequence[dict[str, Any]]) -> list[dict[str, float]]:
    """Play one episode in each env side by side: every step is one ``policy.act_batch`` call over the
    episodes still running.  Rows as :func:`play_episode`'s, in the order of ``envs``.

    For a policy whose actions depend only on the current observation (greedy MAT) the rows equal those of
    playing each episode alone, while a neural policy pays its per-call overhead once per step, not once per
    episode and step.
    """
    running = {i: env.reset(options=opts)[0] for i, (env, opts) in enumerate(zip(envs, options))}
    policy.reset()
    returns, rows = [0.0] * len(envs), [{} for _ in envs]
    while running:
        live = list(running)
        for i, action in zip(live, policy.act_batch([running[i] for i in live])):
            observation, reward, terminated, truncated, info = envs[i].step(action)
            returns[i] += float(reward)
            if terminated or truncated:
                rows[i] = {**info.get("episode_metrics", {}), "return": returns[i]}
                del running[i]
            else:
                running[i] = observation
    return rows


def play_vector_lockstep(policy: Any, episodes: Sequence[Episode], *, bank: str | None = None,
                         on_end: Callable[[Any, int], dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """:func:`play_lockstep` on the native vector env: each episode in a sub-env, all stepped together in NumPy;
    every step is one ``policy.act_batch`` call over the episodes still running.

    The vector env's observations, rewards and metrics are bit-identical to single envs', and the policy sees
    the running episodes in the same order, so the rows equal :func:`play_lockstep`'s.  ``on_end(env, i)`` is
    called on the step episode i ends, before its sub-env restarts (on a seeded random episode that is never
    read), and its fields are added to that episode's row.
    """
    env = gym.make_vec("MARA-v0", num_envs=len(episodes), vectorization_mode="vector_entry_point", bank=bank,
                       copy=False)
    try:
        observation, _ = env.reset(seed=0, options={"episode": list(episodes)})
        policy.reset()
        running = list(range(len(episodes)))
        actions = np.zeros(env.action_space.shape, dtype=np.int64)
        returns, rows = [0.0] * len(episodes), [{} for _ in episodes]
        while running:
            actions[:] = 0
            actions[running] = policy.act_batch([{key: value[i] for key, value in observation.items()}
                                                 for i in running])
            observation, reward, terminated, _, info = env.step(actions)
            for i in running:  # only ours: a sub-env that restarted plays an episode nobody reads
                returns[i] += float(reward[i])
                if terminated[i]:
                    metrics = info["episode_metrics"]
                    rows[i] = {**{key: float(value[i]) for key, value in metrics.items() if not key.startswith("_")},
                               "return": returns[i]}
                    if on_end is not None:
                        rows[i].update(on_end(env.unwrapped, i))
            running = [i for i in running if not terminated[i]]
        return rows
    finally:
        env.close()


def evaluate_workload(policy: Policy, workload: str | Path, *, bank: str | Path | None = None,
                      wrap: Callable[[gym.Env], gym.Env] | None = None,
                      episodes: list[int] | None = None, **overrides: Any) -> list[dict[str, float]]:
    """Play ``policy`` on every (or the listed) episode of a workload file.

    A batched policy (``act_batch``) plays all the episodes in lock-step (:func:`play_lockstep`).  Each row
    holds the episode metrics, the episode's root and index, and the Oracle bound (independent feasibility)
    for the same episode, so callers can check Oracle ≥ method per episode.
    """
    def make() -> gym.Env:
        env = gym.make("MARA-v0", workload=str(workload), bank=None if bank is None else str(bank),
                       disable_env_checker=True, **overrides)
        return env if wrap is None else wrap(env)

    env = make()
    engine = env.unwrapped.engine
    indices = list(range(len(engine.workload.episodes)) if episodes is None else episodes)
    if is_batched(policy):
        envs = [env, *(make() for _ in indices[1:])]
        played = play_lockstep(policy, envs, [{"episode": index} for index in indices])
        for other in envs[1:]:
            other.close()
    else:
        played = [play_episode(env, policy, options={"episode": index}) for index in indices]
    rows = []
    for index, metrics in zip(indices, played):
        episode = engine.workload.episodes[index]
        feasible = oracle_successes(episode, engine.bank)
        rows.append({**metrics, "root": episode.root, "episode": episode.index,
                     "oracle_successes": float(feasible.sum()),
                     "oracle_rate": float(feasible.mean()) if feasible.size else float("nan")})
    env.close()
    return rows
