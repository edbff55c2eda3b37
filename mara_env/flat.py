"""The ``flat`` observation: one float32 vector for libraries that want a ``Box`` (MLP policies, SuperSuit,
RLlib's default encoders).

Layout, for K slots and H history points (``flat_history``)::

    [ slot 0: TASK_FEATURES (11) | history (H) ] … [ slot K-1: … ] | GLOBAL_FEATURES (4) | node one-hot (M)?

The per-slot ``history`` block replaces the raw ``(K, H_max)`` loss array (97 % of the dict observation) by
the last H observed cumulative-average losses *before* the current one, as log-ratios to the current loss,
``log(L(s - j) / L(s))`` for j = 1 … H: scale-free, near 0 once a curve flattens, and 0 where fewer points
exist (``batches_done`` and ``warmup`` tell how many). The node one-hot is appended only in the PettingZoo
envs, so that one shared policy can tell the nodes apart.

Every function accepts leading batch dimensions, so vector environments can flatten a stack at once.
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from mara_env.features import NUM_GLOBAL_FEATURES, NUM_TASK_FEATURES

# Finite bounds (checkers and some RL libraries reject infinite boxes); losses, log-ratios and budgets of
# any realistic bank lie far inside them.
VALUE_BOUND = 1e6
_TINY = 1e-12


def flat_size(num_slots: int, points: int, num_nodes: int = 0) -> int:
    """Length of the flat vector (``num_nodes`` > 0 adds the node one-hot of the PettingZoo envs)."""
    return num_slots * (NUM_TASK_FEATURES + points) + NUM_GLOBAL_FEATURES + num_nodes


def flat_space(num_slots: int, points: int, num_nodes: int = 0) -> spaces.Box:
    """The ``Box`` of :func:`flatten_observation`'s output."""
    return spaces.Box(-VALUE_BOUND, VALUE_BOUND, (flat_size(num_slots, points, num_nodes),), np.float32)


def history_log_ratios(history: np.ndarray, history_len: np.ndarray, points: int) -> np.ndarray:
    """``(..., K, H)`` float32: ``log(L(s - j) / L(s))`` for j = 1 … H, 0 where s − j < 1.

    ``history`` is ``(..., K, H_max)`` (column s − 1 holds L(s)), ``history_len`` is s per slot.
    """
    length = np.asarray(history_len, dtype=np.int64)[..., None]
    index = length - 1 - np.arange(points + 1)  # the current loss's column, then the H before it
    # One gather, then float64: the conversion is exact, so converting only the gathered entries gives the
    # same ratios as converting the whole buffer.
    gathered = np.take_along_axis(np.asarray(history), np.maximum(index, 0), axis=-1).astype(np.float64)
    current, earlier, earlier_index = gathered[..., :1], gathered[..., 1:], index[..., 1:]
    ratios = np.log(np.maximum(earlier, _TINY) / np.maximum(current, _TINY))
    ratios = np.where(earlier_index >= 0, ratios, 0.0)
    return np.clip(ratios, -VALUE_BOUND, VALUE_BOUND).astype(np.float32)


def flatten_observation(observation: dict[str, np.ndarray], points: int) -> np.ndarray:
    """The flat float32 vector ``(..., flat_size(K, points))`` of a dict observation (without node one-hot)."""
    tasks = np.asarray(observation["tasks"], dtype=np.float32)
    recent = history_log_ratios(observation["history"], observation["history_len"], points)
    per_slot = np.concatenate([tasks, recent], axis=-1)
    lead = per_slot.shape[:-2]
    glob = np.asarray(observation["global"], dtype=np.float32)
    flat = np.concatenate([per_slot.reshape(*lead, -1), glob], axis=-1)
    return np.clip(flat, -VALUE_BOUND, VALUE_BOUND)


def node_one_hot(node: int, num_nodes: int) -> np.ndarray:
    """The identity block the PettingZoo envs append to a node's flat vector."""
    one_hot = np.zeros(num_nodes, dtype=np.float32)
    one_hot[node] = 1.0
    return one_hot
