"""FIFO, EDF and FM-slack rank by whole steps: equal deadlines (or equal waits) tie exactly, and ties go to the
lower slot, whatever float32 rounding does to B · remaining_time."""

from __future__ import annotations

import numpy as np

from mara_agents.allocators.naive import EDFPolicy, FIFOPolicy
from mara_agents.rules.slots import steps_to_deadline
from mara_agents.allocators.slack import SlackPolicy
from mara_agents.predictors import WLSPredictor
from mara_env.features import TASK_FEATURE_INDEX

from conftest import hand_observation


def two_slots(budgets: tuple[int, int], steps_left: tuple[int, int]) -> dict[str, np.ndarray]:
    """Two ready tasks whose remaining_time is stored as float32 (steps left / B), as the env does."""
    observation = hand_observation(history_len=[10, 10], remaining_steps=list(steps_left), budget=100, nodes=1)
    observation["budget"] = np.asarray(budgets, dtype=np.float32)
    remaining = np.asarray(steps_left, dtype=np.float64) / np.asarray(budgets, dtype=np.float64)
    observation["tasks"][:, TASK_FEATURE_INDEX["remaining_time"]] = remaining.astype(np.float32)
    return observation


def test_float32_products_would_misorder_these_slots():
    # The premise: B · remaining_time in float32 gives 1.0 for slot 0 and 0.99999994 for slot 1.
    observation = two_slots((280, 282), (1, 1))
    raw = observation["budget"] * observation["tasks"][:, TASK_FEATURE_INDEX["remaining_time"]]
    assert raw[0] > raw[1]


def test_steps_to_deadline_is_an_exact_integer():
    observation = two_slots((280, 282), (1, 1))
    steps = steps_to_deadline(observation, np.array([0, 1]))
    assert steps.dtype.kind == "i" and steps.tolist() == [1, 1]


def test_edf_breaks_an_equal_deadline_tie_by_the_lower_slot():
    assert EDFPolicy().act(two_slots((280, 282), (1, 1))).tolist() == [1]


def test_fifo_breaks_an_equal_wait_tie_by_the_lower_slot():
    # Both tasks were admitted 7 steps ago (B − steps left = 7); float32 makes slot 1's wait look longer.
    assert FIFOPolicy().act(two_slots((280, 281), (273, 274))).tolist() == [1]


def test_fm_slack_breaks_an_equal_slack_tie_by_the_lower_slot():
    observation = two_slots((280, 282), (1, 1))
    assert SlackPolicy(WLSPredictor()).decide(observation, np.array([0.0, 0.0])).tolist() == [1]
