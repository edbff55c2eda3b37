"""Algorithm 1's training examples (paper §4.4): a split's curves as padded arrays, examples drawn from them
(curve, prefix S_0, horizon h), their model inputs and target, and the flow-matching objective on a batch.

Training (:mod:`mara_agents.predictors.train`) draws every example through here, so the examples a run sees
depend only on the curves and the generator it passes in.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import torch

from curves.bank import CurveBank
from mara_agents.predictors.fm.encoding import static_context
from mara_agents.predictors.fm.model import FlowMatchingModel, FMHyperParameters, flow_matching_loss, linear_path
from mara_agents.predictors.fm.target import trajectory_target


@dataclass(frozen=True)
class CurveSet:
    """The curves of one split as padded arrays, plus the longest prefix to draw from each."""

    ids: tuple[str, ...]
    cumavg: np.ndarray        # (n, T) float64, zero padded
    length: np.ndarray        # (n,)
    batch_size: np.ndarray    # (n,) float64
    lr: np.ndarray            # (n,) float64
    prefix_limit: np.ndarray  # (n,) a task never observes more than its family's largest budget


@dataclass(frozen=True)
class Examples:
    """Training examples: curve row, prefix S_0 and horizon h, both in batches."""

    curve: np.ndarray
    prefix: np.ndarray
    horizon: np.ndarray


def id_curve_set(bank: CurveBank, split: str, min_prefix: int) -> CurveSet:
    """All ``split`` curves of the bank's ID families (role "id") long enough for one example."""
    id_families = {name for name, spec in bank.families.items() if spec.role == "id"}
    ids = tuple(cid for cid in bank.ids(splits=[split]) if bank.records[cid].family in id_families
                and bank.records[cid].length > min_prefix)
    if not ids:
        raise ValueError(f"{bank.root}: no {split!r} curves of ID families with more than {min_prefix} batches")
    records = [bank.records[cid] for cid in ids]
    length = np.array([r.length for r in records])
    cumavg = np.zeros((len(ids), int(length.max())))
    for row, cid in enumerate(ids):
        cumavg[row, :length[row]] = bank.cumavg(cid)
    limit = np.array([min(bank.family(r.family).max_budget, r.length - 1) for r in records])
    return CurveSet(ids, cumavg, length, np.array([r.batch_size for r in records], dtype=np.float64),
                    np.array([r.lr for r in records]), np.maximum(limit, min_prefix))


def draw_examples(curves: CurveSet, rng: np.random.Generator, n: int, min_prefix: int) -> Examples:
    """Algorithm 1 line 7: a uniform curve, a prefix S_0 ∈ [min_prefix, its limit] and h ∈ [1, length − S_0]."""
    curve = rng.integers(len(curves.ids), size=n)
    prefix = rng.integers(min_prefix, curves.prefix_limit[curve] + 1)
    horizon = rng.integers(1, curves.length[curve] - prefix + 1)
    return Examples(curve, prefix, horizon)


def example_tensors(curves: CurveSet, examples: Examples, hparams: FMHyperParameters,
                    device: torch.device) -> dict[str, torch.Tensor]:
    """Algorithm 1 line 8: model inputs (history, length, batch size, static context) and target y (Eq. 5)."""
    rows = examples.curve
    width = int(examples.prefix.max())
    observed = np.arange(width)[None, :] < examples.prefix[:, None]
    history = np.where(observed, curves.cumavg[rows, :width], 0.0)
    batch_size = curves.batch_size[rows]
    current = curves.cumavg[rows, examples.prefix - 1]
    target = trajectory_target(curves.cumavg[rows], curves.length[rows], batch_size, examples.prefix,
                               examples.horizon, hparams.bins, hparams.delta)

    def as_tensor(values: np.ndarray, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return torch.as_tensor(values, dtype=dtype, device=device)

    static = static_context(as_tensor(batch_size), as_tensor(curves.lr[rows]), as_tensor(current),
                            as_tensor(examples.horizon * batch_size))
    return {"history": as_tensor(history), "length": as_tensor(examples.prefix, torch.int64),
            "batch_size": as_tensor(batch_size), "static": static, "target": as_tensor(target)}


def flow_matching_objective(model: FlowMatchingModel, batch: dict[str, torch.Tensor], z0: torch.Tensor,
                            u: torch.Tensor) -> torch.Tensor:
    """Eq. (8) on one batch: standardise y to z_1, move along the path of Eq. (7), regress the velocity."""
    z1 = model.standardise_target(batch["target"])
    context = model.context(batch["history"], batch["length"], batch["batch_size"], batch["static"])
    return flow_matching_loss(model.velocity(linear_path(z0, z1, u), u, context), z0, z1)


def path_noise(rng: np.random.Generator, n: int, bins: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """z_0 ~ N(0, I) and flow time u ~ U[0, 1] for n examples."""
    z0 = torch.as_tensor(rng.standard_normal((n, bins)), dtype=torch.float32, device=device)
    u = torch.as_tensor(rng.random(n), dtype=torch.float32, device=device)
    return z0, u


def curves_checksum(*curve_sets: CurveSet) -> str:
    """SHA-256 of exactly the curves a run trains and selects on (ids and values), so a bank that grows
    while a run is paused is noticed on resume."""
    digest = hashlib.sha256()
    for curves in curve_sets:
        digest.update("\n".join(curves.ids).encode())
        digest.update(np.ascontiguousarray(curves.cumavg).tobytes())
    return digest.hexdigest()
