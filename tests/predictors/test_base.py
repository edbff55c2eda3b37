"""The batched predictor interface and its cap rule (issue 4, item 1)."""

from __future__ import annotations

import numpy as np
import pytest

from mara_agents.predictors.base import PredictorQuery, capped_remaining


def query(length: list[int], cap: list[float]) -> PredictorQuery:
    n = len(length)
    return PredictorQuery(np.ones((n, 10)), np.array(length), np.full(n, 8.0), np.full(n, 1e-3), np.full(n, 0.5),
                          np.array(cap, dtype=np.float64))


def test_cap_before_four_observations_and_clipping_after():
    q = query([0, 3, 4, 10, 10, 10], [9.0, 9.0, 9.0, 9.0, 9.0, 0.0])
    estimate = np.array([1.0, 1.0, 1.0, 50.0, -2.0, 5.0])
    assert capped_remaining(estimate, q).tolist() == [9.0, 9.0, 1.0, 9.0, 0.0, 0.0]


def test_non_finite_estimates_fall_back_to_the_cap():
    q = query([5, 5], [7.0, 7.0])
    assert capped_remaining(np.array([np.nan, np.inf]), q).tolist() == [7.0, 7.0]


def test_per_sample_estimates_are_capped_row_by_row():
    q = query([3, 10, 10], [9.0, 9.0, 4.0])
    estimate = np.array([[1.0, 2.0], [50.0, np.nan], [-1.0, 3.0]])
    assert capped_remaining(estimate, q).tolist() == [[9.0, 9.0], [9.0, 9.0], [0.0, 3.0]]


def test_a_subset_may_drop_history_columns_past_its_longest_row():
    q = PredictorQuery(np.arange(12.0).reshape(3, 4), np.array([1, 2, 4]), np.ones(3), np.ones(3), np.ones(3),
                       np.ones(3))
    part = q.subset(np.array([0, 1]), width=2)
    assert part.history.tolist() == [[0.0, 1.0], [4.0, 5.0]] and part.length.tolist() == [1, 2]


def test_current_loss_is_the_last_observation():
    q = PredictorQuery(np.array([[3.0, 2.0, 0.0], [0.0, 0.0, 0.0]]), np.array([2, 0]), np.ones(2), np.ones(2),
                       np.ones(2), np.ones(2))
    assert q.current_loss.tolist() == [2.0, 0.0]


@pytest.mark.parametrize("change, message", [({"length": np.array([1])}, "length"),
                                             ({"cap": np.array([-1.0, 1.0])}, "cap"),
                                             ({"length": np.array([11, 1])}, "length")])
def test_malformed_queries_are_rejected_with_the_field_named(change, message):
    fields = dict(history=np.ones((2, 10)), length=np.array([5, 5]), batch_size=np.ones(2), lr=np.ones(2),
                  eps=np.ones(2), cap=np.ones(2))
    fields.update(change)
    with pytest.raises(ValueError, match=message):
        PredictorQuery(**fields)
