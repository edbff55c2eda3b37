"""Every default of the simulator in one validated dataclass (paper Appendix A, DESIGN §3)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

REWARDS = ("shaped", "sparse")


@dataclass(frozen=True)
class MARAConfig:
    """Simulator settings.  Any field can be overridden by keyword in ``gym.make("MARA-v0", ...)``.

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

    def __post_init__(self) -> None:
        # Imported here: the task-set registry imports this module for its type hints.
        from mara_env.tasksets import TASK_SETS

        positive_ints = ("num_nodes", "max_active", "arrival_window", "warmup_observations", "max_nodes")
        for name in positive_ints:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.num_nodes > self.max_nodes:
            raise ValueError(f"num_nodes ({self.num_nodes}) must not exceed max_nodes ({self.max_nodes})")
        if not 0.0 <= float(self.arrival_prob) <= 1.0:
            raise ValueError(f"arrival_prob must lie in [0, 1], got {self.arrival_prob!r}")
        if self.reward not in REWARDS:
            raise ValueError(f"reward must be one of {REWARDS}, got {self.reward!r}")
        if not float(self.shaping_beta) >= 0.0:
            raise ValueError(f"shaping_beta must be non-negative, got {self.shaping_beta!r}")
        if self.workload is None and self.task_set not in TASK_SETS:
            raise ValueError(f"task_set must be one of {sorted(TASK_SETS)}, got {self.task_set!r}")
        splits = tuple(self.curve_splits)
        if not splits or any(s not in ("train", "val", "test") for s in splits):
            raise ValueError(f"curve_splits must be a non-empty subset of train/val/test, got {self.curve_splits!r}")
        object.__setattr__(self, "curve_splits", splits)

    def replace(self, **changes: object) -> MARAConfig:
        """A copy with some fields changed (validated again); unknown names raise ``ValueError``."""
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise ValueError(f"unknown MARA config field(s) {sorted(unknown)}")
        return dataclasses.replace(self, **changes)
