"""Behaviour cloning of FM-slack into an SB3 policy: the warm start of an imitation-then-RL pipeline.

The expert is the FM-slack rule (the registered ``slack-fm`` allocator, :mod:`mara_agents.allocators.slack`).
``MARA-Forecast-v0`` with FM's forecast already computes its joint action for every state, from the same demand
stage, as the per-slot one-hots ``slack_node_j`` (:mod:`mara_agents.envs.forecast`): node j serves the slot whose
``slack_node_j`` is 1, or idles if none is. So expert play needs no second predictor call.
:func:`collect_expert_play` steps an SB3 vector env of the forecast env (:mod:`mara_agents.envs.sb3_vec`) with
those actions and records (flat observation, action mask, expert joint action) at every step.

A learner on ``MARA-v0`` sees the same states without the forecast. The flat observation of
``MARA-Forecast-v0`` is ``MARA-v0``'s followed by the forecast block (docs/environment.md, "MARA-Forecast-v0"), so
``observation[:, :base]`` (:func:`forecast_start`) is exactly what that learner would have seen.

:func:`clone` then maximises the masked log-likelihood of the expert's per-node actions under
sb3-contrib's ``MaskableActorCriticPolicy`` (``policy.evaluate_actions`` with the masks, as ``MaskablePPO``
scores its own actions) by minibatch Adam; only the policy's side learns, the value network is left as it is. Every
draw (the env's episodes, the minibatch order) comes from an explicit seed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from mara_env.flat import flat_size

NODE_FEATURE = "slack_node_0"  # the first of FM-slack's per-node one-hots (mara_agents.envs.forecast)
IDLE = 0  # a node's action that serves no slot; slot k is action k + 1


@dataclass(frozen=True)
class Demonstrations:
    """``steps`` rows of expert play: flat observations (steps, D) float32, action masks (steps, M · (K + 1))
    bool, and the expert's joint actions (steps, M) int64."""

    observations: np.ndarray
    masks: np.ndarray
    actions: np.ndarray

    def __len__(self) -> int:
        return len(self.actions)

    def prefix(self, size: int) -> Demonstrations:
        """The same rows with only the first ``size`` observation values (the forecast-less learner's view)."""
        return Demonstrations(np.ascontiguousarray(self.observations[:, :size]), self.masks, self.actions)


def forecast_start(config: Any) -> int:
    """Where the forecast block starts in the flat vector of an env with this ``MARAConfig``: the length of the
    forecast-less flat observation."""
    return flat_size(config.max_active, config.flat_history)


def expert_actions(observations: np.ndarray, config: Any, names: tuple[str, ...]) -> np.ndarray:
    """FM-slack's joint actions (N, M) read from N flat observations of ``MARA-Forecast-v0`` whose forecast
    features are ``names`` (``ForecastFeatures.names``); ``ValueError`` if FM-slack's one-hots are not among
    them."""
    if NODE_FEATURE not in names:
        raise ValueError(f"the observation carries no FM-slack joint action ({NODE_FEATURE!r} is not among the "
                         f"forecast features {names})")
    slots, nodes = config.max_active, config.num_nodes
    start = forecast_start(config)
    forecast = observations[:, start:start + slots * len(names)].reshape(len(observations), slots, len(names))
    first = names.index(NODE_FEATURE)
    serves = forecast[:, :, first:first + nodes] > 0.5  # (N, K, M): node j serves slot k
    return np.where(serves.any(axis=1), serves.argmax(axis=1) + 1, IDLE).astype(np.int64)


def collect_expert_play(envs: Any, steps: int) -> Demonstrations:
    """Play FM-slack for ``ceil(steps / N)`` steps of every sub-env of ``envs`` (an SB3 ``VecEnv`` of
    ``MARA-Forecast-v0`` with FM's forecast and the flat observation, already seeded) and record every state
    it acted in. Finished episodes restart at once, as in training."""
    config = envs.get_attr("config")[0]
    names = tuple(envs.get_attr("slot_features")[0].names)
    rounds = -(-steps // envs.num_envs)
    observation = envs.reset()
    observations, masks, actions = [], [], []
    for _ in range(rounds):
        action = expert_actions(observation, config, names)
        observations.append(observation)
        masks.append(np.stack(envs.env_method("action_masks")))
        actions.append(action)
        observation, _, _, _ = envs.step(action)
    return Demonstrations(np.concatenate(observations).astype(np.float32), np.concatenate(masks).astype(bool),
                          np.concatenate(actions))


def clone(policy: Any, demonstrations: Demonstrations, epochs: int, seed: int, batch_size: int = 256,
          learning_rate: float = 1e-3, log: Callable[[int, dict[str, float]], None] | None = None) -> list[float]:
    """Fit ``policy`` (sb3-contrib's ``MaskableActorCriticPolicy``) to the expert's actions for ``epochs``
    passes over ``demonstrations`` in shuffled minibatches of ``batch_size``; returns each epoch's mean loss,
    the negative masked log-likelihood of the expert's joint action (the sum over nodes). ``log(epoch,
    {"loss": …, "agreement": …})`` gets each epoch's loss and the share of per-node actions the policy's
    greedy pick matched during it. A fresh Adam optimizer: the policy's own (PPO's) is left untouched."""
    import torch

    if epochs < 1 or batch_size < 1:
        raise ValueError(f"epochs and batch_size must be positive, got {epochs} and {batch_size}")
    if len(demonstrations) == 0:
        raise ValueError("demonstrations must hold at least one step")
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(policy.parameters(), lr=learning_rate)
    observations = torch.as_tensor(demonstrations.observations, device=policy.device)
    masks = torch.as_tensor(demonstrations.masks, device=policy.device)
    actions = torch.as_tensor(demonstrations.actions, device=policy.device)
    policy.set_training_mode(True)
    losses = []
    for epoch in range(epochs):
        order = torch.randperm(len(actions), generator=generator).to(policy.device)
        total, matched = 0.0, 0.0
        for batch in order.split(batch_size):
            _, log_prob, _ = policy.evaluate_actions(observations[batch], actions[batch], action_masks=masks[batch])
            loss = -log_prob.mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(batch)
            with torch.no_grad():
                greedy = policy.get_distribution(observations[batch], action_masks=masks[batch]).mode()
                matched += float((greedy.reshape(actions[batch].shape) == actions[batch]).float().mean()) * len(batch)
        losses.append(total / len(actions))
        if log is not None:
            log(epoch, {"loss": losses[-1], "agreement": matched / len(actions)})
    policy.set_training_mode(False)
    return losses


def agreement(policy: Any, demonstrations: Demonstrations) -> float:
    """The share of the expert's per-node actions that ``policy``'s greedy masked pick reproduces."""
    import torch

    with torch.no_grad():
        observations = torch.as_tensor(demonstrations.observations, device=policy.device)
        masks = torch.as_tensor(demonstrations.masks, device=policy.device)
        greedy = policy.get_distribution(observations, action_masks=masks).mode().cpu().numpy()
    return float((greedy.reshape(demonstrations.actions.shape) == demonstrations.actions).mean())


__all__ = ("Demonstrations", "agreement", "clone", "collect_expert_play", "expert_actions",
           "forecast_start")
