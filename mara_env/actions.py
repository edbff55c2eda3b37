"""Turning nodes' picks into a matching: which picks stand, and the ``conflicts="repair"`` rule.

A joint action gives every node a choice ``0`` (idle) or ``j`` (slot ``j - 1``). A *matching* (paper Eq. 2)
serves each task with at most one node. The paper's environment turns a pick of an empty slot, or of a slot
an earlier node already took, into an idle node. ``repair_picks`` instead gives such a node another task, so
a policy that ignores the other nodes' choices (a per-node mask, as in sb3-contrib or RLlib) still serves
as many tasks as it asked for.

Both functions work on any number of leading batch dimensions (vector environments pass ``(N, M)`` picks
and ``(N, K)`` occupancy) and loop only over the M nodes.
"""

from __future__ import annotations

import numpy as np


def standing_picks(picks: np.ndarray, occupied: np.ndarray) -> np.ndarray:
    """Boolean ``(..., M)``: which non-idle picks the simulator honours (occupied, not taken by a lower node)."""
    picks, occupied = np.asarray(picks), np.asarray(occupied, dtype=bool)
    flat_picks = picks.reshape(-1, picks.shape[-1])
    free = occupied.reshape(-1, occupied.shape[-1]).copy()
    rows = np.arange(flat_picks.shape[0])
    stands = np.zeros(flat_picks.shape, dtype=bool)
    for node in range(flat_picks.shape[1]):
        slot = flat_picks[:, node] - 1
        ok = (slot >= 0) & free[rows, np.maximum(slot, 0)]
        stands[:, node] = ok
        free[rows[ok], slot[ok]] = False
    return stands.reshape(picks.shape)


def repair_picks(picks: np.ndarray, occupied: np.ndarray) -> np.ndarray:
    """Picks that always form a matching: standing picks are kept; every other non-idle pick moves to the
    next free occupied slot after it (cyclically, in slot order), or becomes idle when none is left.

    Nodes are handled in index order, so the result is deterministic. Idle picks stay idle: repairing only
    ever serves a task the policy asked a node to serve, never adds work a policy chose not to do.

    >>> repair_picks(np.array([2, 2, 3, 0]), np.array([True, True, False]))
    array([2, 1, 0, 0])
    """
    picks = np.asarray(picks)
    occupied = np.asarray(occupied, dtype=bool)
    num_slots = occupied.shape[-1]
    flat_picks = picks.reshape(-1, picks.shape[-1]).astype(np.int64)
    stands = standing_picks(flat_picks, occupied.reshape(-1, num_slots))
    free = occupied.reshape(-1, num_slots).copy()
    rows = np.arange(flat_picks.shape[0])
    taken_slots = np.where(stands, flat_picks - 1, 0)
    for node in range(flat_picks.shape[1]):
        held = stands[:, node]
        free[rows[held], taken_slots[held, node]] = False
    repaired = np.where(stands, flat_picks, 0)
    offsets = np.arange(num_slots)
    for node in np.flatnonzero(((flat_picks > 0) & ~stands).any(axis=0)):
        moving = (flat_picks[:, node] > 0) & ~stands[:, node]
        order = (flat_picks[:, node, None] - 1 + offsets) % num_slots  # slots from the pick onwards
        candidates = np.take_along_axis(free, order, axis=1)
        found = moving & candidates.any(axis=1)
        slot = order[rows, candidates.argmax(axis=1)]
        repaired[found, node] = slot[found] + 1
        free[rows[found], slot[found]] = False
    return repaired.reshape(picks.shape)
