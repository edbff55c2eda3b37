"""Deterministic sampling of the flow (paper §4.1 "Fixed Sobol Gaussian points", Appendix A.2).

The N initial noise vectors are the first N points of a scrambled Sobol sequence with a fixed seed, mapped
through the standard-normal inverse CDF.  They are the same in every call and every process, so the same
prefix always yields the same trajectories; the ODE dz/du = v_θ(z, u, c) is then integrated from u = 0 to 1
with a few explicit Euler steps.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

SOBOL_SEED = 20260801
N_SAMPLES = 8     # Appendix A.2: eight flow samples (ID and RL)
EULER_STEPS = 4   # Appendix A.2: four Euler steps (ID and RL)
SHIPPED_DIM = 32  # the paper's J target coordinates (the shipped checkpoint's bins)
SHIPPED_POINTS = Path(__file__).with_name(f"sobol_gaussian_{N_SAMPLES}x{SHIPPED_DIM}.npy")


def compute_sobol_gaussian(n_samples: int, dim: int, seed: int) -> np.ndarray:
    """The points computed with SciPy (scrambled Sobol, then the standard-normal inverse CDF); (N, dim)."""
    from scipy.stats import norm, qmc

    uniform = qmc.Sobol(d=dim, scramble=True, seed=seed).random(n_samples)
    return norm.ppf(np.clip(uniform, 1e-6, 1.0 - 1e-6))


@lru_cache(maxsize=16)
def _sobol_gaussian(n_samples: int, dim: int, seed: int) -> np.ndarray:
    # The shipped model's points are read from a file made by compute_sobol_gaussian (a test checks them bit for
    # bit): importing scipy.stats would add its memory to every process that runs FM (docs/research/performance.md).
    if (n_samples, dim, seed) == (N_SAMPLES, SHIPPED_DIM, SOBOL_SEED):
        return np.load(SHIPPED_POINTS)
    return compute_sobol_gaussian(n_samples, dim, seed)


def sobol_gaussian_points(n_samples: int, dim: int, seed: int = SOBOL_SEED) -> np.ndarray:
    """z_0^(1..N): the first N scrambled-Sobol points in [0, 1)^dim mapped through Φ⁻¹; (N, dim) float64.

    A power of two N keeps the Sobol points balanced (scipy warns otherwise).
    """
    return _sobol_gaussian(n_samples, dim, seed).copy()


def euler_integrate(velocity: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], z0: torch.Tensor,
                    steps: int) -> torch.Tensor:
    """z_1 ≈ z_0 + Σ_k (1/K)·v(z_{u_k}, u_k) with u_k = k/K, k = 0..K−1 (explicit Euler on dz/du = v).

    ``velocity`` gets u as one value per row, all equal within a step.
    """
    z = z0
    for k in range(steps):
        u = torch.full((z.shape[0],), k / steps, dtype=z.dtype, device=z.device)
        step = velocity(z, u) / steps
        z = z + step if k == 0 else z.add_(step)  # in place once z is ours, never the caller's z0
    return z
