"""Fixed Sobol Gaussian points and Euler integration (paper §4.1, Appendix A.2)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

from mara_agents.predictors.fm.sampling import (N_SAMPLES, SHIPPED_DIM, SOBOL_SEED, compute_sobol_gaussian,
                                                euler_integrate, sobol_gaussian_points)

ROOT = Path(__file__).resolve().parents[2]


def test_sobol_points_are_gaussian_shaped_and_fixed_across_calls():
    first = sobol_gaussian_points(8, 32)
    assert first.shape == (8, 32) and np.all(np.isfinite(first))
    np.testing.assert_array_equal(first, sobol_gaussian_points(8, 32))
    first[0, 0] = 99.0  # callers get a copy: the cached points cannot be corrupted
    assert sobol_gaussian_points(8, 32)[0, 0] != 99.0


def test_sobol_points_are_fixed_across_processes():
    code = ("from mara_agents.predictors.fm.sampling import sobol_gaussian_points as p; "
            "print(repr(p(8, 32).tolist()))")
    output = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    np.testing.assert_array_equal(np.array(eval(output.stdout)), sobol_gaussian_points(8, 32))


def test_the_shipped_points_are_scipys_bit_for_bit():
    shipped = sobol_gaussian_points(N_SAMPLES, SHIPPED_DIM)
    assert shipped.dtype == np.float64
    np.testing.assert_array_equal(shipped, compute_sobol_gaussian(N_SAMPLES, SHIPPED_DIM, SOBOL_SEED))
    np.testing.assert_array_equal(sobol_gaussian_points(N_SAMPLES, 16), compute_sobol_gaussian(N_SAMPLES, 16, SOBOL_SEED))


def test_the_shipped_points_need_no_scipy_stats():
    code = ("import sys; from mara_agents.predictors.fm.sampling import sobol_gaussian_points as p; p(8, 32); "
            "print('scipy.stats' in sys.modules)")
    output = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert output.stdout.strip() == "False"


def test_different_seeds_give_different_points():
    assert not np.array_equal(sobol_gaussian_points(8, 32, seed=1), sobol_gaussian_points(8, 32, seed=2))


def test_euler_is_exact_for_a_constant_velocity_and_uses_left_endpoints():
    z0 = torch.zeros(3, 2)
    assert torch.allclose(euler_integrate(lambda z, u: torch.ones_like(z), z0, steps=4), torch.ones(3, 2))
    # v = u: Euler with K steps gives Σ_k (k/K)/K = (K−1)/(2K), not the exact 1/2
    z1 = euler_integrate(lambda z, u: u[:, None].expand_as(z), z0, steps=4)
    assert torch.allclose(z1, torch.full((3, 2), 3 / 8))
