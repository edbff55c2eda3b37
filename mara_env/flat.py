"""The ``flat`` observation: one float32 vector for libraries that want a ``Box`` (MLP policies, SuperSuit,
RLlib's default encoders).

Layout, for K slots and H history points (``flat_history``)::

    [ slot 0: TASK_FEATURES (11) | history (H) ] … [ slot K-1: … ] | GLOBAL_FEATURES (4)
    | nodes (M · 3)? | slot_nodes (K · 2)? | extra (K · F)? | node one-hot (M)?

The per-slot ``history`` block replaces the raw ``(K, H_max)`` loss array (by far the largest part of the dict
observation) by the last H observed cumulative-average losses *before* the current one, as log-ratios to the
current loss, ``log(L(s - j) / L(s))`` for j = 1 … H: scale-free, near 0 once a curve flattens, and 0 where
fewer points exist (``batches_done`` and ``warmup`` tell how many). ``nodes`` and ``slot_nodes`` are the dict
observation's entries of those names, node by node and slot by slot (``NODE_FEATURES`` and
``SLOT_NODE_FEATURES`` of :mod:`mara_env.features`), present only with a node option set. ``extra`` holds an env's
:class:`~mara_env.features.SlotFeatures` (the forecast env's), F values per slot, slot by slot; the plain
``MARA-v0`` has none. The node one-hot is appended only in the PettingZoo envs, so that one shared policy can
tell the nodes apart.

Every function accepts leading batch dimensions, so vector environments can flatten a stack at once.
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from collections.abc import Mapping
from typing import Any

from mara_env.dynamics import TINY
from mara_env.features import NUM_GLOBAL_FEATURES, NUM_NODE_FEATURES, NUM_SLOT_NODE_FEATURES, NUM_TASK_FEATURES, \
    SlotFeatures

# Finite bounds (checkers and some RL libraries reject infinite boxes); losses, log-ratios and budgets of
# any realistic bank lie far inside them.
VALUE_BOUND = 1e6


def flat_size(num_slots: int, points: int, num_nodes: int = 0, extra: SlotFeatures | None = None,
              nodes: int = 0) -> int:
    """Length of the flat vector (``nodes`` = M > 0 adds the node features of the node options, ``extra``
    K · F values, ``num_nodes`` > 0 the node one-hot of the PettingZoo envs)."""
    extra_size = 0 if extra is None else num_slots * len(extra.names)
    node_size = 0 if nodes == 0 else nodes * NUM_NODE_FEATURES + num_slots * NUM_SLOT_NODE_FEATURES
    return num_slots * (NUM_TASK_FEATURES + points) + NUM_GLOBAL_FEATURES + node_size + extra_size + num_nodes


def flat_space(num_slots: int, points: int, num_nodes: int = 0, extra: SlotFeatures | None = None,
               nodes: int = 0) -> spaces.Box:
    """The ``Box`` of :func:`flatten_observation`'s output (plus the node one-hot when ``num_nodes`` > 0; the
    node features when ``nodes`` = M > 0)."""
    size = flat_size(num_slots, points, num_nodes, extra, nodes)
    low, high = np.full(size, -VALUE_BOUND, np.float32), np.full(size, VALUE_BOUND, np.float32)
    if extra is not None:
        start = flat_size(num_slots, points, nodes=nodes)
        stop = start + num_slots * len(extra.names)
        low[start:stop], high[start:stop] = np.tile(extra.low, num_slots), np.tile(extra.high, num_slots)
    return spaces.Box(low, high, (size,), np.float32)


def extra_space(extra: SlotFeatures, num_slots: int) -> spaces.Box:
    """The ``Box`` of the ``(K, F)`` dict entry ``extra.key``."""
    return spaces.Box(np.tile(extra.low, (num_slots, 1)), np.tile(extra.high, (num_slots, 1)),
                      (num_slots, len(extra.names)), np.float32)


def history_log_ratios(history: np.ndarray, history_len: np.ndarray, points: int) -> np.ndarray:
    """``(..., K, H)`` float32: ``log(L(s - j) / L(s))`` for j = 1 … H, 0 where s − j < 1.

    ``history`` is ``(..., K, H_max)`` (column s − 1 holds L(s)), ``history_len`` is s per slot.
    """
    history = np.asarray(history)
    length = np.asarray(history_len, dtype=np.int64)[..., None]
    index = length - 1 - np.arange(points + 1)  # the current loss's column, then the H before it
    # One gather by flat index, then float64: the conversion is exact, so converting only the gathered
    # entries gives the same ratios as converting the whole buffer.
    row_start = np.arange(length.size, dtype=np.int64).reshape(length.shape) * history.shape[-1]
    gathered = history.reshape(-1)[row_start + np.maximum(index, 0)].astype(np.float64)
    np.maximum(gathered, TINY, out=gathered)
    ratios = gathered[..., 1:] / gathered[..., :1]  # earlier losses over the current one
    np.log(ratios, out=ratios)
    ratios[index[..., 1:] < 0] = 0.0
    np.clip(ratios, -VALUE_BOUND, VALUE_BOUND, out=ratios)
    return ratios.astype(np.float32)


def flatten_observation(observation: Mapping[str, np.ndarray], points: int,
                        extra: np.ndarray | None = None) -> np.ndarray:
    """The flat float32 vector ``(..., flat_size(K, points))`` of a dict observation (without node one-hot);
    its ``nodes`` and ``slot_nodes`` entries, when present, follow the global features, then ``extra``
    (…, K, F) slot features."""
    tasks = np.asarray(observation["tasks"])
    lead, (num_slots, num_features) = tasks.shape[:-2], tasks.shape[-2:]
    extra_size = 0 if extra is None else num_slots * np.shape(extra)[-1]
    nodes = observation.get("nodes")
    node_size = 0 if nodes is None else np.shape(nodes)[-2] * NUM_NODE_FEATURES + num_slots * NUM_SLOT_NODE_FEATURES
    per_slot_size = num_slots * (num_features + points)
    start = per_slot_size + NUM_GLOBAL_FEATURES
    flat = np.empty((*lead, start + node_size + extra_size), dtype=np.float32)
    per_slot = flat[..., :per_slot_size].reshape(*lead, num_slots, num_features + points)
    per_slot[..., :num_features] = tasks
    per_slot[..., num_features:] = history_log_ratios(observation["history"], observation["history_len"], points)
    flat[..., per_slot_size:start] = observation["global"]
    if node_size:
        node_values = [np.reshape(observation[key], (*lead, -1)) for key in ("nodes", "slot_nodes")]
        flat[..., start:start + node_size] = np.concatenate(node_values, axis=-1)
    if extra is not None:
        flat[..., start + node_size:] = np.asarray(extra).reshape(*lead, extra_size)
    return np.clip(flat, -VALUE_BOUND, VALUE_BOUND, out=flat)


def format_observation(observation: dict[str, np.ndarray], mode: str, points: int,
                       extra: SlotFeatures | None = None, values: np.ndarray | None = None) -> Any:
    """A dict observation (any leading batch axes) in the ``observation=`` format ``mode`` of the Gymnasium
    envs: ``dict`` (with ``values`` under ``extra.key``), ``flat`` or ``rllib``."""
    if mode == "dict":
        return observation if extra is None else {**observation, extra.key: values}
    flat = flatten_observation(observation, points, values)
    if mode == "flat":
        return flat
    mask = observation["action_mask"]
    return {"observations": flat, "action_mask": mask.reshape(*mask.shape[:-2], -1)}


def node_one_hot(node: int, num_nodes: int) -> np.ndarray:
    """The identity block the PettingZoo envs append to a node's flat vector."""
    one_hot = np.zeros(num_nodes, dtype=np.float32)
    one_hot[node] = 1.0
    return one_hot
