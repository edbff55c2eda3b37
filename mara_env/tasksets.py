"""Task sets: distributions of episodes drawn from a curve bank (paper §5.1 and §5.4).

A task set turns (bank, random generator, arrival probability) into an :class:`~mara_env.workload.Episode`.
The built-in sets are ``id`` (uniform over the in-distribution families), ``rl_ood`` and ``vit_ood`` (each
arrival independently replaced by the held-out family with probability 0.2) and ``stress`` (the paper's
infeasible-task stress test).  Users add their own with :func:`register_task_set`.

Target losses: ``id``, ``rl_ood`` and ``vit_ood`` place each task's crossing on its own curve (the family's
``crossing`` rule, :mod:`curves.targets`); ``id_paper``, ``rl_ood_paper`` and ``vit_ood_paper`` draw them
from the paper's per-family rules (Table 6: ``base × U[0.9, 1.1]``, or log-uniform for OOD families).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from curves.bank import CurveBank, FamilySpec
from mara_common.checks import choice, integer, number
from curves.targets import CrossingRule, first_crossing
from mara_env.workload import Episode, WorkloadError

TARGET_RULES = ("crossing", "paper")


class TaskSet(Protocol):
    """Anything that draws an episode; ``splits`` limits which bank curves it may use."""

    def sample(self, bank: CurveBank, rng: np.random.Generator, arrival_prob: float, window: int,
               splits: Sequence[str], root: int = 0, index: int = 0) -> Episode: ...


def sample_target_loss(spec: FamilySpec, rng: np.random.Generator) -> float:
    """ε from the family's paper rule: ID ``base × U[low, high]``, OOD log-uniform on [low, high]."""
    rule = _rule(spec, "eps")
    if rule["kind"] == "scaled":
        return float(rule["base"] * rng.uniform(rule["low"], rule["high"]))
    if rule["kind"] == "loguniform":
        return float(np.exp(rng.uniform(np.log(rule["low"]), np.log(rule["high"]))))
    raise WorkloadError(f"family {spec.name!r}: unknown eps rule kind {rule['kind']!r}")


def sample_budget(spec: FamilySpec, rng: np.random.Generator) -> int:
    """B from the family's rule: an inclusive integer interval (ID) or a set of values (OOD)."""
    rule = _rule(spec, "budget")
    if rule["kind"] == "interval":
        return int(rng.integers(rule["low"], rule["high"] + 1))
    if rule["kind"] == "set":
        return int(rng.choice(np.asarray(rule["values"], dtype=np.int64)))
    raise WorkloadError(f"family {spec.name!r}: unknown budget rule kind {rule['kind']!r}")


def _rule(spec: FamilySpec, name: str) -> dict[str, Any]:
    rule = getattr(spec, name)
    if rule is None:
        raise WorkloadError(f"family {spec.name!r} has no calibrated {name} rule; run `python -m curves.calibrate`")
    return rule


def _pool(bank: CurveBank, family: str, splits: Sequence[str]) -> list[str]:
    ids = bank.ids(family=family, splits=splits)
    if not ids:
        raise WorkloadError(f"bank {bank.root} holds no {'/'.join(splits)} curve of family {family!r}")
    return ids


def id_families(bank: CurveBank) -> list[str]:
    """The in-distribution families, sorted by name so draws are stable."""
    names = sorted(name for name, spec in bank.families.items() if spec.role == "id")
    if not names:
        raise WorkloadError(f"bank {bank.root} declares no in-distribution family")
    return names


def ood_family(bank: CurveBank, modality: str) -> str:
    """The held-out family of one modality (``rl`` for the DAgger family, ``image`` for SimpleViT)."""
    names = sorted(n for n, s in bank.families.items() if s.role == "ood" and s.modality == modality)
    if len(names) != 1:
        raise WorkloadError(f"bank {bank.root} must declare exactly one OOD family of modality {modality!r}, "
                            f"found {names}")
    return names[0]


@dataclass(frozen=True)
class MixtureTaskSet:
    """Bernoulli(p) arrivals over the window; each family uniform over the ID families, or, with probability
    ``ood_prob``, the held-out family of modality ``ood_modality`` (paper §5.1).  ``targets`` names the ε
    rule: ``crossing`` (per task, the default) or ``paper`` (per family, Table 6)."""

    ood_modality: str | None = None
    ood_prob: float = 0.2
    targets: str = "crossing"

    def __post_init__(self) -> None:
        choice("targets", self.targets, TARGET_RULES)
        number("ood_prob", self.ood_prob, low=0.0, high=1.0)
        if self.ood_modality is not None and not isinstance(self.ood_modality, str):
            raise TypeError(f"ood_modality must be a modality name or None, got {self.ood_modality!r}")

    def sample(self, bank: CurveBank, rng: np.random.Generator, arrival_prob: float, window: int,
               splits: Sequence[str], root: int = 0, index: int = 0) -> Episode:
        arrivals = np.flatnonzero(rng.random(window) < arrival_prob)
        families = id_families(bank)
        ood = ood_family(bank, self.ood_modality) if self.ood_modality else None
        drawn: dict[str, _FamilyDraws] = {}  # each family's pool and rules, looked up once per episode
        curves, eps, budgets = [], [], []
        for _ in arrivals:
            family = families[int(rng.integers(len(families)))]
            if ood is not None and rng.random() < self.ood_prob:
                family = ood
            if family not in drawn:
                drawn[family] = _FamilyDraws.of(bank, family, splits, self.targets)
            draws = drawn[family]
            curve = draws.pool[int(rng.integers(len(draws.pool)))]
            curves.append(curve)
            if draws.crossing is None:
                eps.append(sample_target_loss(draws.spec, rng))
                budgets.append(sample_budget(draws.spec, rng))
            else:
                budgets.append(sample_budget(draws.spec, rng))
                eps.append(draws.crossing.sample(bank.cumavg(curve), budgets[-1], rng))
        return Episode.from_lists(arrivals, curves, eps, budgets, root, index)


