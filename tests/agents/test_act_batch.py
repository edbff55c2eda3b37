"""``act_batch`` (greedy MAT, LARA) gives every observation the action ``act`` gives it alone, which is what
lets the evaluation harness play a workload file's episodes in lock-step."""

from __future__ import annotations

from functools import partial

import gymnasium as gym
import numpy as np
import pytest

from mara_agents import make_policy
from mara_agents.allocators.predictive import PredictiveAllocator
from mara_agents.allocators.slack import SlackPolicy
from mara_agents.rules.uncontended import serve_every_slot
from mara_agents.predictors.demand import Demand
from mara_agents.predictors.wls import WLSPredictor
from mara_env.features import TASK_FEATURE_INDEX

from conftest import SHORT_WINDOW

PRESENT = TASK_FEATURE_INDEX["present"]


@pytest.mark.parametrize("method", ["mara-wls", "lara"])
def test_batched_actions_equal_one_at_a_time(method, trained, bank_dir, short_file):
    policy = make_policy(method, checkpoint=trained.checkpoint) if method == "mara-wls" else make_policy(method)
    env = gym.make("MARA-v0", workload=str(short_file), bank=str(bank_dir), arrival_window=SHORT_WINDOW)
    observations = []
    for episode in (0, 1):  # states from both episodes and many times: a mixed batch, as in the harness
        observation, _ = env.reset(options={"episode": episode})
        for _ in range(30):
            observations.append(observation)
            observation, *_ = env.step(policy.act(observation))
    env.close()
    batched = policy.act_batch(observations)
    single = np.stack([policy.act(observation) for observation in observations])
    assert batched.shape == (len(observations), single.shape[1])
    np.testing.assert_array_equal(batched, single)
    assert (single > 0).any(), "the policy should serve at least once (0 is idle), or the check is vacuous"


@pytest.mark.parametrize("method", ["mara-wls", "slack-wls"])
def test_only_contended_rows_are_decided_and_every_row_serves_what_the_full_decision_serves(
        method, trained, bank_dir, short_file):
    if method == "mara-wls":
        policy = make_policy(method, checkpoint=trained.checkpoint)
        full_decision = policy._decode  # every row through the predictor and the network
    else:
        policy = SlackPolicy(Demand(WLSPredictor()))
        full_decision = partial(PredictiveAllocator.act_batch, policy)  # every row ranked
    env = gym.make("MARA-v0", workload=str(short_file), bank=str(bank_dir), arrival_window=SHORT_WINDOW)
    observations = []
    for episode in (0, 1):
        observation, _ = env.reset(options={"episode": episode})
        for _ in range(40):
            observations.append(observation)
            observation, *_ = env.step(policy.act(observation))
    env.close()
    num_nodes = observations[0]["action_mask"].shape[0]
    occupied = np.array([(observation["tasks"][:, PRESENT] > 0).sum() for observation in observations])
    assert (occupied > num_nodes).any() and ((occupied > 0) & (occupied <= num_nodes)).any()
    asked = []
    policy.demand.memo.predict = spy(policy.demand.memo.predict, asked, slots=observations[0]["history_len"].size)
    shortcut = policy.act_batch(observations)
    assert asked == [int((occupied > num_nodes).sum())]  # one predictor call, for the contended rows only
    for ours, full in zip(shortcut, full_decision(observations)):
        assert sorted(ours[ours > 0].tolist()) == sorted(full[full > 0].tolist())


def spy(predict, asked, slots):
    """``predict`` that records how many observations (``slots`` query rows each) every call asked about."""
    def counted(query):
        asked.append(len(query.length) // slots)
        return predict(query)
    return counted


def test_serve_every_slot_gives_each_occupied_slot_one_node_in_slot_order():
    present = np.array([[False, True, False, True], [False] * 4, [True] * 4])
    np.testing.assert_array_equal(serve_every_slot(present, num_nodes=3),
                                  [[2, 4, 0], [0, 0, 0], [1, 2, 3]])
