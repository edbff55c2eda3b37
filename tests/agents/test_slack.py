"""The slack ranking (``slack-fm``): warm-up tasks first, then predicted to fit by least slack, then the rest."""

from __future__ import annotations

import numpy as np

from mara_agents.predictors import WLSPredictor
from mara_agents.play.lockstep import evaluate_workload
from mara_agents.allocators.slack import SlackPolicy

from conftest import hand_observation


def _six_slots(nodes: int) -> dict[str, np.ndarray]:
    # Slot 0 empty; 1 ready, short by 50; 2 warm-up, 200 steps left; 3 ready, slack 10; 4 ready, slack 200;
    # 5 warm-up, 80 steps left.
    obs = hand_observation(history_len=[0, 10, 2, 10, 10, 0], remaining_steps=[0, 100, 200, 50, 300, 80],
                           budget=400, nodes=nodes)
    obs["tasks"][0] = 0.0
    obs["action_mask"][:, 1] = 0
    return obs


PREDICTED = np.array([0.0, 150.0, 800.0, 40.0, 100.0, 800.0])


def test_the_ranking_serves_warm_up_then_least_slack_then_smallest_shortfall():
    policy = SlackPolicy(WLSPredictor())
    # Order: warm-up by deadline (5, 2), fits by slack (3, 4), then the short task (1); actions are slot + 1.
    assert policy.decide(_six_slots(nodes=4), PREDICTED).tolist() == [6, 3, 4, 5]
    # Work-conserving: with more nodes than tasks every task is served and only the spare node idles.
    assert policy.decide(_six_slots(nodes=6), PREDICTED).tolist() == [6, 3, 4, 5, 2, 0]


def test_the_ranking_never_picks_an_empty_slot_and_plays_a_workload(bank_dir, stress_file):
    rows = evaluate_workload(SlackPolicy(WLSPredictor()), stress_file, bank=bank_dir)
    assert rows[0]["conflicts"] == 0 and rows[0]["utilisation"] > 0.0
