"""``make_policy(name)``: every allocator of the paper by name, loading whatever it needs.

Design: every policy is **self-contained** — a policy that needs demand estimates holds its own frozen
predictor and computes them from the raw observation (``history``, ``history_len``, ``tasks``, ``budget``)
in one batched call per step.  So each returned object is a plain :class:`~mara_agents.policy.Policy`:
``mara_agents.runner.evaluate_workload(policy, path)`` needs no ``wrap``, and
:class:`~mara_agents.policy.NodeActor` plays it in the PettingZoo AEC and parallel envs unchanged (their
node observations carry the same arrays).  A ``predicted_remaining`` entry added by a wrapper is ignored,
so the method name alone decides the predictor.

| name          | allocator | predictor | needs                                                     |
|---------------|-----------|-----------|-----------------------------------------------------------|
| ``mara``        | MAT       | FM        | ``mara_agents/checkpoints/mara_seed{seed}.pt`` + FM checkpoint |
| ``mara-wls``    | MAT       | WLS       | ``mara_agents/checkpoints/mara_wls_seed{seed}.pt``          |
| ``mara-sparse`` | MAT       | FM        | ``mara_agents/checkpoints/mara_sparse_seed{seed}.pt`` (Table 5) |
| ``lara``        | LARA      | WLS       | —                                                         |
| ``lara-fm``     | LARA      | FM        | FM checkpoint                                             |
| ``slack-fm``    | slack ranking (not in the paper) | FM | FM checkpoint                          |
| ``fifo``, ``edf`` | naive   | —         | —                                                         |
| ``random``      | uniform matching | —  | —                                                         |

MAT policies decode greedily unless ``sample=True``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from mara_agents.baselines import EDFPolicy, FIFOPolicy, RandomPolicy
from mara_agents.policy import Policy

CHECKPOINT_DIR = Path(__file__).resolve().parent / "checkpoints"
MAT_CHECKPOINTS = {"mara": "mara_seed{seed}.pt", "mara-wls": "mara_wls_seed{seed}.pt",
                   "mara-sparse": "mara_sparse_seed{seed}.pt"}


def mat_checkpoint(name: str, seed: int = 0) -> Path:
    """The shipped checkpoint of a MAT method and training seed."""
    return CHECKPOINT_DIR / MAT_CHECKPOINTS[name].format(seed=seed)


def _mat(name: str) -> Callable[..., Policy]:
    def build(seed: int = 0, checkpoint: str | Path | None = None, device: str = "cpu", sample: bool = False,
              fm_checkpoint: str = "") -> Policy:
        """MAT from ``checkpoint`` (default: the shipped one for ``seed``), with the predictor it was trained on."""
        from mara_agents.mat.policy import load_mat_policy
        return load_mat_policy(checkpoint or mat_checkpoint(name, seed), device=device, sample=sample, seed=seed,
                               fm_checkpoint=fm_checkpoint)
    build.__name__ = f"make_{name.replace('-', '_')}"
    return build


def _predictive(allocator: str, predictor: str) -> Callable[..., Policy]:
    def build(fm_checkpoint: str = "", device: str = "cpu") -> Policy:
        """A predictor-driven allocator (LARA's feasible subset, or the slack ranking) over the named predictor."""
        from mara_agents.lara import LARAPolicy
        from mara_agents.mat.policy import make_predictor
        from mara_agents.slack import SlackPolicy
        allocators = {"lara": LARAPolicy, "slack": SlackPolicy}
        return allocators[allocator](make_predictor(predictor, fm_checkpoint, device))
    build.__name__ = f"make_{allocator}_{predictor}"
    return build


POLICIES: dict[str, Callable[..., Policy]] = {
    "mara": _mat("mara"),
    "mara-wls": _mat("mara-wls"),
    "mara-sparse": _mat("mara-sparse"),
    "lara": _predictive("lara", "wls"),
    "lara-fm": _predictive("lara", "fm"),
    "slack-fm": _predictive("slack", "fm"),
    "fifo": FIFOPolicy,
    "edf": EDFPolicy,
    "random": RandomPolicy,
}


def make_policy(name: str, **kwargs: Any) -> Policy:
    """Build a registered allocator by name; keyword arguments go to its factory (e.g. ``seed=1`` for a MAT
    training seed or the random policy's seed, ``checkpoint=...``, ``sample=True``, ``device="cuda"``)."""
    if name not in POLICIES:
        raise ValueError(f"unknown policy {name!r}; choose one of {sorted(POLICIES)}")
    return POLICIES[name](**kwargs)
