"""The matching masks of paper §4.2: node i may pick idle, or an occupied slot no earlier node picked.

Rollout builds the masks one node at a time while sampling; training rebuilds exactly the same masks from
the stored joint actions with an exclusive prefix sum over nodes, so old and new log-probabilities are
computed under identical constraints.
"""

from __future__ import annotations

import torch


def node_mask(present: torch.Tensor, taken: torch.Tensor) -> torch.Tensor:
    """Legal choices (B, K + 1) for one node: idle always, slot j iff occupied and not yet taken."""
    idle = torch.ones_like(present[..., :1])
    return torch.cat([idle, present & ~taken], dim=-1)


def taken_before(actions: torch.Tensor, num_slots: int) -> torch.Tensor:
    """(B, M, K) bool: slot j was picked by some node < i — the exclusive prefix sum of one-hot picks."""
    picks = torch.nn.functional.one_hot(actions, num_slots + 1)[..., 1:]
    inclusive = picks.cumsum(dim=-2)
    return (inclusive - picks) > 0


def teacher_forced_masks(present: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """(B, M, K + 1) masks of every node given the stored joint actions (B, M)."""
    num_nodes = actions.shape[-1]
    taken = taken_before(actions, present.shape[-1])
    return node_mask(present[..., None, :].expand(-1, num_nodes, -1), taken)
