"""What a node's service does under the node options (``node_speeds``, ``switch_cost``), written once: both
simulators call these functions on the node-aware path (``MARAConfig.node_options``); with the defaults they take
their plain path and none of this runs.

A node that serves a task in a step either spends the step in *setup* or runs *batches*:

* **setup** — a task that node i serves at step t, when node i did not serve it at t − 1 (its first service,
  a move from another node, a resume after a pause), first spends c = ``switch_cost`` consecutive steps on
  node i in setup and runs no batch; an interrupted setup starts again from c (:func:`setup_steps`);
* **batches** — otherwise node i runs up to ``node_speeds[i]`` batches of the task and each batch's loss is
  observed; the task succeeds at the first of them whose cumulative-average loss is ≤ ε, and the step's later
  batches are not run. A task never runs past the end of its recorded curve (:func:`run_batches`).

Arrays are per served task (one entry per served pick), so one episode and N episodes run the same code.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mara_env.features import NODE_FEATURE_INDEX as _N
from mara_env.features import NUM_NODE_FEATURES, NUM_SLOT_NODE_FEATURES
from mara_env.features import SLOT_NODE_FEATURE_INDEX as _S


def setup_steps(continuing: np.ndarray, setup_left: np.ndarray,
                switch_cost: int) -> tuple[np.ndarray, np.ndarray]:
    """Per served task: its setup steps left after this step, and whether it runs batches in this step.

    ``continuing`` says the serving node also served the task at the previous step, so its setup count
    ``setup_left`` carries on; any other service starts a new setup of ``switch_cost`` steps. A step with setup
    left spends one of them and runs nothing.
    """
    left = np.where(continuing, setup_left, switch_cost)
    runs = left == 0
    return np.where(runs, 0, left - 1), runs


def loss_window(losses: np.ndarray, row_start: np.ndarray, batches: np.ndarray, width: int,
                span: int) -> np.ndarray:
    """(P, ``span``) losses L(s + 1) … L(s + span) of each task, from a flat curve table whose rows of
    ``width`` + 1 columns (column s: L(s)) start at ``row_start``; s = ``batches``. Columns past the table's
    end repeat its last one (:func:`run_batches` never runs them)."""
    columns = np.minimum(batches[:, None] + np.arange(1, span + 1), width)
    return losses[row_start[:, None] + columns]


def run_batches(window: np.ndarray, batches: np.ndarray, speed: np.ndarray, length: np.ndarray,
                eps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each task's batch count after it runs up to ``speed`` batches (never past its curve's ``length``),
    stopping at the first whose loss in ``window`` (:func:`loss_window`) is ≤ ``eps``; and whether it
    succeeded there."""
    allowed = np.minimum(speed, length - batches)
    reached = (window <= eps[:, None]) & (np.arange(1, window.shape[1] + 1) <= allowed[:, None])
    won = reached.any(axis=1)
    return batches + np.where(won, reached.argmax(axis=1) + 1, allowed), won


def history_writes(row_start: np.ndarray, batches: np.ndarray, end: np.ndarray,
                   window: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where in a flat loss history (rows starting at ``row_start``, column s − 1 holding L(s)) the batches
    s + 1 … ``end`` just run go, and their losses from ``window``."""
    offsets = np.arange(window.shape[1])
    ran = offsets < (end - batches)[:, None]
    return (row_start[:, None] + batches[:, None] + offsets)[ran], window[ran]


def became_ready(batches: np.ndarray, end: np.ndarray, warmup_observations: int) -> np.ndarray:
    """Which tasks reached ``warmup_observations`` observations in this step (from ``batches`` to ``end``)."""
    return (batches < warmup_observations) & (end >= warmup_observations)


def node_views(served_by: np.ndarray, setup_left: np.ndarray, occupied: np.ndarray, speeds: tuple[int, ...],
               switch_cost: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``nodes`` (..., M, 3) and ``slot_nodes`` (..., K, 2) observation entries, float32, by name
    (:data:`mara_env.features.NODE_FEATURES`, :data:`~mara_env.features.SLOT_NODE_FEATURES`).

    Per slot, ``served_by`` (..., K) is the node that served its task at the previous step (−1: none, and for
    every empty slot) and ``setup_left`` its setup count after that step. A task no node served at the
    previous step needs the full ``switch_cost`` on whichever node serves it next.
    """
    served_by = np.asarray(served_by)
    lead, num_slots, num_nodes = served_by.shape[:-1], served_by.shape[-1], len(speeds)
    continued = served_by >= 0
    slot_nodes = np.zeros(lead + (num_slots, NUM_SLOT_NODE_FEATURES), dtype=np.float32)
    slot_nodes[..., _S["setup_left"]] = np.where(continued, setup_left, np.where(occupied, switch_cost, 0))
    slot_nodes[..., _S["last_node"]] = served_by + 1
    nodes = np.zeros(lead + (num_nodes, NUM_NODE_FEATURES), dtype=np.float32)
    nodes[..., _N["speed"]] = speeds
    rows, slots = np.nonzero(continued.reshape(-1, num_slots))
    node = served_by.reshape(-1, num_slots)[rows, slots]
    per_row = nodes.reshape(-1, num_nodes, NUM_NODE_FEATURES)
    per_row[rows, node, _N["last_pick"]] = slots + 1
    per_row[rows, node, _N["setup_left"]] = np.asarray(setup_left).reshape(-1, num_slots)[rows, slots]
    return nodes, slot_nodes


def batch_allowance(budget: np.ndarray, node_speeds: Sequence[int] | None = None, switch_cost: int = 0) -> np.ndarray:
    """The most batches each task can run in ``budget`` steps (its whole window B, or the steps left to its
    deadline): alone on the fastest node, after one setup of ``switch_cost`` steps, max(speeds) · (B − c)
    (B with the default options; never negative)."""
    fastest = max(node_speeds) if node_speeds else 1
    return fastest * np.maximum(np.asarray(budget, dtype=np.int64) - switch_cost, 0)
