"""WLS (LARA's estimator): exponentially weighted power-law fit, demand (a/ε)^(1/b) − s, capped."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mara_agents.predictors import base
from mara_agents.predictors.base import PredictorQuery
from mara_agents.predictors.wls import GAMMA, WLSPredictor, fit_power_law, forgetting_weights, summed_width


def query(curves: list[np.ndarray], eps: float, cap: float = 1e4) -> PredictorQuery:
    width = max(c.size for c in curves)
    history = np.zeros((len(curves), width))
    for row, curve in enumerate(curves):
        history[row, :curve.size] = curve
    n = len(curves)
    return PredictorQuery(history, np.array([c.size for c in curves]), np.full(n, 32.0), np.full(n, 1e-3),
                          np.full(n, eps), np.full(n, cap))


def test_forgetting_weights_decay_by_gamma_towards_the_past_and_skip_padding():
    weights = forgetting_weights(np.array([3]), width=5)[0]
    assert weights[3:].tolist() == [0.0, 0.0]
    np.testing.assert_allclose(weights[:3] / weights[2], [GAMMA ** 2, GAMMA, 1.0])
    assert np.isclose(weights.sum(), 1.0)


def raised_weights(length: np.ndarray, width: int) -> np.ndarray:
    """γ ** (n − i) raised entry by entry on the padded matrix, each row normalised."""
    position = np.arange(1, width + 1)[None, :]
    power = GAMMA ** np.maximum(length[:, None] - position, 0).astype(np.float64)
    raised = np.where(position <= length[:, None], power, 0.0)
    total = raised.sum(axis=1, keepdims=True)
    return raised / np.where(total > 0, total, 1.0)


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 700), st.lists(st.integers(0, 700), min_size=1, max_size=40))
def test_forgetting_weights_equal_the_powers_raised_entry_by_entry_bit_for_bit(width, lengths):
    # The weights come from a table per count; they must be the very numbers γ ** (n − i) gives, since LARA's
    # and MARA-WLS's episodes are compared bit for bit across versions.
    length = np.minimum(np.array(lengths), width)
    expected = raised_weights(length, width)
    assert np.array_equal(forgetting_weights(length, width).view(np.uint64), expected.view(np.uint64))


def closed_form_fit(history: np.ndarray, length: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The fit written out over the whole padded matrix, every term computed for every row."""
    width = history.shape[1]
    weights = raised_weights(length, width)
    observed = weights > 0
    x = np.broadcast_to(np.log(np.arange(1, width + 1, dtype=np.float64)), history.shape)
    y = np.log(np.where(observed, history, 1.0).astype(np.float64))
    x_mean, y_mean = (weights * x).sum(axis=1), (weights * y).sum(axis=1)
    dx = np.where(observed, x - x_mean[:, None], 0.0)
    dy = np.where(observed, y - y_mean[:, None], 0.0)
    b = -((weights * dx * dy).sum(axis=1) / ((weights * dx * dx).sum(axis=1) + 1e-6))
    return y_mean + b * x_mean, b


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 700), st.lists(st.integers(0, 700), min_size=1, max_size=40), st.integers(0, 2**32 - 1))
def test_the_fit_equals_the_closed_form_over_the_padded_matrix_bit_for_bit(width, lengths, seed):
    # The count-only terms come from per-count tables; LARA's and MARA-WLS's episodes are compared bit for
    # bit across versions, so the fit must give the very numbers of the full computation.
    length = np.minimum(np.array(lengths), width)
    noise = np.random.default_rng(seed).uniform(0.5, 2.0, (length.size, width))
    history = np.where(np.arange(width)[None, :] < length[:, None], noise, 0.0).astype(np.float32)
    log_a, b = fit_power_law(history, length)
    expected_log_a, expected_b = closed_form_fit(history, length)
    assert np.array_equal(log_a.view(np.uint64), expected_log_a.view(np.uint64))
    assert np.array_equal(b.view(np.uint64), expected_b.view(np.uint64))


@pytest.mark.parametrize("width", [1, 7, 8, 13, 100, 128, 129, 136, 300, 700, 1000, 2053])
def test_the_summed_prefix_sums_as_numpy_sums_the_whole_row_bit_for_bit(width):
    # The fit reads only summed_width() columns; that is exact only if NumPy's row sum over the prefix adds
    # the same numbers in the same order as over the whole row.  Checked for every needed count, on rows whose
    # entries past it are zero, as the fit's terms are.
    needed = np.arange(width + 1)
    values = np.random.default_rng(width).normal(size=(width + 1, width)) * 10.0 ** np.arange(-3, 4)[
        np.arange(width) % 7]
    rows = np.where(np.arange(width)[None, :] < needed[:, None], values, 0.0)
    for count, row in zip(needed, rows):
        cut = summed_width(width, int(count))
        assert count <= cut <= width
        assert row[:cut].sum().tobytes() == row.sum().tobytes(), (width, count, cut)
    assert summed_width(width, 0) <= min(width, 8)


