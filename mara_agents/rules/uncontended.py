"""Work-conserving allocators need no decision when no more tasks are held than there are nodes.

A work-conserving allocator serves as many occupied slots as it has nodes.  When a step holds at most M
tasks, every one of them is served whatever the allocator's ranking says, and the simulator treats nodes alike
(which node serves which task changes nothing), so the joint action that serves each occupied slot in slot
order is as good as the allocator's own.  The greedy MAT (:mod:`~mara_agents.mat.policy`) and FM-slack
(:mod:`~mara_agents.allocators.slack`) therefore ask their predictor and their ranking only for the
*contended* observations of a batch (more occupied slots than nodes).  In the shipped evaluation that skips
a large share of the rows, and the evaluation's episode rows stay byte-identical (figures in
``docs/research/performance.md``, "The evaluation in nine minutes").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from mara_env.features import TASK_FEATURE_INDEX

_PRESENT = TASK_FEATURE_INDEX["present"]


def serve_every_slot(present: np.ndarray, num_nodes: int) -> np.ndarray:
    """(B, M) joint actions that serve the occupied slots of each row of ``present`` (B, K) in slot order,
    node 0 first, and idle the other nodes (a row with more than M occupied slots gets its first M)."""
    occupied_first = np.argsort(~present, axis=1, kind="stable")[:, :num_nodes]
    served = np.arange(num_nodes) < present.sum(axis=1, keepdims=True)
    return np.where(served, occupied_first + 1, 0)


def decide_contended(observations: Sequence[dict[str, np.ndarray]],
                     decide: Callable[[list[dict[str, np.ndarray]]], np.ndarray]) -> np.ndarray:
    """Joint actions (N, M) for N observations: ``decide`` (a work-conserving allocator's batched decision)
    on the contended ones, in their order, and :func:`serve_every_slot` on the others."""
    present = np.stack([observation["tasks"][:, _PRESENT] for observation in observations]) > 0
    num_nodes = observations[0]["action_mask"].shape[0]
    actions = serve_every_slot(present, num_nodes)
    contended = np.flatnonzero(present.sum(axis=1) > num_nodes)
    if contended.size:
        actions[contended] = decide([observations[row] for row in contended.tolist()])
    return actions
