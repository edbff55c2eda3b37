"""Vectorised on-policy rollouts: N MARA environments stepped in lock-step, one predictor call per step.

Environments are held directly (not through ``gymnasium.vector``) because MARA episodes terminate at
different times and need no autoreset bookkeeping beyond "reset this one now"; the stacked observation of
all N environments goes through the demand stage (:class:`~mara_agents.predictors.demand.Demand`, one batched
predictor call; paper Algorithm 1, line 17), then through :func:`~mara_agents.mat.tokens.build_tokens`, exactly
as the policy does at evaluation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from mara_agents.mat.model import MATModel, token_tensors
from mara_agents.mat.ppo import ValueNorm
from mara_agents.mat.tokens import Tokens, build_tokens
from mara_agents.predictors.demand import Demand
from mara_env.config import MARAConfig
from mara_env.gym_env import MARAEnv


@dataclass(frozen=True)
class Rollout:
    """(T, N, …) tensors of one rollout; ``values`` are team values in return units; ``last_value`` (N,)
    bootstraps the tail."""

    slots: torch.Tensor
    glob: torch.Tensor
    present: torch.Tensor
    actions: torch.Tensor
    log_probs: torch.Tensor
    values: torch.Tensor
    rewards: torch.Tensor
    dones: torch.Tensor
    last_value: torch.Tensor


def team_value(value_norm: ValueNorm, node_values: torch.Tensor) -> torch.Tensor:
    """Mean over nodes of the denormalised per-node values."""
    return value_norm.denormalise(node_values).mean(-1)


class VectorRollout:
    """N environments with their current observations; episodes that end are reset immediately."""

    def __init__(self, env_config: MARAConfig, num_envs: int, demand: Demand, seed: int | tuple[int, ...],
                 device: torch.device):
        self.envs = [MARAEnv(config=env_config) for _ in range(num_envs)]
        self.demand = demand
        self.device = device
        seeds = np.random.SeedSequence(seed).generate_state(num_envs)
        self.observations = [env.reset(seed=int(s))[0] for env, s in zip(self.envs, seeds)]
        self.returns = np.zeros(num_envs)
        self.finished: list[dict[str, float]] = []

    def tokens(self) -> Tokens:
        """Tokens of all current observations, with one batched predictor call."""
        return build_tokens(*self.demand.stacked(self.observations))

    def drain_finished(self) -> list[dict[str, float]]:
        """Episodes completed since the last call: their return and the env's episode metrics."""
        finished, self.finished = self.finished, []
        return finished

    @torch.no_grad()
    def collect(self, model: MATModel, value_norm: ValueNorm, steps: int, generator: torch.Generator) -> Rollout:
        """Play ``steps`` vector steps with the current policy, sampling with ``generator``."""
        n = len(self.envs)
        buffers: dict[str, list[torch.Tensor]] = {k: [] for k in ("slots", "glob", "present", "actions",
                                                                   "log_probs", "values")}
        rewards = np.zeros((steps, n), dtype=np.float32)
        dones = np.zeros((steps, n), dtype=np.float32)
        for t in range(steps):
            slots, glob, present = token_tensors(self.tokens(), self.device)
            actions, log_probs, node_values = model.act(slots, glob, present, generator=generator)
            for key, value in zip(buffers, (slots, glob, present, actions, log_probs,
                                            team_value(value_norm, node_values))):
                buffers[key].append(value)
            for i, (env, action) in enumerate(zip(self.envs, actions.cpu().numpy())):
                observation, reward, terminated, _, info = env.step(action)
                rewards[t, i] = reward
                self.returns[i] += reward
                if terminated:
                    dones[t, i] = 1.0
                    self.finished.append({"return": float(self.returns[i]), **info["episode_metrics"]})
                    self.returns[i] = 0.0
                    observation, _ = env.reset()
                self.observations[i] = observation
        slots, glob, present = token_tensors(self.tokens(), self.device)
        last = team_value(value_norm, model.values(model.encode(slots, glob, present)))
        stacked = {key: torch.stack(value) for key, value in buffers.items()}
        return Rollout(**stacked, rewards=torch.as_tensor(rewards, device=self.device),
                       dones=torch.as_tensor(dones, device=self.device), last_value=last)
