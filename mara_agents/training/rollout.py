"""Vectorised on-policy rollouts: N MARA episodes stepped together, one predictor call per step.

The N episodes live in one Gymnasium vector env, by default the native one
(``gym.make_vec("MARA-v0", num_envs=N, vectorization_mode="vector_entry_point")``: all N episodes in NumPy
arrays, stepped without a per-episode Python loop); ``vectorization_mode="sync"`` gives Gymnasium's
``SyncVectorEnv`` over N single envs, which plays the same trajectories and is kept as the reference the
tests compare training against.  They are played by the one play loop (:class:`~mara_agents.play.lockstep.Lockstep`),
with autoreset disabled: an episode that ends is reset at once, so its next observation is a fresh episode's
and no step is spent on Gymnasium's "next-step" reset.  The batched observation goes to MAT through
:func:`~mara_agents.mat.tokens.mat_inputs` (the demand stage's one batched predictor call, paper Algorithm 1,
line 17, then the tokens), exactly as the policy does at evaluation.

Episode i is seeded with the i-th value of ``SeedSequence(seed).generate_state(N)`` and every later episode
of that env draws from the same generator, so a run's episodes do not depend on the vectorisation mode.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode

import mara_env  # noqa: F401  (registers MARA-v0)
from mara_agents.training.critic import PrivilegedCritic, privileged_features
from mara_agents.training.experts import vector_true_remaining
from mara_agents.mat.model import MATModel
from mara_agents.training.ppo import Rollout, ValueNorm
from mara_agents.mat.tokens import Tokens, mat_inputs
from mara_agents.predictors.demand import Demand
from mara_agents.play.lockstep import Lockstep, make_vector_env
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
        return make_vector_env(num_envs, config=env_config)
    if vectorization_mode == "sync":
        return gym.make_vec("MARA-v0", num_envs=num_envs, vectorization_mode=vectorization_mode, config=env_config,
                            vector_kwargs={"autoreset_mode": AutoresetMode.DISABLED})
    raise ValueError(f"vectorization_mode must be one of {VECTORIZATION_MODES}, got {vectorization_mode!r}")


class VectorRollout:
    """N training episodes played on by the one play loop (:class:`~mara_agents.play.lockstep.Lockstep`): an episode
    that ends is followed at once by the env's next random episode."""

    def __init__(self, env_config: MARAConfig, num_envs: int, demand: Demand, seed: int | tuple[int, ...],
                 device: torch.device, vectorization_mode: str = "vector_entry_point"):
        self.num_envs = num_envs
        self.demand = demand
        self.device = device
        self.switch_cost = env_config.switch_cost  # the setting's c, which the slack prior's plan is told
        seeds = np.random.SeedSequence(seed).generate_state(num_envs)
        self.loop = Lockstep(make_training_envs(env_config, num_envs, vectorization_mode),
                             seed=[int(s) for s in seeds], restart=lambda ended: None)
        self.finished: list[dict[str, float]] = []

    def tokens(self, model: MATModel) -> Tokens:
        """MAT's inputs for the current observations, with one batched predictor call."""
        return mat_inputs(self.loop.observation, self.demand, model.hparams.slack_prior, self.device,
                          self.switch_cost, model.hparams.abandon_nodes)

    def drain_finished(self) -> list[dict[str, float]]:
        """Episodes completed since the last call: their return and the env's episode metrics."""
        finished, self.finished = self.finished, []
        return finished

    def privileged(self) -> torch.Tensor:
        """The privileged critic's extra inputs for the current observations (training only)."""
        features = privileged_features(self.loop.observation, vector_true_remaining(self.loop.env))
        return torch.as_tensor(features, device=self.device)

    def values(self, model: MATModel, value_norm: ValueNorm, tokens: Tokens, node_values: torch.Tensor | None,
               critic: PrivilegedCritic | None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(team values, the privileged inputs or None): the model's ``node_values`` (its encoder's when None),
        or ``critic``'s over the privileged inputs."""
        if critic is not None:
            privileged = self.privileged()
            return team_value(value_norm, critic(tokens, privileged)), privileged
        if node_values is None:
            node_values = model.values(model.encode(tokens))
        return team_value(value_norm, node_values), None

    @torch.no_grad()
    def collect(self, model: MATModel, value_norm: ValueNorm, steps: int, generator: torch.Generator,
                critic: PrivilegedCritic | None = None) -> Rollout:
        """Play ``steps`` vector steps with the current policy, sampling with ``generator``; the values are the
        model's, or ``critic``'s over the privileged inputs, which the rollout then keeps."""
        taken: list[tuple[Tokens, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]] = []

        def decide(observation: dict[str, np.ndarray], rows: np.ndarray) -> np.ndarray:
            tokens = self.tokens(model)
            actions, log_probs, node_values = model.act(tokens, generator=generator)
            taken.append((tokens, actions, log_probs, *self.values(model, value_norm, tokens, node_values, critic)))
            return actions.cpu().numpy()

        played = self.loop.play(decide, steps)
        self.finished += [record for _, record in played.ended]
        last, _ = self.values(model, value_norm, self.tokens(model), None, critic)
        tokens, actions, log_probs, values, privileged = zip(*taken)
        stacked = Tokens.join(tokens, torch.stack)._asdict()
        return Rollout(**stacked, actions=torch.stack(actions), log_probs=torch.stack(log_probs),
                       values=torch.stack(values), rewards=torch.as_tensor(played.rewards, dtype=torch.float32,
                                                                           device=self.device),
                       dones=torch.as_tensor(played.terminated, dtype=torch.float32, device=self.device),
                       last_value=last, privileged=torch.stack(privileged) if critic is not None else None)
