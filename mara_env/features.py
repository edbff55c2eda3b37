"""Names and order of the observation's per-slot and global features (docs/environment.md).

Agents index observations through these constants, never through the simulator's internals, so the
observation layout is defined in exactly one place.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import numpy as np

TASK_FEATURES: tuple[str, ...] = (
    "present",          # 1 for an occupied slot, 0 for an empty one (all other features are then 0)
    "remaining_time",   # (deadline - t) / B
    "batches_done",     # s / B
    "current_loss",     # L(s), the latest cumulative-average loss (0 before the first batch)
    "initial_loss",     # L(1), the loss at the first batch (0 before it)
    "target_loss",      # epsilon
    "log_loss_ratio",   # log(L(s) / epsilon) (0 before the first batch)
    "warmup",           # min(observations / 4, 1)
    "log_batch_size",   # log of the task's batch size
    "log_lr",           # log of the task's learning rate
    "queue_wait",       # steps spent in the admission queue / B
)
TASK_FEATURE_INDEX: dict[str, int] = {name: i for i, name in enumerate(TASK_FEATURES)}
NUM_TASK_FEATURES = len(TASK_FEATURES)

# Besides ``tasks`` the observation carries per-slot arrays that predictors need in absolute units:
# ``history`` (K, H_max) cumulative-average losses so far, ``history_len`` (K,) observations so far and
# ``budget`` (K,) the available time B of each slot's task (0 for an empty slot).

GLOBAL_FEATURES: tuple[str, ...] = (
    "nodes",        # M / M_max
    "active",       # active tasks / K
    "queue",        # queued tasks / K
    "time",         # t / T
)
GLOBAL_FEATURE_INDEX: dict[str, int] = {name: i for i, name in enumerate(GLOBAL_FEATURES)}
NUM_GLOBAL_FEATURES = len(GLOBAL_FEATURES)


# With a node option set (``node_speeds`` other than 1, or ``switch_cost`` > 0; ``MARAConfig.node_options``) the
# observation also carries ``nodes`` (M, 3) and ``slot_nodes`` (K, 2), float32, in this order (mara_env.service).
NODE_FEATURES: tuple[str, ...] = (
    "speed",        # batches the node runs per step
    "last_pick",    # the pick that served a task at the previous step and would continue it (0: none, j: slot j-1)
    "setup_left",   # setup steps that task still needs on this node (0 without one)
)
NODE_FEATURE_INDEX: dict[str, int] = {name: i for i, name in enumerate(NODE_FEATURES)}
NUM_NODE_FEATURES = len(NODE_FEATURES)

SLOT_NODE_FEATURES: tuple[str, ...] = (
    "setup_left",   # setup steps before the slot's task runs a batch, if its last node serves it next (c otherwise)
    "last_node",    # node i + 1 that served the task at the previous step, 0 when none did (and for an empty slot)
)
SLOT_NODE_FEATURE_INDEX: dict[str, int] = {name: i for i, name in enumerate(SLOT_NODE_FEATURES)}
NUM_SLOT_NODE_FEATURES = len(SLOT_NODE_FEATURES)


class SlotFeatures(Protocol):
    """Extra per-slot features a front end can append to its observation (``slot_features=`` of the Gymnasium,
    vector and PettingZoo envs; ``mara_agents.envs.forecast`` passes a predictor's forecast).

    In the ``dict`` format they are the entry ``key`` of shape (K, F); in ``flat`` and ``rllib`` the K × F
    values follow the global features, slot by slot (``mara_env.flat``).
    """

    key: str
    """The dict observation's entry."""
    names: tuple[str, ...]
    """The F feature names, in order."""
    low: np.ndarray
    """(F,) float32 lower bounds."""
    high: np.ndarray
    """(F,) float32 upper bounds."""

    def __call__(self, observation: Mapping[str, np.ndarray]) -> np.ndarray:
        """(…, K, F) float32 features of a dict observation with any leading batch axes."""
        ...
