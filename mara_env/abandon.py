"""The abandon action (``MARAConfig.abandon``): what a node's abandon choice claims, the Oracle's view of an
abandoned task, and the metrics the option adds — written once for both simulators and every front end.

With ``abandon=True`` each node has 2K + 1 choices: 0 idles, j ∈ 1 … K serves slot j − 1 and K + j abandons
slot j − 1 (the node runs nothing this step). A pick and an abandon both *claim* their slot, and claims resolve
like picks (:func:`mara_env.dynamics.standing_choices`): the lowest-indexed node claiming an occupied slot gets
it, every other claim of that slot (or of an empty slot) is a conflict. A standing abandon takes effect first
in the step: the task leaves as ``abandoned`` before any batch runs, and the queue refills its slot in the same
step's admission. Φ loses the task's progress as it does for an expiring task, so the shaped return still
equals the success count. ``docs/environment.md`` ("Abandoning a task") has the whole contract.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from mara_env.config import MARAConfig
from mara_env.service import batch_allowance

WASTED_KEY = "wasted_node_steps"
FAMILY_WASTE_PREFIX = f"{WASTED_KEY}/"


def slot_claims(choices: np.ndarray, num_slots: int) -> np.ndarray:
    """The slot choice (0 idle, j slot j − 1) each node choice claims: a pick claims its slot, an abandon
    K + j claims slot j − 1 too."""
    return np.where(choices > num_slots, choices - num_slots, choices)


def slot_claims_one(choices: list[int], num_slots: int) -> list[int]:
    """:func:`slot_claims` of one joint action in plain Python (the single simulator's per-step path)."""
    return [choice - num_slots if choice > num_slots else choice for choice in choices]


def feasible_alone(crossing: np.ndarray, batches: np.ndarray, steps_left: np.ndarray,
                   config: MARAConfig) -> np.ndarray:
    """The Oracle's view of abandoned tasks: would each have reached ε had it run alone in every step from the
    one it was abandoned in to its deadline?  ``crossing`` is the first batch count whose loss is ≤ ε on the
    task's hidden curve (:func:`mara_env.dynamics.first_crossings`), ``batches`` those it ran, ``steps_left``
    its deadline − t.  With node options the allowance is the Oracle bound's: the fastest node, after one
    setup (:func:`mara_env.service.batch_allowance`)."""
    return crossing - batches <= batch_allowance(steps_left, config.node_speeds, config.switch_cost)


def abandon_metrics(totals: Mapping[str, int], families: tuple[str, ...], family: np.ndarray,
                    succeeded: np.ndarray, service: np.ndarray) -> dict[str, float]:
    """The episode metrics ``abandon=True`` adds: ``abandoned`` (tasks abandoned), ``abandoned_feasible`` (of
    those, the ones :func:`feasible_alone` says could still have succeeded), ``wasted_node_steps`` (node-steps
    that served a task that did not succeed, setup steps included) and ``wasted_node_steps/<family>`` for every
    family of the bank.  ``family`` (n,) holds each task's index into ``families``, ``succeeded`` (n,) whether
    it succeeded and ``service`` (n,) the node-steps that served it."""
    wasted = np.where(succeeded, 0, np.asarray(service, dtype=np.int64))
    per_family = np.bincount(family, weights=wasted, minlength=len(families))
    metrics = {"abandoned": float(totals["abandoned"]), "abandoned_feasible": float(totals["abandoned_feasible"]),
               WASTED_KEY: float(wasted.sum())}
    metrics.update({f"{FAMILY_WASTE_PREFIX}{name}": float(value) for name, value in zip(families, per_family)})
    return metrics
