"""The one registry of allocators: every method by name, with its label and seeds, and ``make_policy``.

Every policy is **self-contained** — a policy that needs demand estimates holds its own demand stage
(:class:`~mara_agents.predictors.demand.Demand`) and computes them from the raw observation (``history``,
``history_len``, ``tasks``, ``budget``) in one batched call per step.  So each returned object is a plain
:class:`~mara_agents.play.policy.Policy`: ``mara_agents.play.lockstep.evaluate_workload(policy, path)`` needs no
wrapper, and :class:`~mara_agents.play.policy.NodeActor` plays it in the PettingZoo AEC and parallel envs.  The
evaluation (``evaluate.py``) reads its methods, labels and seeds from :data:`POLICIES`.

| name          | allocator | predictor | needs                                                     |
|---------------|-----------|-----------|-----------------------------------------------------------|
| ``mara``        | MAT       | FM        | ``mara_agents/checkpoints/mara_seed{seed}.pt`` + FM checkpoint |
| ``mara-wls``    | MAT       | WLS       | ``mara_agents/checkpoints/mara_wls_seed{seed}.pt``          |
| ``mara-sparse`` | MAT       | FM        | ``mara_agents/checkpoints/mara_sparse_seed{seed}.pt`` (Table 5) |
| ``lara``        | LARA      | WLS       | —                                                         |
| ``lara-fm``     | LARA      | FM        | FM checkpoint                                             |
| ``slack-fm``    | slack ranking (not in the paper) | FM | FM checkpoint                          |
| ``mat-il-ens``  | three MATs decoded as one (ours) | FM | ``mat_il_ens_member{K}.pt``, K = 3·seed … 3·seed + 2 |
| ``fifo``, ``edf`` | naive   | —         | —                                                         |
| ``random``      | uniform matching | —  | —                                                         |
| ``slack-fm+abandon``, ``lara+abandon``, ``lara-fm+abandon``, ``edf+abandon`` | + abandon rule | FM, WLS, FM, — | ``abandon=True`` |
| ``mat-il+abandon`` | MAT with the abandon head (ours) | FM | ``mat_il_abandon_seed0.pt``, ``abandon=True`` |
| ``maskable-ppo`` | sb3-contrib MaskablePPO (third-party) | — | sb3-contrib + ``mara_agents/checkpoints/third_party/maskable_ppo_seed{seed}.zip`` |
| ``maskable-ppo-fm`` | sb3-contrib MaskablePPO on ``MARA-Forecast-v0`` | FM | sb3-contrib + ``third_party/forecast/maskable_ppo_seed{seed}.zip`` |
| ``cleanrl-ppo-fm`` | CleanRL-style PPO on ``MARA-Forecast-v0`` | FM | ``third_party/forecast/cleanrl_ppo_seed{seed}_policy.pt2`` |

MAT policies decode greedily unless ``sample=True`` (``mat-il-ens`` decodes greedily only).  Building a policy never
imports training code.  A method whose :attr:`Method.abandon` is set plays only ``MARA-v0`` with ``abandon=True``
(2K + 1 choices per node): ``evaluate.py abandon`` plays it there, and the live front ends switch the action on
for it (``mara_agents.live.jobs.schedule.abandons``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mara_common import checks
from mara_agents.allocators.naive import EDFPolicy, FIFOPolicy, RandomPolicy
from mara_agents.allocators.third_party import (FORECAST_DIR, exported_policy_name, make_cleanrl_ppo_fm,
                                                make_maskable_ppo, make_maskable_ppo_fm, shipped_seeds)
from mara_agents.play.policy import Policy

CHECKPOINT_DIR = Path(__file__).resolve().parents[1] / "checkpoints"
TRAINING_SEEDS = (0, 1, 2)
ENSEMBLE_SIZE = 3  # members per training seed of an ensemble method


@dataclass(frozen=True)
class Method:
    """A registered allocator: its table label, its factory and the seeds the evaluation plays it with
    (MAT training seeds, or the random policy's seed; None: the method has no seed); ``abandon``: it gives up
    tasks, so it needs ``MARA-v0`` with ``abandon=True``."""

    name: str
    label: str
    factory: Callable[..., Policy]
    seeds: tuple[int, ...] | None = None
    abandon: bool = False


def mat_checkpoint(name: str, seed: int = 0) -> Path:
    """The shipped checkpoint of a MAT method and training seed."""
    return CHECKPOINT_DIR / f"{name.replace('-', '_').replace('+', '_')}_seed{seed}.pt"


def _mat(name: str) -> Callable[..., Policy]:
    def build(seed: int = 0, checkpoint: str | Path | None = None, device: str = "cpu", sample: bool = False,
              fm_checkpoint: str = "", verify: bool = True) -> Policy:
        """MAT from ``checkpoint`` (default: the shipped one for ``seed``), with the predictor it was trained on."""
        from mara_agents.mat.policy import load_mat_policy
        return load_mat_policy(checkpoint or mat_checkpoint(name, seed), device=device, sample=sample, seed=seed,
                               fm_checkpoint=fm_checkpoint, verify=verify)
    build.__name__ = f"make_{name.replace('-', '_').replace('+', '_')}"
    return build


def ensemble_members(name: str, seed: int = 0) -> list[Path]:
    """The shipped member checkpoints of an ensemble method's training seed: members 3·seed … 3·seed + 2, each
    trained independently with its own seed, so the three ensembles share no member."""
    return [CHECKPOINT_DIR / f"{name.replace('-', '_')}_member{member}.pt"
            for member in range(ENSEMBLE_SIZE * seed, ENSEMBLE_SIZE * (seed + 1))]


def _mat_ensemble(name: str) -> Callable[..., Policy]:
    def build(seed: int = 0, checkpoints: list[str | Path] | None = None, device: str = "cpu", sample: bool = False,
              fm_checkpoint: str = "", verify: bool = True) -> Policy:
        """MAT members decoded as one greedy policy (``mara_agents.mat.ensemble``), from ``checkpoints``
        (default: the shipped members of ``seed``), with the predictor they were trained on."""
        if sample:
            raise ValueError(f"{name} decodes greedily only; sample from one of its members "
                             "(make_policy('mara', checkpoint=<member>.pt, sample=True)) instead")
        from mara_agents.mat.ensemble import load_mat_ensemble
        return load_mat_ensemble(checkpoints or ensemble_members(name, seed), device=device,
                                 fm_checkpoint=fm_checkpoint, verify=verify)
    build.__name__ = f"make_{name.replace('-', '_')}"
    return build


def _predictive(allocator: str, predictor: str) -> Callable[..., Policy]:
    def build(fm_checkpoint: str = "", device: str = "cpu", verify: bool = True) -> Policy:
        """A predictor-driven allocator (LARA's feasible subset, or the slack ranking) over the named predictor."""
        from mara_agents.allocators.lara import LARAPolicy
        from mara_agents.allocators.slack import SlackPolicy
        from mara_agents.predictors.demand import make_demand
        allocators = {"lara": LARAPolicy, "slack": SlackPolicy}
        return allocators[allocator](make_demand(predictor, fm_checkpoint, device, verify))
    build.__name__ = f"make_{allocator}_{predictor}"
    return build


def _abandoning(name: str) -> Callable[..., Policy]:
    def build(threshold: float | None = None, make_room: bool | None = None, fm_checkpoint: str = "",
              device: str = "cpu", verify: bool = True) -> Policy:
        """The base allocator with its abandon rule, at the threshold and make_room setting chosen on val unless
        given (``mara_agents.allocators.abandon``)."""
        from mara_agents.allocators.abandon import make_abandoning_policy
        return make_abandoning_policy(name, threshold, make_room, fm_checkpoint, device, verify)
    build.__name__ = f"make_{name.replace('-', '_').replace('+', '_')}"
    return build


POLICIES: dict[str, Method] = {method.name: method for method in (
    Method("mara", "MARA", _mat("mara"), TRAINING_SEEDS),
    Method("mara-wls", "MARA-WLS", _mat("mara-wls"), TRAINING_SEEDS),
    Method("lara", "LARA", _predictive("lara", "wls")),
    Method("lara-fm", "LARA-FM", _predictive("lara", "fm")),
    Method("slack-fm", "FM-slack", _predictive("slack", "fm")),  # not in the paper (allocators/slack.py)
    # not the paper's recipe: DAgger from a privileged expert into students that start as FM-slack, then PPO;
    # three independently trained members decoded as one (docs/research/learned_allocator.md)
    Method("mat-il-ens", "MAT-IL ensemble (ours)", _mat_ensemble("mat-il-ens"), TRAINING_SEEDS),
    Method("fifo", "FIFO", FIFOPolicy),
    Method("edf", "EDF", EDFPolicy),
    # stop what cannot finish: each needs MARA-v0 with abandon=True (docs/research/abandon_rules.md)
    Method("slack-fm+abandon", "FM-slack + abandon", _abandoning("slack-fm+abandon"), abandon=True),
    Method("lara+abandon", "LARA + abandon", _abandoning("lara+abandon"), abandon=True),
    Method("lara-fm+abandon", "LARA-FM + abandon", _abandoning("lara-fm+abandon"), abandon=True),
    Method("edf+abandon", "EDF + abandon", _abandoning("edf+abandon"), abandon=True),
    # one learned policy with the abandon action: DAgger from the abandoning expert, starting as FM-slack + abandon
    Method("mat-il+abandon", "MAT-IL + abandon (ours)", _mat("mat-il+abandon"), (0,), abandon=True),
    Method("mara-sparse", "MARA w/ sparse reward", _mat("mara-sparse"), TRAINING_SEEDS),
    Method("random", "Random", RandomPolicy, (0,)),  # seeded, so that reruns match
    # trained by sb3-contrib, not by this project; seeds: those of the shipped checkpoints
    Method("maskable-ppo", "MaskablePPO (SB3, third-party)", make_maskable_ppo, shipped_seeds()),
    # the same kinds of learner on MARA-Forecast-v0, with FM's forecast in the observation (docs/research/third_party.md)
    Method("maskable-ppo-fm", "MaskablePPO + FM forecast (SB3, third-party)", make_maskable_ppo_fm,
           shipped_seeds(FORECAST_DIR)),
    Method("cleanrl-ppo-fm", "CleanRL PPO + FM forecast (third-party)", make_cleanrl_ppo_fm,
           shipped_seeds(FORECAST_DIR, exported_policy_name("*"), ".pt2")),
)}


def _checkpoint_list(name: str, value: object) -> list[Path]:
    paths = value.split("+") if isinstance(value, str) else value
    if not isinstance(paths, (list, tuple)) or not paths:
        raise TypeError(f"{name} must be a non-empty list of checkpoint paths, got {value!r}")
    return [checks.path(name, path) for path in paths]


# How make_policy checks each keyword argument a factory may take (None passes: the factory's default).  A
# checkpoint that does not exist is left to the loader, whose CheckpointError says how to make one.
ARGUMENT_CHECKS: dict[str, Callable[[str, Any], Any]] = {
    "seed": lambda name, value: checks.integer(name, value, 0),
    "checkpoint": checks.path,
    "checkpoints": _checkpoint_list,
    "fm_checkpoint": lambda name, value: value == "" or checks.path(name, value),
    "device": checks.torch_device,
    "sample": checks.boolean,
    "make_room": checks.boolean,
    "verify": checks.boolean,
}


def make_policy(name: str, **kwargs: Any) -> Policy:
    """Build a registered allocator by name; keyword arguments go to its factory (e.g. ``seed=1`` for a MAT
    training seed or the random policy's seed, ``checkpoint=...``, ``sample=True``, ``device="cuda"``,
    ``verify=False`` to accept a checkpoint without a manifest).  An unknown name or argument, or a value of
    the wrong type or range, is a ``ValueError``/``TypeError`` naming it, raised before anything is loaded."""
    if not isinstance(name, str) or name not in POLICIES:
        raise ValueError(f"unknown policy {name!r}; choose one of {sorted(POLICIES)}")
    accepted = inspect.signature(POLICIES[name].factory).parameters
    for key, value in kwargs.items():
        if key not in accepted:
            raise TypeError(f"make_policy({name!r}): unknown argument {key!r}; it takes "
                            f"{', '.join(accepted) or 'no arguments'}")
        if value is not None and key in ARGUMENT_CHECKS:
            ARGUMENT_CHECKS[key](key, value)
    return POLICIES[name].factory(**kwargs)
