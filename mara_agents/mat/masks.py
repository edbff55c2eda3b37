"""The matching masks of paper §4.2: node i may pick idle, or an occupied slot no earlier node picked.  With the
env's abandon action (2K + 1 choices: K + j abandons slot j − 1) node i may also abandon such a slot: an abandon
claims its slot as a pick does, so serve and abandon columns share the slot's occupancy, as the env's masks do.

Rollout builds the masks one node at a time while sampling; training rebuilds exactly the same masks from
the stored joint actions with an exclusive prefix sum over nodes, so old and new log-probabilities are
computed under identical constraints.
"""

from __future__ import annotations

import torch


def node_mask(present: torch.Tensor, taken: torch.Tensor, abandon: bool = False) -> torch.Tensor:
    """Legal choices (B, K + 1) for one node: idle always, slot j iff occupied and not yet taken; with
    ``abandon`` (B, 2K + 1): abandoning slot j too, under the same condition."""
    idle = torch.ones_like(present[..., :1])
    free = present & ~taken
    return torch.cat([idle, free, free] if abandon else [idle, free], dim=-1)


def claimed_slot(actions: torch.Tensor, num_slots: int) -> torch.Tensor:
    """The slot each choice claims (0 idle, j slot j − 1): a pick claims its slot, an abandon K + j slot j − 1."""
    return torch.where(actions > num_slots, actions - num_slots, actions)


def taken_before(actions: torch.Tensor, num_slots: int) -> torch.Tensor:
    """(B, M, K) bool: slot j was claimed (picked or abandoned) by some node < i — the exclusive prefix sum of
    one-hot claims."""
    picks = torch.nn.functional.one_hot(claimed_slot(actions, num_slots), num_slots + 1)[..., 1:]
    inclusive = picks.cumsum(dim=-2)
    return (inclusive - picks) > 0


def teacher_forced_masks(present: torch.Tensor, actions: torch.Tensor, abandon: bool = False) -> torch.Tensor:
    """(B, M, K + 1) masks ((B, M, 2K + 1) with ``abandon``) of every node given the stored joint actions (B, M)."""
    num_nodes = actions.shape[-1]
    taken = taken_before(actions, present.shape[-1])
    return node_mask(present[..., None, :].expand(-1, num_nodes, -1), taken, abandon)