def test_the_summed_prefix_is_far_narrower_than_the_history_for_short_rows():
    assert summed_width(700, 101) == 168 and summed_width(700, 30) == 32 and summed_width(700, 345) == 700


def test_the_fit_equals_the_closed_form_for_every_longest_count_at_the_banks_width():
    width = 700
    rng = np.random.default_rng(7)
    for longest in range(0, width + 1, 3):
        length = np.array([longest, longest // 2, min(longest, 4), 0])
        noise = rng.uniform(0.5, 2.0, (length.size, width))
        history = np.where(np.arange(width)[None, :] < length[:, None], noise, 0.0).astype(np.float32)
        log_a, b = fit_power_law(history, length)
        expected_log_a, expected_b = closed_form_fit(history, length)
        assert log_a.tobytes() == expected_log_a.tobytes() and b.tobytes() == expected_b.tobytes(), longest


@settings(max_examples=20, deadline=None)
@given(st.lists(st.integers(4, 300), min_size=1, max_size=60), st.integers(1, 9), st.integers(0, 2**32 - 1))
def test_a_query_answered_in_parts_gets_the_one_pass_answers_bit_for_bit(lengths, rows_per_pass, seed):
    rng = np.random.default_rng(seed)
    curves = [np.cumsum(rng.uniform(0.5, 2.0, n)[::-1]) / np.arange(1, n + 1) for n in lengths]
    asked = query(curves, eps=0.8)
    one_pass = WLSPredictor().predict(asked).remaining
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(base, "ROWS_PER_PASS", rows_per_pass)
        in_parts = WLSPredictor().predict(asked).remaining
    assert np.array_equal(one_pass.view(np.uint64), in_parts.view(np.uint64))


def test_row_parts_are_consecutive_near_equal_and_within_the_limit():
    for n, limit in ((0, 4), (1, 4), (4, 4), (5, 4), (13, 4), (1025, 512)):
        parts = base.row_parts(np.arange(n), limit)
        assert np.array_equal(np.concatenate(parts) if parts else np.arange(0), np.arange(n))
        assert all(0 < part.size <= limit for part in parts)
        assert not parts or max(p.size for p in parts) - min(p.size for p in parts) <= 1


def test_a_count_longer_than_the_history_is_refused_with_its_range():
    with pytest.raises(ValueError, match=r"\[0, 5\]"):
        fit_power_law(np.ones((1, 5)), np.array([6]))


def test_perfect_power_law_is_recovered_to_one_percent():
    s = np.arange(1, 41, dtype=np.float64)
    a, b, eps = 3.0, 0.45, 0.5
    log_a, fitted_b = fit_power_law(query([a * s ** -b], eps).history, np.array([40]))
    assert abs(np.exp(log_a[0]) / a - 1) < 0.01 and abs(fitted_b[0] / b - 1) < 0.01
    expected = (a / eps) ** (1 / b) - 40
    estimate = WLSPredictor().predict(query([a * s ** -b], eps)).remaining[0]
    assert abs(estimate / expected - 1) < 0.01


def test_flat_or_rising_curve_returns_the_cap():
    rising = 1.0 + 0.01 * np.arange(10)
    flat = np.ones(10)
    assert WLSPredictor().predict(query([rising, flat], eps=0.5, cap=77.0)).remaining.tolist() == [77.0, 77.0]


def test_curve_already_below_threshold_needs_nothing_more():
    s = np.arange(1, 21, dtype=np.float64)
    assert WLSPredictor().predict(query([2.0 * s ** -0.5], eps=1.0)).remaining[0] == 0.0


def test_fewer_than_four_observations_return_the_cap():
    s = np.arange(1, 4, dtype=np.float64)
    assert WLSPredictor().predict(query([2.0 * s ** -0.5], eps=0.1, cap=123.0)).remaining[0] == 123.0


def test_recent_points_dominate_the_fit():
    """A curve that changes slope: the fit follows the recent segment, not the early one."""
    s = np.arange(1, 121, dtype=np.float64)
    curve = np.where(s <= 20, 2.0 * s ** -0.1, 2.0 * 20 ** -0.1 * (s / 20) ** -0.8)
    history, length = query([curve], 0.1).history, np.array([120])
    _, forgetting = fit_power_law(history, length)
    _, uniform = fit_power_law(history, length, gamma=1.0)
    assert abs(forgetting[0] - 0.8) < 0.02 and abs(uniform[0] - 0.8) > 0.1


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(0.01, 10.0), min_size=1, max_size=30), st.floats(0.001, 5.0), st.floats(0.0, 500.0))
def test_estimates_always_lie_between_zero_and_the_cap(losses, eps, cap):
    remaining = WLSPredictor().predict(query([np.array(losses)], eps, cap)).remaining
    assert np.all(np.isfinite(remaining)) and 0.0 <= remaining[0] <= cap
