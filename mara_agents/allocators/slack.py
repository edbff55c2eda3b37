"""A hand-written reference allocator: rank tasks by the slack a frozen predictor leaves them.

Not in the paper.  It is here to answer one question honestly: how much of MARA's result do the FM estimates
buy on their own, without a learned policy?  Every step it serves, work-conserving, in this order:

1. **Tasks in warm-up** (fewer than 4 observations), earliest deadline first.  Nothing is known about them
   until they are observed, and serving them is the only way to learn it; the stress test (§5.4) is built
   to punish a policy that lets them wait behind hopeless tasks.
2. **Tasks the predictor says can finish alone** (predicted remaining batches ≤ steps left), least slack
   first: the feasible task closest to missing its deadline is the one a lost step hurts most.
3. **The rest**, smallest shortfall (predicted − steps left) first: serving them costs nothing while nodes
   are free, and an estimate can be wrong.

Unlike LARA (:mod:`mara_agents.allocators.lara`) it reserves no single warm-up node and searches no feasible subset;
unlike MAT it has no parameters.  ``slack-fm`` runs it over the FM predictor.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mara_agents.allocators.naive import present_slots, serve_in_order, steps_to_deadline
from mara_agents.allocators.nodes import NodeView, RemembersSwitchCost, has_nodes, place
from mara_agents.allocators.predictive import PredictiveAllocator
from mara_agents.allocators.uncontended import decide_contended
from mara_agents.predictors.base import MIN_OBSERVATIONS

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
    ones (:func:`~mara_agents.allocators.nodes.place`)."""
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


class SlackPolicy(RemembersSwitchCost, PredictiveAllocator):
    """Warm-up tasks first, then tasks predicted to fit (least slack first), then the rest."""

    def act_batch(self, observations: Sequence[dict[str, np.ndarray]]) -> np.ndarray:
        """Actions (N, M): the ranking (and its predictor call) only for observations holding more tasks than
        nodes; the others serve every task (:mod:`~mara_agents.allocators.uncontended`).  With node features
        every observation is decided: where a task runs matters even when every task is served."""
        if observations and has_nodes(observations[0]):
            return super().act_batch(observations)
        return decide_contended(observations, super().act_batch)

    def decide(self, observation: dict[str, np.ndarray], predicted: np.ndarray) -> np.ndarray:
        """The joint action for one observation given its slots' predicted remaining batches (K,)."""
        if has_nodes(observation):
            return node_slack_action(observation, predicted, self.switch.view(observation))
        return serve_in_order(slack_order(observation, predicted), observation["action_mask"].shape[0])
