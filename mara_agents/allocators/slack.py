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


class SlackPolicy(PredictiveAllocator):
    """Warm-up tasks first, then tasks predicted to fit (least slack first), then the rest."""

    def act_batch(self, observations: Sequence[dict[str, np.ndarray]]) -> np.ndarray:
        """Actions (N, M): the ranking (and its predictor call) only for observations holding more tasks than
        nodes; the others serve every task (:mod:`~mara_agents.allocators.uncontended`)."""
        return decide_contended(observations, super().act_batch)

    def decide(self, observation: dict[str, np.ndarray], predicted: np.ndarray) -> np.ndarray:
        """The joint action for one observation given its slots' predicted remaining batches (K,)."""
        return serve_in_order(slack_order(observation, predicted), observation["action_mask"].shape[0])
