"""Play a MAT policy on all episodes of a workload file at once (one batched forward pass per step).

``mara_agents.runner.evaluate_workload`` plays one episode at a time, which for MAT means one small network
pass per node per step; a 60-episode workload then takes many minutes on a CPU.  Here all episodes advance
in lock-step and every step is one predictor call and one decoder sweep for the whole batch.  Rows have the
same keys as ``evaluate_workload``'s.  With greedy decoding (the default) each episode's actions do not
depend on which other episodes share the batch, so the result equals the sequential runner's (up to float
round-off in exact arg-max ties); with ``sample=True`` the random stream is shared across the batch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import torch

import mara_env  # noqa: F401  (registers MARA-v0)
from mara_agents.mat.policy import MATPolicy
from mara_agents.mat.rollout import stack, to_tensors
from mara_agents.mat.tokens import build_tokens
from mara_agents.predictors.wrapper import predict_remaining
from mara_env.simulator import oracle_successes


@torch.no_grad()
def evaluate_workload_batched(policy: MATPolicy, workload: str | Path, *, bank: str | Path | None = None,
                              episodes: list[int] | None = None, **overrides: Any) -> list[dict[str, float]]:
    """Per-episode rows (metrics, return, root, episode, Oracle bound) for every (or the listed) episode."""
    def make() -> gym.Env:
        return gym.make("MARA-v0", workload=str(workload), bank=None if bank is None else str(bank),
                        disable_env_checker=True, **overrides)

    probe = make()
    engine = probe.unwrapped.engine
    indices = list(range(len(engine.workload.episodes))) if episodes is None else list(episodes)
    envs = [make() for _ in indices]
    observations = [env.reset(options={"episode": index})[0] for env, index in zip(envs, indices)]
    returns = [0.0] * len(envs)
    rows: list[dict[str, float] | None] = [None] * len(envs)
    live = list(range(len(envs)))
    while live:
        stacked = stack([observations[i] for i in live])
        tokens = build_tokens(stacked, predict_remaining(stacked, policy.predictor))
        slots, glob, present = to_tensors(tokens, policy.device)
        actions = policy.model.act(slots, glob, present, generator=policy.generator)[0].cpu().numpy()
        still = []
        for i, action in zip(live, actions):
            observations[i], reward, terminated, truncated, info = envs[i].step(action)
            returns[i] += float(reward)
            if terminated or truncated:
                episode = engine.workload.episodes[indices[i]]
                feasible = oracle_successes(episode, engine.bank)
                rows[i] = {**info.get("episode_metrics", {}), "return": returns[i], "root": episode.root,
                           "episode": episode.index, "oracle_successes": float(feasible.sum()),
                           "oracle_rate": float(feasible.mean()) if feasible.size else float("nan")}
            else:
                still.append(i)
        live = still
    for env in [probe, *envs]:
        env.close()
    return [row for row in rows if row is not None]
