"""Every default of the simulator and its front ends in one validated dataclass (paper Appendix A)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from numbers import Real

REWARDS = ("shaped", "sparse")
CONFLICTS = ("idle", "repair")
ACTIONS = ("picks", "scores")
OBSERVATIONS = ("dict", "flat", "rllib")
SPLITS = ("train", "val", "test")


def _positive_int(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


def _finite_real(name: str, value: object) -> float:
    """A real number (not a bool or a string such as ``"0.5"``) that is finite."""
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(float(value)):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def _choice(name: str, value: object, choices: tuple[str, ...]) -> None:
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")


@dataclass(frozen=True)
class MARAConfig:
    """Simulator and front-end settings.  Any field can be overridden by keyword in
    ``gym.make("MARA-v0", ...)``, ``mara_env.env(...)`` and ``mara_env.parallel_env(...)``.

    A bad value raises ``ValueError`` naming the field, at construction, not deep inside a step.
    """

    num_nodes: int = 7
    """M, homogeneous compute nodes (agents)."""
    max_active: int = 10
    """K, task slots; further arrivals wait in the FIFO admission queue."""
    arrival_prob: float = 0.04
    """p, Bernoulli arrival probability per step inside the arrival window."""
    arrival_window: int = 500
    """T, steps during which tasks may arrive; the episode then drains."""
    task_set: str = "id"
    """Which task distribution random episodes are drawn from (see ``mara_env.tasksets``)."""
    curve_splits: tuple[str, ...] = ("train", "val")
    """Bank splits random episodes draw curves from (training uses train/val; evaluation files use test)."""
    reward: str = "shaped"
    """``shaped`` (success count + potential shaping) or ``sparse`` (success count only)."""
    shaping_beta: float = 0.1
    """β, weight of the log-progress potential."""
    warmup_observations: int = 4
    """Observations a predictor needs before it is trusted (feature ``warmup`` and the ready metric)."""
    max_nodes: int = 16
    """M_max, normaliser of the node count in the ``global`` features."""
    bank: str | None = None
    """Curve bank directory; ``None`` is the bank shipped in ``curves/bank``."""
    workload: str | None = None
    """A workload file to replay instead of drawing random episodes; ``None`` draws from ``task_set``."""
    conflicts: str = "idle"
    """What happens to a pick of an empty slot or of a slot an earlier node took: ``idle`` (the paper's:
    the node idles and ``info["conflicts"]`` counts it) or ``repair`` (the node gets the next free occupied
    slot after its pick, or idles if none is left; see ``mara_env.actions``)."""
    actions: str = "picks"
    """Gymnasium env only: ``picks`` (default, the paper's: ``MultiDiscrete``, one choice per node) or
    ``scores`` (a ``Box`` of K slot scores; the env serves the highest-scoring occupied slots with a
    positive score, at most M, so every action is a matching; see ``mara_env.actions.scores_to_picks``)."""
    observation: str = "dict"
    """``dict`` (the paper's arrays, see ``MARAEnv``), ``flat`` (one float32 vector, see ``mara_env.flat``)
    or ``rllib`` (``{"observations": <flat>, "action_mask": ...}``, the keys RLlib's action masking reads)."""
    flat_history: int = 16
    """H, loss-history points per slot in the ``flat`` and ``rllib`` observations."""

    def __post_init__(self) -> None:
        # Imported here: the task-set registry imports this module for its type hints.
        from mara_env.tasksets import TASK_SETS

        for name in ("num_nodes", "max_active", "arrival_window", "warmup_observations", "max_nodes",
                     "flat_history"):
            _positive_int(name, getattr(self, name))
        if self.num_nodes > self.max_nodes:
            raise ValueError(f"num_nodes ({self.num_nodes}) must not exceed max_nodes ({self.max_nodes})")
        if not 0.0 <= _finite_real("arrival_prob", self.arrival_prob) <= 1.0:
            raise ValueError(f"arrival_prob must lie in [0, 1], got {self.arrival_prob!r}")
        if _finite_real("shaping_beta", self.shaping_beta) < 0.0:
            raise ValueError(f"shaping_beta must be non-negative, got {self.shaping_beta!r}")
        _choice("reward", self.reward, REWARDS)
        _choice("conflicts", self.conflicts, CONFLICTS)
        _choice("actions", self.actions, ACTIONS)
        _choice("observation", self.observation, OBSERVATIONS)
        for name in ("bank", "workload"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, (str, bytes)) and not hasattr(value, "__fspath__"):
                raise ValueError(f"{name} must be a path or None, got {value!r}")
        if self.workload is None:
            _choice("task_set", self.task_set, tuple(sorted(TASK_SETS)))
        splits = (self.curve_splits,) if isinstance(self.curve_splits, str) else tuple(self.curve_splits)
        if not splits or any(s not in SPLITS for s in splits):
            raise ValueError(f"curve_splits must be a non-empty subset of {SPLITS}, got {self.curve_splits!r}")
        object.__setattr__(self, "curve_splits", splits)

    def replace(self, **changes: object) -> MARAConfig:
        """A copy with some fields changed (validated again); unknown names raise ``ValueError``."""
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise ValueError(f"unknown MARA config field(s) {sorted(unknown)}")
        return dataclasses.replace(self, **changes)
