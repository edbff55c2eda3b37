"""A privileged critic for MAT's PPO: a value network that also reads each task's true remaining demand.

Training only (``python train.py mat --privileged-critic``).  The actor is the unchanged MAT policy, which sees
the observation and the predictor's estimates; the critic is a separate network that sees the actor's slot
tokens plus, per slot, what the simulator knows and no policy may: how many batches the task truly still needs
before its loss reaches ε (:func:`~mara_agents.training.experts.vector_true_remaining`), the slack that leaves, and
whether the task can still finish when served every step from now.  Whether the tasks in the slots will finish
is most of an episode's return, so such a critic's baseline can remove that part of the return's variance,
and the advantages keep what the joint action changed.  Its inputs are absent at deployment, so it is never
exported: the checkpoint holds the actor alone.

The network is the actor's encoder in shape (the global token and one token per slot, one pre-LN Transformer
block, empty slots masked as keys) with a one-output head on the global token: the team value, in the value
normaliser's units.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
from torch import nn

from mara_agents.mat.layers import EncoderBlock, run_encoder
from mara_agents.mat.model import MATHyperParameters
from mara_agents.mat.tokens import NUM_SLOT_FEATURES, STEP_SCALE, Tokens
from mara_env.features import TASK_FEATURE_INDEX as _F

PRIVILEGED_FEATURES: tuple[str, ...] = (
    "true_remaining",  # batches still needed to reach ε / T, clipped to [0, 4]
    "true_slack",      # (steps left − true remaining) / B, clipped to [−2, 2]
    "can_finish",      # 1 if true remaining ≤ steps left
)
NUM_PRIVILEGED_FEATURES = len(PRIVILEGED_FEATURES)


def privileged_features(observation: Mapping[str, np.ndarray], remaining: np.ndarray) -> np.ndarray:
    """(..., K, NUM_PRIVILEGED_FEATURES) float32 from an observation (or a stack) and its slots' true remaining
    batches (shaped like ``history_len``); empty slots read 0, scaled as the actor's tokens are."""
    tasks = np.asarray(observation["tasks"], dtype=np.float32)
    budget = np.maximum(np.asarray(observation["budget"], dtype=np.float32), 1.0)
    present = tasks[..., _F["present"]] > 0
    steps_left = tasks[..., _F["remaining_time"]] * budget
    remaining = np.asarray(remaining, dtype=np.float32)
    columns = [np.clip(remaining / STEP_SCALE, 0.0, 4.0),
               np.clip((steps_left - remaining) / budget, -2.0, 2.0),
               (remaining <= steps_left).astype(np.float32)]
    return (np.stack(columns, axis=-1) * present[..., None]).astype(np.float32)


class PrivilegedCritic(nn.Module):
    """(slot tokens, global token, present, privileged features) → (B, 1) team value."""

    def __init__(self, hparams: MATHyperParameters):
        super().__init__()
        dim = hparams.dim
        self.slot_in = nn.Sequential(nn.Linear(NUM_SLOT_FEATURES + NUM_PRIVILEGED_FEATURES, dim), nn.GELU())
        self.global_in = nn.Sequential(nn.Linear(hparams.global_features, dim), nn.GELU())
        self.encoder = nn.ModuleList(EncoderBlock(dim, hparams.heads) for _ in range(hparams.blocks))
        self.encoder_norm = nn.LayerNorm(dim)
        self.value_head = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, 1))

    def forward(self, tokens: Tokens, privileged: torch.Tensor) -> torch.Tensor:
        """``tokens`` are the actor's; a FM-slack rank column after the slot features is ignored."""
        features = torch.cat([tokens.slots[..., :NUM_SLOT_FEATURES], privileged], dim=-1)
        embedded = torch.cat([self.global_in(tokens.glob)[:, None], self.slot_in(features)], dim=1)
        return self.value_head(run_encoder(self.encoder, self.encoder_norm, embedded, tokens.present)[:, 0])
