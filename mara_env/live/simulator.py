"""The simulator's bookkeeping with a curve source that fills as real batches run.

:class:`LiveSimulator` is the MARA-v0 :class:`~mara_env.simulator.Simulator` — same slots, queue, deadlines,
successes, expiries, potential and features — loaded with a placeholder bank whose curves are unknown
(NaN) until revealed.  Before each step the live step (:func:`mara_env.live.step.live_step`) reveals the
losses of the batches just run (:meth:`reveal`); the parent's step then reads exactly those entries, and
nothing a live run has not produced is ever observed (a NaN in an observation would show it).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from curves.bank import CurveBank, CurveRecord, FamilySpec
from mara_env.config import MARAConfig
from mara_env.dynamics import SERVED_FEATURES, progress_table
from mara_env.features import TASK_FEATURE_INDEX as _F
from mara_env.live.tasks import LIVE_SPLIT, LiveEpisode, tracked
from mara_env.simulator import Simulator

_REVEALED = ("current_loss", "initial_loss", "log_loss_ratio")


def episode_bank(episode: LiveEpisode, per_batch: list[np.ndarray], width: int, specs: dict[str, FamilySpec],
                 root: str = "<live>") -> CurveBank:
    """An in-memory bank with one curve per task, each ``width`` batches long: ``per_batch[k]`` followed by
    its last value (1.0 for a task that never ran).  Padding only fills the simulator's tables; with the
    live run's decisions no task ever reaches a padded batch."""
    records, arrays = {}, {}
    for k, task in enumerate(episode.tasks):
        losses = np.asarray(per_batch[k], dtype=np.float32)[:width]
        padded = np.full(width, losses[-1] if losses.size else 1.0, dtype=np.float32)
        padded[:losses.size] = losses
        record = CurveRecord(task.family, LIVE_SPLIT, k, task.seed, task.data_seed, task.batch_size, task.lr,
                             episode.preset, "live", width)
        records[record.id] = record
        arrays[record.id] = padded
    families = {name: specs[name] for name in {task.family for task in episode.tasks}}
    if not records:  # the simulator's tables take their width from the bank's longest curve
        family = next(iter(specs.values()))
        records["<width>"] = CurveRecord(family.name, LIVE_SPLIT, -1, 0, 0, 1, 1.0, episode.preset, "live", width)
        arrays["<width>"] = np.ones(width, dtype=np.float32)
        families[family.name] = family
    return CurveBank(root=Path(root), families=families, records=records, per_batch=arrays)


class LiveSimulator(Simulator):
    """A simulator whose tasks' losses are revealed batch by batch (observation width ``history_width``).

    ``per_batch[k]`` lists the losses task k's batches have revealed so far; :meth:`reveal` adds one and
    :meth:`fail` ends a task whose recipe failed. The rest is the :class:`~mara_env.simulator.Simulator` API
    (``step``, ``observation``, ``metrics``, ``task_outcome(s)``, ``slot_tasks``)."""

    def __init__(self, config: MARAConfig, history_width: int):
        super().__init__(config, CurveBank(Path("<live>"), {}, {}, {}))
        self.history_width = history_width

    def load_live(self, episode: LiveEpisode, specs: dict[str, FamilySpec]) -> None:
        """Start ``episode`` with every loss unknown."""
        self.live_episode = episode
        self.per_batch: list[list[float]] = [[] for _ in episode.tasks]
        self.bank = episode_bank(episode, [np.empty(0)] * len(episode), self.history_width, specs)
        self.load(episode.episode())
        self.loss_table[:, 1:] = np.nan
        self.progress_table[:, 1:] = np.nan
        for name in _REVEALED:
            self.feature_table[:, 1:, _F[name]] = np.nan

    def reveal(self, task: int, loss: float) -> None:
        """Record the loss of the batch task ``task`` just ran; its next tracked loss (the cumulative average
        L(s) unless the task names another metric) and every table entry derived from it become known,
        computed as :meth:`Simulator.load` computes them."""
        self.per_batch[task].append(float(np.float32(loss)))
        spec = self.live_episode.tasks[task]
        s = len(self.per_batch[task])
        self.loss_table[task, s] = tracked(self.per_batch[task], spec.metric, spec.ema_decay)[-1]
        derive_loss_row(self, task)

    def deadline_of(self, task: int) -> int:
        """The step by which task ``task`` must succeed (the end of the step it failed in, if it failed)."""
        return int(self.deadline[task])

    def fail(self, task: int) -> None:
        """Task ``task``'s recipe failed for good: it expires at the end of this step, like a missed deadline."""
        self.deadline[task] = self.t + 1
        self.slot_deadline[self.slot_task == task] = self.t + 1


def derive_loss_row(sim: Simulator, task: int) -> None:
    """Recompute the progress and loss features of ``task``'s row from its ``loss_table`` row, as
    :meth:`Simulator.load` derives them (the live simulator after each batch)."""
    rows = slice(task, task + 1)
    *features, sim.progress_table[rows] = progress_table(sim.loss_table[rows], sim.budget[rows], sim.eps[rows],
                                                         sim.config.warmup_observations)
    row = sim.feature_table[task:task + 1]
    for name, values in zip(SERVED_FEATURES, features):
        row[..., _F[name]] = values
