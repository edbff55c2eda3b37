"""Which tasks to give up: the hopelessness scores and the make-room choice that the abandoning allocators
(:mod:`mara_agents.allocators.abandon`), MAT's abandon prior (:mod:`mara_agents.mat.tokens`) and the abandoning
expert (:mod:`mara_agents.training.experts`) share.

A score is one number per slot of one observation (K,): a task is hopeless when its score is positive, and a
higher score is more hopeless; a slot that may not be abandoned scores −inf.  A task in warm-up (fewer than
``MIN_OBSERVATIONS`` observations) is never hopeless: nothing is known about it yet.
"""

from __future__ import annotations

import numpy as np

from mara_agents.predictors.base import MIN_OBSERVATIONS
from mara_agents.rules.slots import steps_to_deadline
from mara_env.features import GLOBAL_FEATURE_INDEX, TASK_FEATURE_INDEX

_PRESENT = TASK_FEATURE_INDEX["present"]
_QUEUE = GLOBAL_FEATURE_INDEX["queue"]
FITS_SHARE_THRESHOLD = 0.05  # slack-fm+abandon's θ, chosen on val (docs/research/abandon_rules.md)


def ready_and_left(observation: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(occupied slots past warm-up, steps left per slot (K,), 0 where empty)."""
    present = observation["tasks"][:, _PRESENT] > 0
    ready = present & (observation["history_len"] >= MIN_OBSERVATIONS)
    left = np.zeros(present.size, dtype=np.float64)
    slots = np.flatnonzero(present)
    left[slots] = steps_to_deadline(observation, slots)
    return ready, left


def fits_share_score(observation: dict[str, np.ndarray], samples: np.ndarray, threshold: float) -> np.ndarray:
    """FM-slack's rule: ``threshold`` minus the share of each slot's sampled remaining demands (K, S) that fit
    in its steps left; positive (hopeless) where that share is below ``threshold``."""
    ready, left = ready_and_left(observation)
    drawn = ~np.isnan(samples)
    fitting = (drawn & (np.where(drawn, samples, np.inf) <= left[:, None])).sum(axis=1)
    count = drawn.sum(axis=1)
    share = np.divide(fitting, count, out=np.ones(count.shape), where=count > 0)
    return np.where(ready & (count > 0), threshold - share, -np.inf)


def demand_ratio_score(ready: np.ndarray, left: np.ndarray, needed: np.ndarray, threshold: float) -> np.ndarray:
    """Positive (hopeless) where a ready task's estimated remaining batches ``needed`` exceed ``threshold`` ×
    its steps ``left``: needed − threshold · left, in batches."""
    return np.where(ready, needed - threshold * left, -np.inf)


def dropped_slots(observation: dict[str, np.ndarray], score: np.ndarray, make_room: bool,
                  num_nodes: int) -> np.ndarray:
    """The slots to abandon, most hopeless first: every hopeless one, at most one per each of the ``num_nodes``
    nodes, and with ``make_room`` at most as many as tasks wait in the admission queue (abandoning then only
    makes room)."""
    num_slots = observation["tasks"].shape[0]
    hopeless = np.flatnonzero(score > 0)
    room = int(np.rint(observation["global"][_QUEUE] * num_slots)) if make_room else num_nodes
    return hopeless[np.argsort(-score[hopeless], kind="stable")][:min(room, num_nodes)]
