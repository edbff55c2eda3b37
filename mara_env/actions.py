"""Turning nodes' picks into a matching: the ``conflicts="repair"`` rule and the ranking action.

A joint action gives every node a choice ``0`` (idle) or ``j`` (slot ``j - 1``). A *matching* (paper Eq. 2)
serves each task with at most one node. The paper's environment turns a pick of an empty slot, or of a slot
an earlier node already took, into an idle node (:func:`mara_env.dynamics.standing_picks`). ``repair_picks``
instead gives such a node another task, so a policy that ignores the other nodes' choices (a per-node mask, as
in sb3-contrib or RLlib) still serves as many tasks as it asked for.

``scores_to_picks`` is the ranking action (``actions="scores"``): the team scores the K slots and the env
builds the matching greedily, so every action is one.

With ``abandon=True`` a node may also choose K + j, abandoning slot j − 1: ``repair_choices`` and
``scores_to_choices`` extend the two rules to those choices.

All functions work on any number of leading batch dimensions (vector environments pass ``(N, M)`` picks or
``(N, K)`` scores and ``(N, K)`` occupancy) and loop at most over the M nodes.
"""

from __future__ import annotations

import numpy as np

from mara_env.dynamics import standing_choices, standing_picks, standing_picks_one


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
    if picks.ndim == 1:
        return np.array(_repair_one(picks.tolist(), occupied.tolist()), dtype=np.int64)
    num_slots = occupied.shape[-1]
    flat_picks = np.maximum(picks.reshape(-1, picks.shape[-1]).astype(np.int64), 0)  # a negative pick is idle
    stands = standing_picks(flat_picks, occupied.reshape(-1, num_slots))
    repaired = np.where(stands, flat_picks, 0)
    moving = (flat_picks > 0) & ~stands
    if not moving.any():  # a matching already: nothing to move
        return repaired.reshape(picks.shape)
    free = occupied.reshape(-1, num_slots).copy()
    held_rows, held_nodes = np.nonzero(stands)
    free[held_rows, flat_picks[held_rows, held_nodes] - 1] = False
    rows = np.arange(flat_picks.shape[0])
    # How far past each pick every slot lies, cyclically in slot order.
    after_pick = (np.arange(num_slots) - flat_picks[:, :, None] + 1) % num_slots
    for node in np.flatnonzero(moving.any(axis=0)):  # in node order: a moved pick takes its slot from the next
        distance = np.where(free, after_pick[:, node], num_slots)  # num_slots: not free
        slot = distance.argmin(axis=1)
        found = moving[:, node] & (distance[rows, slot] < num_slots)
        repaired[found, node] = slot[found] + 1
        free[rows[found], slot[found]] = False
    return repaired.reshape(picks.shape)


def _repair_one(picks: list[int], occupied: list[bool]) -> list[int]:
    """:func:`repair_picks` of one joint action in plain Python (the single, PettingZoo and live envs repair
    one per step): a few list operations cost a small fraction of the array version's NumPy calls on one row.
    ``tests/env/test_actions.py`` checks that both give the same picks."""
    num_slots = len(occupied)
    stands = standing_picks_one(picks, occupied)
    free = list(occupied)
    for pick, stand in zip(picks, stands):
        if stand:
            free[pick - 1] = False
    repaired = []
    for pick, stand in zip(picks, stands):
        if stand or pick <= 0:  # a standing pick stays; idle (and anything below it) is idle
            repaired.append(pick if stand else 0)
            continue
        after = ((pick - 1 + offset) % num_slots for offset in range(num_slots))  # slots from the pick onwards
        slot = next((candidate for candidate in after if free[candidate]), None)
        if slot is not None:
            free[slot] = False
        repaired.append(0 if slot is None else slot + 1)
    return repaired


def scores_to_picks(scores: np.ndarray, occupied: np.ndarray, num_nodes: int) -> np.ndarray:
    """The matching a team ranking asks for: the occupied slots with a positive score, highest first (ties
    to the lower slot), each served by one node, at most ``num_nodes`` of them; the other nodes idle.

    A score of zero or below means "leave this task unserved this step", so the ranking can also idle nodes.

    >>> scores_to_picks(np.array([0.5, -1.0, 0.9, 0.7]), np.array([True, True, True, False]), 3)
    array([3, 1, 0])
    """
    scores = np.asarray(scores, dtype=np.float64)
    occupied = np.asarray(occupied, dtype=bool)
    wanted = np.where(occupied & (scores > 0), scores, -np.inf)
    order = np.argsort(-wanted, axis=-1, kind="stable")[..., :num_nodes]
    chosen = np.take_along_axis(wanted, order, axis=-1) > -np.inf
    picks = np.where(chosen, order + 1, 0)
    if picks.shape[-1] < num_nodes:  # fewer slots than nodes: the rest idle
        pad = np.zeros(picks.shape[:-1] + (num_nodes - picks.shape[-1],), dtype=picks.dtype)
        picks = np.concatenate([picks, pad], axis=-1)
    return picks.astype(np.int64)


def repair_choices(choices: np.ndarray, occupied: np.ndarray) -> np.ndarray:
    """:func:`repair_picks` with ``abandon=True``: standing abandons are kept and hold their slots; every pick is
    repaired around them as :func:`repair_picks` repairs it; an abandon that does not stand becomes idle.

    An abandon is never moved to another slot: that would drop a task that no node asked to drop.

    >>> repair_choices(np.array([4, 1, 4, 1]), np.array([True, True, False]))
    array([4, 2, 0, 0])
    """
    choices = np.asarray(choices, dtype=np.int64)
    num_slots = np.shape(occupied)[-1]
    _, abandons = standing_choices(choices, occupied)
    picks = np.where(choices > num_slots, np.where(abandons, choices - num_slots, 0), choices)
    repaired = repair_picks(picks, occupied)
    return np.where(abandons, repaired + num_slots, repaired)


def scores_to_choices(scores: np.ndarray, occupied: np.ndarray, num_nodes: int) -> np.ndarray:
    """The ranking action with ``abandon=True``: ``scores`` (..., 2K) holds K slot scores, then K abandon scores.

    The occupied slots with a positive abandon score are abandoned, highest first (ties to the lower slot), at
    most ``num_nodes`` of them, each taking one node; the nodes left serve the other slots as
    :func:`scores_to_picks` ranks them. The choices list the served slots first, then the abandons (K + j), then
    idle nodes.

    >>> scores_to_choices(np.array([0.9, 0.5, 0.1, -1.0, 0.4, -0.2]), np.array([True, True, True]), 2)
    array([1, 5])
    """
    scores = np.asarray(scores, dtype=np.float64)
    occupied = np.asarray(occupied, dtype=bool)
    num_slots = occupied.shape[-1]
    drops = scores_to_picks(scores[..., num_slots:], occupied, num_nodes)
    dropped = (drops[..., :, None] == np.arange(1, num_slots + 1)).any(axis=-2)
    serves = scores_to_picks(scores[..., :num_slots], occupied & ~dropped, num_nodes)
    room = num_nodes - np.count_nonzero(drops, axis=-1)
    serves = np.where(np.arange(num_nodes) < room[..., None], serves, 0)
    choices = np.concatenate([serves, np.where(drops > 0, drops + num_slots, 0)], axis=-1)
    order = np.argsort(choices == 0, axis=-1, kind="stable")[..., :num_nodes]
    return np.take_along_axis(choices, order, axis=-1)
