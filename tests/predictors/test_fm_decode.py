"""Crossing decode: first ε crossing by linear interpolation, horizon cap, median (paper §4.1)."""

from __future__ import annotations

import numpy as np

from mara_agents.predictors.fm.decode import first_crossing, median_estimate, remaining_batches


def test_hand_built_trajectory_decodes_to_the_hand_computed_batch():
    # L̂ = 1.0, 0.9, 0.7, 0.5 at samples 100, 132, 164, 196 (batch size 32, prefix 100 samples);
    # ε = 0.8 lies halfway between 0.9 and 0.7, so the crossing is at 148 samples = 1.5 batches after S_0.
    paths = np.array([[[1.0, 0.9, 0.7, 0.5]]])
    boundaries = np.array([[100.0, 132.0, 164.0, 196.0]])
    crossing = first_crossing(paths, boundaries, np.array([0.8]))
    assert crossing[0, 0] == 148.0
    assert remaining_batches(crossing, np.array([100.0]), np.array([3.0]), np.array([32.0]))[0, 0] == 1.5


def test_only_the_first_crossing_counts():
    paths = np.array([[[1.0, 0.5, 1.0, 0.2]]])
    assert first_crossing(paths, np.array([[0.0, 1.0, 2.0, 3.0]]), np.array([0.75]))[0, 0] == 0.5


def test_non_crossing_trajectory_is_capped_at_the_horizon():
    paths = np.array([[[1.0, 0.95, 0.9]]])
    crossing = first_crossing(paths, np.array([[0.0, 8.0, 16.0]]), np.array([0.5]))
    assert np.isnan(crossing[0, 0])
    assert remaining_batches(crossing, np.array([0.0]), np.array([2.0]), np.array([8.0]))[0, 0] == 2.0


def test_trajectory_starting_below_threshold_needs_nothing():
    crossing = first_crossing(np.array([[[0.4, 0.3]]]), np.array([[64.0, 96.0]]), np.array([0.5]))
    assert remaining_batches(crossing, np.array([64.0]), np.array([1.0]), np.array([32.0]))[0, 0] == 0.0


def test_estimate_is_the_median_over_samples():
    assert median_estimate(np.array([[1.0, 9.0, 3.0, 100.0]])).tolist() == [6.0]