@dataclass(frozen=True)
class _FamilyDraws:
    """What drawing a task of one family needs: its spec, its curve pool and, for per-task targets, its
    crossing rule."""

    spec: FamilySpec
    pool: list[str]
    crossing: CrossingRule | None

    @classmethod
    def of(cls, bank: CurveBank, family: str, splits: Sequence[str], targets: str) -> _FamilyDraws:
        spec = bank.family(family)
        crossing = CrossingRule(**_rule(spec, "crossing")) if targets == "crossing" else None
        return cls(spec, _pool(bank, family, splits), crossing)


@dataclass(frozen=True)
class StressTaskSet:
    """The infeasible-task stress test (paper §5.4), built from any bank's ID curves.

    ``early`` tasks arrive at t = 0 with budget ``early_budget`` and a target below their curve's minimum over
    that budget (they can never succeed).  ``short`` tasks arrive at ``short_arrival`` with targets first
    reached after 22–35 batches and deadlines 1–21 steps after the early deadlines.  With K = 10 slots the
    early tasks hold 7 slots until they expire; a policy that serves them (FIFO, EDF) completes nothing,
    one that stops serving them completes all short tasks through the 3 free slots.
    """

    early: int = 7
    short: int = 13
    early_budget: int = 300
    short_arrival: int = 10
    short_crossing: tuple[int, int] = (22, 35)
    max_lateness: int = 21

    def __post_init__(self) -> None:
        for name in ("early", "short", "early_budget", "short_arrival", "max_lateness"):
            integer(name, getattr(self, name), low=1 if name != "short_arrival" else 0)
        low, high = self.short_crossing
        if integer("short_crossing[0]", low, low=1) > integer("short_crossing[1]", high, low=1):
            raise ValueError(f"short_crossing must be an interval (low, high) with low ≤ high, "
                             f"got {self.short_crossing}")

    def sample(self, bank: CurveBank, rng: np.random.Generator, arrival_prob: float, window: int,
               splits: Sequence[str], root: int = 0, index: int = 0) -> Episode:
        pool = [cid for family in id_families(bank) for cid in _pool(bank, family, splits)]
        order = rng.permutation(len(pool))
        early, short = [], []
        for cid in (pool[i] for i in order):
            curve = bank.cumavg(cid)
            if len(early) < self.early and curve.size >= self.early_budget:
                early.append((cid, float(curve[: self.early_budget].min() * rng.uniform(0.8, 0.95))))
            elif len(short) < self.short:
                target = self._short_target(curve, rng)
                if target is not None:
                    short.append((cid, target))
            if len(early) == self.early and len(short) == self.short:
                break
        else:
            raise WorkloadError(f"bank {bank.root}: not enough suitable ID curves for the stress task set")
        early_deadline = self.early_budget  # early tasks arrive at 0
        budgets = [self.early_budget] * self.early + [
            early_deadline - self.short_arrival + int(rng.integers(1, self.max_lateness + 1))
            for _ in range(self.short)]
        arrivals = [0] * self.early + [self.short_arrival] * self.short
        return Episode.from_lists(arrivals, [c for c, _ in early + short], [e for _, e in early + short],
                                  budgets, root, index)

    def _short_target(self, curve: np.ndarray, rng: np.random.Generator) -> float | None:
        """ε = L(s*) for s* in the crossing range, kept only if the first crossing is also in range."""
        low, high = self.short_crossing
        target = float(curve[int(rng.integers(low, high + 1)) - 1])
        return target if low <= int(first_crossing(curve, target)) <= high else None


TASK_SETS: dict[str, TaskSet] = {
    "id": MixtureTaskSet(),
    "rl_ood": MixtureTaskSet(ood_modality="rl"),
    "vit_ood": MixtureTaskSet(ood_modality="image"),
    "stress": StressTaskSet(),
    "id_paper": MixtureTaskSet(targets="paper"),
    "rl_ood_paper": MixtureTaskSet(ood_modality="rl", targets="paper"),
    "vit_ood_paper": MixtureTaskSet(ood_modality="image", targets="paper"),
}


def register_task_set(name: str, task_set: TaskSet | Callable[..., Episode]) -> None:
    """Make a user-defined task set available as ``gym.make("MARA-v0", task_set=name)``."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"task set name must be a non-empty string, got {name!r}")
    if not hasattr(task_set, "sample"):
        raise TypeError(f"task set {name!r} must have a sample(bank, rng, arrival_prob, window, splits) method")
    TASK_SETS[name] = task_set  # type: ignore[assignment]
