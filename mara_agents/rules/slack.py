"""The slack rule: rank tasks by the slack a demand estimate leaves them, and place them on nodes.

Every step it serves, work-conserving, in this order: **tasks in warm-up** (fewer than 4 observations),
earliest deadline first; **tasks that can finish alone** (estimated remaining batches ≤ steps left), least
slack first; **the rest**, smallest shortfall first.  The FM-slack allocator
(:class:`~mara_agents.allocators.slack.SlackPolicy`) plays it over a predictor's estimates, MAT's tokens show
its order and action to the model (:mod:`~mara_agents.mat.tokens`), the forecast env exposes them
(:mod:`~mara_agents.envs.forecast`) and the privileged expert plays it over the true demands
(:mod:`~mara_agents.training.experts`).
"""

from __future__ import annotations

import numpy as np

from mara_agents.predictors.base import MIN_OBSERVATIONS
from mara_agents.rules.nodes import NodeView, place
from mara_agents.rules.slots import present_slots, steps_to_deadline

WARMUP, FITS, SHORT = 0, 1, 2  # the three groups, served in this order


def slack_keys(steps_left: np.ndarray, predicted: np.ndarray, warm: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(group, key within the group) of tasks, elementwise over any shape: the serving order sorts by group,
    then by the key (ascending), ties to the lower slot. ``steps_left`` are integer steps to the deadline,
    ``predicted`` the remaining-batch estimates, ``warm`` marks tasks with fewer than 4 observations."""
    slack = steps_left - predicted
    group = np.where(warm, WARMUP, np.where(slack >= 0, FITS, SHORT))
    within = np.where(warm, steps_left, np.abs(slack))
    return group, within


def slack_order(observation: dict[str, np.ndarray], predicted: np.ndarray) -> np.ndarray:
    """The occupied slots of one observation in serving order, given their predicted remaining batches (K,):
    by group (warm-up, fits, short), then within it; ties keep the lower slot."""
    slots = present_slots(observation)
    warm = observation["history_len"][slots] < MIN_OBSERVATIONS
    group, within = slack_keys(steps_to_deadline(observation, slots), predicted[slots], warm)
    return slots[np.lexsort((within, group))]


# With node features, who is placed first, by group (WARMUP, FITS, SHORT): fitting tasks, then warm-up, then short.
PLACEMENT_RANK = np.array([1, 0, 2])


def node_slack_action(observation: dict[str, np.ndarray], predicted: np.ndarray, view: NodeView) -> np.ndarray:
    """The joint action of the slack rule with node speeds and switching costs (``docs/agents.md``, "Node
    speeds and switching costs").

    A ready task *fits* when it can finish on some node: setup there + ⌈r / speed⌉ ≤ steps left.  Fitting
    tasks are ranked by their *fresh slack*, steps left − c − r / (fastest speed): the slack they would have
    if they had to start again on the fastest node, so a running task and a waiting one compare on the same
    footing and the order does not flip back and forth as setups are paid.  Short tasks are ranked by their
    shortfall, min over nodes of (setup + r / speed) − steps left.  The first M of the ranking (warm-up, fits,
    short, as on identical nodes) are served and placed fitting tasks first, then warm-up tasks, then short
    ones (:func:`~mara_agents.rules.nodes.place`)."""
    slots = present_slots(observation)
    left = steps_to_deadline(observation, slots)
    remaining = predicted[slots].astype(np.float64)
    warm = observation["history_len"][slots] < MIN_OBSERVATIONS
    steps = view.steps_needed(slots, remaining)
    fits = steps.min(axis=1) <= left
    fresh = left - (view.switch_cost or 0) - remaining / view.fastest
    shortfall = (view.setup(slots) + remaining[:, None] / view.speed[None, :]).min(axis=1) - left
    group = np.where(warm, WARMUP, np.where(fits, FITS, SHORT))
    within = np.where(warm, left, np.where(fits, fresh, shortfall))
    served = np.lexsort((within, group))[: view.speed.size]
    placed = served[np.argsort(PLACEMENT_RANK[group[served]], kind="stable")]
    return place(slots[placed], view, steps[placed])
