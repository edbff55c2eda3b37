"""The 32-bin trajectory target (paper Eqs. 4–6) and its inverse."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mara_agents.predictors.fm.target import (
    bin_boundaries,
    cumulative_loss_sum,
    interval_averages,
    inverse_log_ratio,
    log_ratio_target,
    reconstruct_cumavg,
    trajectory_target,
)


def test_boundaries_are_equal_width_from_prefix_end_to_horizon():
    boundaries = bin_boundaries(np.array([320.0]), np.array([640.0]), bins=32)[0]
    assert boundaries[0] == 320.0 and boundaries[-1] == 960.0
    np.testing.assert_allclose(np.diff(boundaries), 20.0)


def test_cumulative_sum_is_exact_at_batches_and_linear_between():
    cumavg = np.array([[4.0, 3.0, 2.0]])  # C in batch-losses: 4, 6, 6; batch size 10 → C(samples) ×10
    sums = cumulative_loss_sum(cumavg, np.array([3]), np.array([10.0]), np.array([[0.0, 10.0, 15.0, 20.0, 30.0]]))
    np.testing.assert_allclose(sums[0], [0.0, 40.0, 50.0, 60.0, 60.0])


def test_interval_average_of_a_constant_per_sample_loss_is_that_loss():
    cumavg = np.full((1, 50), 0.7)
    boundaries = bin_boundaries(np.array([64.0]), np.array([1000.0]))
    sums = cumulative_loss_sum(cumavg, np.array([50]), np.array([32.0]), boundaries)
    np.testing.assert_allclose(interval_averages(sums, boundaries), 0.7)
    np.testing.assert_allclose(log_ratio_target(interval_averages(sums, boundaries), np.array([0.7])), 0.0,
                               atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(st.integers(6, 80), st.sampled_from([1, 4, 32]), st.integers(0, 2**32 - 1), st.data())
def test_target_round_trips_to_the_same_cumulative_sums(length, batch_size, seed, data):
    rng = np.random.default_rng(seed)
    per_batch = rng.uniform(0.01, 3.0, length)
    cumavg = (np.cumsum(per_batch) / np.arange(1, length + 1))[None, :]
    prefix = data.draw(st.integers(4, length - 1))
    horizon = data.draw(st.integers(1, length - prefix))
    n, bs = np.array([length]), np.array([float(batch_size)])
    y = trajectory_target(cumavg, n, bs, np.array([prefix]), np.array([horizon]))
    current = cumavg[:, prefix - 1]
    boundaries = bin_boundaries(np.array([prefix * bs[0]]), np.array([horizon * bs[0]]))
    rebuilt = reconstruct_cumavg(inverse_log_ratio(y, current), boundaries, current)
    true_sums = cumulative_loss_sum(cumavg, n, bs, boundaries)
    np.testing.assert_allclose(rebuilt * boundaries, true_sums, rtol=1e-9)
    assert rebuilt[0, 0] == current[0]  # C(S_0) is preserved exactly
    if prefix + horizon == length:
        assert np.isclose(rebuilt[0, -1], cumavg[0, -1])


def test_inverse_accepts_sample_axes():
    y = np.zeros((2, 8, 32))
    averages = inverse_log_ratio(y, np.array([1.0, 2.0]))
    np.testing.assert_allclose(averages[0], 1.0)
    np.testing.assert_allclose(averages[1], 2.0)
    paths = reconstruct_cumavg(averages, bin_boundaries(np.array([10.0, 10.0]), np.array([20.0, 20.0])),
                               np.array([1.0, 2.0]))
    assert paths.shape == (2, 8, 33)
    np.testing.assert_allclose(paths[1], 2.0)
