"""Live episodes: tasks that are real training runs of a ``curves`` family recipe, not recorded curves.

A live task carries everything its training run needs (family, initialisation and data-order seeds, batch
size, learning rate) and what the environment needs (arrival step, target loss ε, available time B, and the
metric ε applies to).  Its curve id in the episode's recorded bank is ``family/test/<task index>``; a user job
(:mod:`mara_env.live.jobs`) is a task whose family is the job's own name.

The metric a task's ε applies to (:func:`tracked`):

* ``cumulative_mean`` — L(s), the mean of all s losses so far, as in the benchmark and the bank's curves;
* ``ema`` — an exponential moving average, m(1) = ℓ(1) and m(s) = d·m(s−1) + (1−d)·ℓ(s) with decay d
  (``ema_decay``, 0.9 by default: about the last ten losses);
* ``last`` — the last loss ℓ(s).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from curves.bank import FamilySpec, cumulative_average
from curves.recipe import draw_recipe
from mara_env.tasksets import sample_budget, sample_target_loss
from mara_env.workload import Episode

LIVE_SPLIT = "test"
METRICS = ("cumulative_mean", "ema", "last")


def tracked(per_batch: Sequence[float] | np.ndarray, metric: str = "cumulative_mean",
            ema_decay: float = 0.9) -> np.ndarray:
    """The series, s = 1..n, that a task's ε is compared with, in float64 (see the module docstring)."""
    losses = np.asarray(per_batch, dtype=np.float64)
    if metric == "cumulative_mean":
        return cumulative_average(losses)
    if metric == "last":
        return losses.copy()
    if metric == "ema":
        out = np.empty_like(losses)
        value = losses[0] if losses.size else 0.0
        for s, loss in enumerate(losses):
            value = loss if s == 0 else ema_decay * value + (1.0 - ema_decay) * loss
            out[s] = value
        return out
    raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")


@dataclass(frozen=True)
class LiveTask:
    """One arriving training job: its recipe, its target loss and its available time."""

    arrival: int
    family: str
    seed: int
    data_seed: int
    batch_size: int
    lr: float
    eps: float
    budget: int
    metric: str = "cumulative_mean"
    ema_decay: float = 0.9


@dataclass(frozen=True)
class LiveEpisode:
    """The tasks of one live episode, sorted by arrival (ties keep their order: queue order)."""

    tasks: tuple[LiveTask, ...]
    preset: str = "cpu"

    def __post_init__(self) -> None:
        arrivals = [task.arrival for task in self.tasks]
        if arrivals != sorted(arrivals):
            raise ValueError("live episode: tasks must be sorted by arrival")

    def __len__(self) -> int:
        return len(self.tasks)

    def curve_id(self, task: int) -> str:
        """The id of task ``task``'s curve in the recorded bank."""
        return f"{self.tasks[task].family}/{LIVE_SPLIT}/{task:03d}"

    def episode(self) -> Episode:
        """The simulator's view: arrivals, curve ids, ε and B."""
        return Episode.from_lists([t.arrival for t in self.tasks], [self.curve_id(k) for k in range(len(self))],
                                  [t.eps for t in self.tasks], [t.budget for t in self.tasks])

    def to_json(self) -> dict[str, Any]:
        """JSON form (every field of every task; ε keeps every digit)."""
        return {"preset": self.preset, "tasks": [asdict(task) for task in self.tasks]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LiveEpisode:
        """Inverse of :meth:`to_json`."""
        return cls(tuple(LiveTask(**task) for task in data["tasks"]), data.get("preset", "cpu"))


def draw_live_episode(families: Sequence[str], specs: Mapping[str, FamilySpec],
                      batch_sizes: Mapping[str, Sequence[int]], rng: np.random.Generator, arrival_prob: float,
                      window: int, preset: str = "cpu") -> LiveEpisode:
    """Bernoulli(p) arrivals over the window, each task's family uniform over ``families``.

    The recipe is drawn as the bank's curves are (:func:`curves.recipe.draw_recipe`, keyed by a number from
    ``rng`` so episodes differ by seed); ε and B follow the family's calibrated rules from ``specs`` (the
    paper's per-family rules: a per-task crossing target needs the curve in advance, which a live run lacks).
    """
    arrivals = np.flatnonzero(rng.random(window) < arrival_prob)
    key = int(rng.integers(2**31 - 1))
    tasks = []
    for index, arrival in enumerate(arrivals.tolist()):
        family = families[int(rng.integers(len(families)))]
        recipe = draw_recipe(family, f"live-{key}", index, batch_sizes[family])
        eps = sample_target_loss(specs[family], rng)
        tasks.append(LiveTask(arrival, family, recipe.seed, recipe.data_seed, recipe.batch_size, recipe.lr, eps,
                              sample_budget(specs[family], rng)))
    return LiveEpisode(tuple(tasks), preset)
