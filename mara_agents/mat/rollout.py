"""Vectorised on-policy rollouts: N MARA episodes stepped together, one predictor call per step.

The N episodes live in one Gymnasium vector env, by default the native one
(``gym.make_vec("MARA-v0", num_envs=N, vectorization_mode="vector_entry_point")``: all N episodes in NumPy
arrays, stepped without a per-episode Python loop); ``vectorization_mode="sync"`` gives Gymnasium's
``SyncVectorEnv`` over N single envs, which plays the same trajectories and is kept as the reference the
tests compare training against.  The vector env runs with autoreset disabled: an episode that ends is reset
at once, so its next observation is a fresh episode's and no step is spent on Gymnasium's "next-step"
reset.  The batched observation goes through the demand stage (:class:`~mara_agents.predictors.demand.Demand`,
one batched predictor call; paper Algorithm 1, line 17), then through
:func:`~mara_agents.mat.tokens.build_tokens`, exactly as the policy does at evaluation.

Episode i is seeded with the i-th value of ``SeedSequence(seed).generate_state(N)`` and every later episode
of that env draws from the same generator, so a run's episodes do not depend on the vectorisation mode.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode

import mara_env  # noqa: F401  (registers MARA-v0)
from mara_agents.mat.critic import PrivilegedCritic, privileged_features
from mara_agents.mat.experts import vector_true_remaining
from mara_agents.mat.model import MATModel, token_tensors
from mara_agents.mat.ppo import Rollout, ValueNorm
from mara_agents.mat.tokens import Tokens, build_tokens
from mara_agents.predictors.demand import Demand
from mara_env.config import MARAConfig

VECTORIZATION_MODES = ("vector_entry_point", "sync")


def team_value(value_norm: ValueNorm, node_values: torch.Tensor) -> torch.Tensor:
    """Mean over nodes of the denormalised per-node values."""
    return value_norm.denormalise(node_values).mean(-1)


def make_training_envs(env_config: MARAConfig, num_envs: int,
                       vectorization_mode: str = "vector_entry_point") -> gym.vector.VectorEnv:
    """N MARA-v0 episodes in one vector env with autoreset disabled.

    The native env is asked not to copy its ``history`` buffer (``copy=False``): the rollout reads it only
    through the predictor, before the next step, and keeps the other arrays, which are new on every step.
    ``SyncVectorEnv`` keeps its copy: without it every array is a buffer the next step overwrites.
    """
    if vectorization_mode == "vector_entry_point":
        return gym.make_vec("MARA-v0", num_envs=num_envs, vectorization_mode=vectorization_mode, config=env_config,
                            autoreset_mode=AutoresetMode.DISABLED, copy=False)
    if vectorization_mode == "sync":
        return gym.make_vec("MARA-v0", num_envs=num_envs, vectorization_mode=vectorization_mode, config=env_config,
                            vector_kwargs={"autoreset_mode": AutoresetMode.DISABLED})
    raise ValueError(f"vectorization_mode must be one of {VECTORIZATION_MODES}, got {vectorization_mode!r}")


def finished_episodes(info: dict[str, Any], rows: np.ndarray) -> list[dict[str, float]]:
    """The episode metrics of sub-envs ``rows`` from a vector step's batched ``info``."""
    metrics = info["episode_metrics"]
    keys = [key for key in metrics if not key.startswith("_")]
    return [{key: float(metrics[key][row]) for key in keys} for row in rows.tolist()]


class VectorRollout:
    """N episodes with their current batched observation; episodes that end are reset immediately."""

    def __init__(self, env_config: MARAConfig, num_envs: int, demand: Demand, seed: int | tuple[int, ...],
                 device: torch.device, vectorization_mode: str = "vector_entry_point"):
        self.envs = make_training_envs(env_config, num_envs, vectorization_mode)
        self.num_envs = num_envs
        self.demand = demand
        self.device = device
        seeds = np.random.SeedSequence(seed).generate_state(num_envs)
        self.observation, _ = self.envs.reset(seed=[int(s) for s in seeds])
        self.returns = np.zeros(num_envs)
        self.finished: list[dict[str, float]] = []

    def tokens(self, with_slack_ranks: bool = False) -> Tokens:
        """Tokens of the current observations, with one batched predictor call."""
        return build_tokens(self.observation, self.demand(self.observation), with_slack_ranks)

    def drain_finished(self) -> list[dict[str, float]]:
        """Episodes completed since the last call: their return and the env's episode metrics."""
        finished, self.finished = self.finished, []
        return finished

    def privileged(self) -> torch.Tensor:
        """The privileged critic's extra inputs for the current observations (training only)."""
        features = privileged_features(self.observation, vector_true_remaining(self.envs))
        return torch.as_tensor(features, device=self.device)

    @torch.no_grad()
    def collect(self, model: MATModel, value_norm: ValueNorm, steps: int, generator: torch.Generator,
                critic: PrivilegedCritic | None = None) -> Rollout:
        """Play ``steps`` vector steps with the current policy, sampling with ``generator``; the values are the
        model's, or ``critic``'s over the privileged inputs, which the rollout then keeps."""
        n = self.num_envs
        buffers: dict[str, list[torch.Tensor]] = {k: [] for k in ("slots", "glob", "present", "actions",
                                                                   "log_probs", "values")}
        privileged: list[torch.Tensor] = []
        rewards = np.zeros((steps, n), dtype=np.float32)
        dones = np.zeros((steps, n), dtype=np.float32)
        for t in range(steps):
            slots, glob, present = token_tensors(self.tokens(model.hparams.slack_prior), self.device)
            actions, log_probs, node_values = model.act(slots, glob, present, generator=generator)
            if critic is not None:
                privileged.append(self.privileged())
                node_values = critic(slots, glob, present, privileged[-1])
            for key, value in zip(buffers, (slots, glob, present, actions, log_probs,
                                            team_value(value_norm, node_values))):
                buffers[key].append(value)
            self.observation, reward, terminated, _, info = self.envs.step(actions.cpu().numpy())
            rewards[t] = reward
            self.returns += reward
            if terminated.any():
                dones[t] = terminated
                rows = np.flatnonzero(terminated)
                for row, metrics in zip(rows.tolist(), finished_episodes(info, rows)):
                    self.finished.append({"return": float(self.returns[row]), **metrics})
                self.returns[rows] = 0.0
                self.observation, _ = self.envs.reset(options={"reset_mask": terminated.copy()})
        slots, glob, present = token_tensors(self.tokens(model.hparams.slack_prior), self.device)
        if critic is None:
            last = team_value(value_norm, model.values(model.encode(slots, glob, present)))
        else:
            last = team_value(value_norm, critic(slots, glob, present, self.privileged()))
        stacked = {key: torch.stack(value) for key, value in buffers.items()}
        return Rollout(**stacked, rewards=torch.as_tensor(rewards, device=self.device),
                       dones=torch.as_tensor(dones, device=self.device), last_value=last,
                       privileged=torch.stack(privileged) if critic is not None else None)
