"""Reading an observation's task slots, and serving slots in an order: what every allocator's rule starts from.

A slot's steps to deadline are B·remaining_time and its steps since arrival B − that.  Both are whole numbers
of steps and are computed as integers (rounded from the float32 product), so equal deadlines or equal waits
tie exactly and ties go to the lower slot index.
"""

from __future__ import annotations

import numpy as np

from mara_env.features import TASK_FEATURE_INDEX

_PRESENT = TASK_FEATURE_INDEX["present"]
_REMAINING = TASK_FEATURE_INDEX["remaining_time"]


def serve_in_order(order: np.ndarray, num_nodes: int) -> np.ndarray:
    """Node i serves the i-th slot of ``order`` (slot indices, most urgent first); other nodes idle."""
    action = np.zeros(num_nodes, dtype=np.int64)
    chosen = order[:num_nodes]
    action[: chosen.size] = chosen + 1
    return action


def present_slots(observation: dict[str, np.ndarray]) -> np.ndarray:
    """Indices of the occupied slots."""
    return np.flatnonzero(observation["tasks"][:, _PRESENT] > 0)


def steps_to_deadline(observation: dict[str, np.ndarray], slots: np.ndarray) -> np.ndarray:
    """Steps left before each listed slot's deadline (the batches it can still run), as integers.

    The observation carries B and the remaining share of B in float32; their product is an integer up to
    rounding noise, so it is rounded: equal deadlines compare equal and ties go to the lower slot.
    """
    return np.rint(observation["budget"][slots] * observation["tasks"][slots, _REMAINING]).astype(np.int64)


def steps_since_arrival(observation: dict[str, np.ndarray], slots: np.ndarray) -> np.ndarray:
    """Steps since each listed slot's task arrived (B minus the steps to its deadline), as integers."""
    return np.rint(observation["budget"][slots]).astype(np.int64) - steps_to_deadline(observation, slots)
