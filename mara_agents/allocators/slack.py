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

from mara_agents.allocators.predictive import PredictiveAllocator
from mara_agents.rules.nodes import RemembersSwitchCost, has_nodes
from mara_agents.rules.slack import node_slack_action, slack_order
from mara_agents.rules.slots import serve_in_order
from mara_agents.rules.uncontended import decide_contended


class SlackPolicy(RemembersSwitchCost, PredictiveAllocator):
    """Warm-up tasks first, then tasks predicted to fit (least slack first), then the rest."""

    def act_batch(self, observations: Sequence[dict[str, np.ndarray]]) -> np.ndarray:
        """Actions (N, M): the ranking (and its predictor call) only for observations holding more tasks than
        nodes; the others serve every task (:mod:`~mara_agents.rules.uncontended`).  With node features
        every observation is decided: where a task runs matters even when every task is served."""
        if observations and has_nodes(observations[0]):
            return super().act_batch(observations)
        return decide_contended(observations, super().act_batch)

    def decide(self, observation: dict[str, np.ndarray], predicted: np.ndarray) -> np.ndarray:
        """The joint action for one observation given its slots' predicted remaining batches (K,)."""
        if has_nodes(observation):
            return node_slack_action(observation, predicted, self.switch.view(observation))
        return serve_in_order(slack_order(observation, predicted), observation["action_mask"].shape[0])
