"""Every default of the simulator and its front ends in one validated dataclass (paper Appendix A)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mara_common.checks import boolean, choice, choices, existing_dir, existing_file, integer, number

REWARDS = ("shaped", "sparse")
CONFLICTS = ("idle", "repair")
ACTIONS = ("picks", "scores")
OBSERVATIONS = ("dict", "flat", "rllib")
SPLITS = ("train", "val", "test")


# Upper bounds: far above any sensible setting, far below what would exhaust memory (observations hold
# K × H_max losses per step, arrivals draw one number per step of the window).
MAX_NODES = 1024
MAX_SLOTS = 1024
MAX_WINDOW = 1_000_000
MAX_HISTORY = 4096
MAX_SPEED = 64
MAX_SWITCH_COST = 1000


@dataclass(frozen=True)
class MARAConfig:
    """Simulator and front-end settings.  Any field can be overridden by keyword in
    ``gym.make("MARA-v0", ...)``, ``mara_env.env(...)`` and ``mara_env.parallel_env(...)``.

    A bad value raises ``ValueError`` (``TypeError`` for a value of the wrong kind) naming the field, at
    construction, not deep inside a step: ranges, upper bounds that would exhaust memory, and a ``bank`` or
    ``workload`` path that does not exist or is not a directory / a file.  The checks are those of
    :mod:`mara_common.checks`, shared by every door of the project.
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
    node_speeds: tuple[int, ...] | None = None
    """Batches node i runs per step when it serves a task (M integers ≥ 1); ``None`` is 1 for every node, the
    paper's identical nodes (see ``mara_env.service``)."""
    switch_cost: int = 0
    """c, setup steps a task spends on a node that did not serve it at the previous step before it runs a batch
    there (first service, move and resume alike); 0 is the paper's free preemption and migration."""
    fairness_metrics: bool = False
    """Add the per-family success rates, their minimum and Jain's index to ``info["episode_metrics"]``
    (``mara_env.fairness``); the reward does not change."""
    abandon: bool = False
    """Let a node give up a slot's task instead of serving: each node gains K choices, K + 1 + j abandoning slot
    j (``scores``: K abandon scores after the K slot scores); the task leaves as ``abandoned`` and its slot is
    refilled in the same step. Adds the abandon counter to the step info and the abandon and wasted-node-step
    metrics to ``info["episode_metrics"]`` (``mara_env.abandon``)."""

    def __post_init__(self) -> None:
        # Imported here: the task-set registry imports this module for its type hints.
        from mara_env.tasksets import TASK_SETS

        integer("max_nodes", self.max_nodes, low=1, high=MAX_NODES)
        integer("num_nodes", self.num_nodes, low=1, high=MAX_NODES)
        if self.num_nodes > self.max_nodes:
            raise ValueError(f"num_nodes ({self.num_nodes}) must not exceed max_nodes ({self.max_nodes})")
        integer("max_active", self.max_active, low=1, high=MAX_SLOTS)
        integer("arrival_window", self.arrival_window, low=1, high=MAX_WINDOW)
        integer("warmup_observations", self.warmup_observations, low=1, high=MAX_WINDOW)
        integer("flat_history", self.flat_history, low=1, high=MAX_HISTORY)
        number("arrival_prob", self.arrival_prob, low=0.0, high=1.0)
        number("shaping_beta", self.shaping_beta, low=0.0)
        choice("reward", self.reward, REWARDS)
        choice("conflicts", self.conflicts, CONFLICTS)
        choice("actions", self.actions, ACTIONS)
        choice("observation", self.observation, OBSERVATIONS)
        if self.bank is not None:
            existing_dir("bank", self.bank)
        if self.workload is not None:
            existing_file("workload", self.workload)
        else:
            choice("task_set", self.task_set, tuple(sorted(TASK_SETS)))
        object.__setattr__(self, "curve_splits", choices("curve_splits", self.curve_splits, SPLITS))
        integer("switch_cost", self.switch_cost, low=0, high=MAX_SWITCH_COST)
        boolean("fairness_metrics", self.fairness_metrics)
        boolean("abandon", self.abandon)
        if self.node_speeds is not None:
            object.__setattr__(self, "node_speeds", _speeds(self.node_speeds, self.num_nodes))

    @property
    def speeds(self) -> tuple[int, ...]:
        """Batches each node runs per step: ``node_speeds``, or 1 for every node."""
        return self.node_speeds if self.node_speeds is not None else (1,) * self.num_nodes

    @property
    def node_options(self) -> bool:
        """Whether a node option is off its default (a speed other than 1, or ``switch_cost`` > 0): then the
        simulators take the node-aware path and every observation carries the node features."""
        return self.switch_cost > 0 or any(speed != 1 for speed in self.speeds)

    @property
    def node_choices(self) -> int:
        """Choices of one node: idle, serve one of the K slots and, with ``abandon``, abandon one of them."""
        return (2 if self.abandon else 1) * self.max_active + 1

    def replace(self, **changes: object) -> MARAConfig:
        """A copy with some fields changed (validated again); unknown names raise ``ValueError``."""
        names = [f.name for f in dataclasses.fields(self)]
        unknown = set(changes) - set(names)
        if unknown:
            raise ValueError(f"unknown MARA config field(s) {sorted(unknown)}; known: {', '.join(names)}")
        return dataclasses.replace(self, **changes)


def _speeds(value: object, num_nodes: int) -> tuple[int, ...]:
    """``node_speeds`` as a tuple of ``num_nodes`` integers in [1, MAX_SPEED]; anything else raises naming it."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
        raise TypeError(f"node_speeds must be a sequence of {num_nodes} integers (one per node) or None, got {value!r}")
    speeds = tuple(integer(f"node_speeds[{i}]", speed, low=1, high=MAX_SPEED) for i, speed in enumerate(value))
    if len(speeds) != num_nodes:
        raise ValueError(f"node_speeds must hold one speed per node (num_nodes={num_nodes}), got {len(speeds)}: "
                         f"{tuple(value)!r}")
    return speeds


def resolve_config(config: MARAConfig | None, overrides: Mapping[str, Any]) -> MARAConfig:
    """The settings of an env built with ``config=...`` (default: ``MARAConfig()``) and keyword ``overrides``;
    a ``config`` that is not a :class:`MARAConfig` raises ``TypeError`` naming it."""
    if config is not None and not isinstance(config, MARAConfig):
        raise TypeError(f"config must be a MARAConfig or None, got {config!r}")
    base = config or MARAConfig()
    return base.replace(**overrides) if overrides else base
