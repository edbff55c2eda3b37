"""What a live episode leaves behind, and its replay in the simulator.

A live episode writes two things into its output folder:

* ``bank/`` — a curve bank (the ``curves`` format) with one curve per task that ran at least one batch:
  its per-batch losses, recorded under ``family/test/<task index>`` with the task's recipe;
* ``episode.json`` — the episode log: the settings, the tasks, and per step the applied joint action, the
  tasks served, their losses, the failures and the timings; at the end each task's outcome.

:func:`replay` plays the log's decisions in the MARA-v0 :class:`~mara_env.simulator.Simulator` over the
recorded curves (for a task whose ε applies to another metric than the cumulative average, with that
metric's series in its loss row), and :func:`replay_mismatches` lists every step or task where the replay's
successes and expiries differ from the live run's (none, when the live run is faithful to the simulator).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from curves.bank import BankWriter, CurveRecord, FamilySpec, load_bank
from mara_common.atomic import atomic_write_json, read_versioned_json
from curves.recorder import declare_keeping_rules, generator_commit
from mara_env.config import MARAConfig
from mara_env.live.simulator import derive_loss_row, episode_bank
from mara_env.live.tasks import LiveEpisode, tracked
from mara_env.simulator import Simulator

FORMAT = "mara-live-episode"
VERSION = 1
CONFIG_FIELDS = ("num_nodes", "max_active", "arrival_prob", "arrival_window", "reward", "shaping_beta",
                 "warmup_observations", "max_nodes", "conflicts")


@dataclass
class EpisodeLog:
    """The record of one live episode, filled step by step by the live environment."""

    config: MARAConfig
    episode: LiveEpisode
    history_width: int
    specs: dict[str, FamilySpec]
    steps: list[dict[str, Any]] = field(default_factory=list)
    failed: dict[int, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def effective_budgets(self) -> list[int]:
        """B per task, shortened for a task whose recipe failed so that it expires when the live run expired it."""
        budgets = [task.budget for task in self.episode.tasks]
        for step in self.steps:
            for task in step["failed"]:
                budgets[task] = step["t"] + 1 - self.episode.tasks[task].arrival
        return budgets

    def to_json(self, statuses: list[str], metrics: dict[str, float]) -> dict[str, Any]:
        """The ``episode.json`` document, with each task's final outcome and the episode's metrics."""
        settings = {name: getattr(self.config, name) for name in CONFIG_FIELDS}
        return {"format": FORMAT, "version": VERSION, "config": settings, "history_width": self.history_width,
                "episode": self.episode.to_json(), "steps": self.steps,
                "failed": {str(k): why for k, why in self.failed.items()}, "outcomes": statuses,
                "metrics": metrics, **self.extra}


def save_episode(out: str | Path, log: EpisodeLog, per_batch: list[list[float]], statuses: list[str],
                 metrics: dict[str, float], sources: dict[str, str]) -> Path:
    """Write ``out/bank`` (the tasks' curves) and ``out/episode.json``; returns ``out``."""
    out = Path(out)
    writer = BankWriter(out / "bank")
    commit = generator_commit()
    for spec in log.specs.values():
        declare_keeping_rules(writer, spec)
    for k, task in enumerate(log.episode.tasks):
        losses = np.asarray(per_batch[k], dtype=np.float32)
        if losses.size:
            record = CurveRecord(task.family, "test", k, task.seed, task.data_seed, task.batch_size, task.lr,
                                 log.episode.preset, sources.get(task.family, "live"), int(losses.size), commit)
            writer.add(record, losses)
    atomic_write_json(out / "episode.json", log.to_json(statuses, metrics))
    return out


def load_episode_log(out: str | Path) -> dict[str, Any]:
    """Read ``out/episode.json`` (``ValueError`` naming the file if it is missing or foreign)."""
    return read_versioned_json(Path(out) / "episode.json", FORMAT, VERSION, ValueError, "live episode log")


@dataclass(frozen=True)
class Replay:
    """The simulator's account of the logged decisions: per step successes/expiries, per task the outcome."""

    successes: list[int]
    expirations: list[int]
    outcomes: list[str]


def replay(out: str | Path) -> Replay:
    """Replay a live episode's decisions in the MARA-v0 simulator over the curves it recorded."""
    data = load_episode_log(out)
    episode = LiveEpisode.from_json(data["episode"])
    recorded = load_bank(Path(out) / "bank")
    per_batch = [recorded.per_batch.get(episode.curve_id(k), np.empty(0)) for k in range(len(episode))]
    width = int(data["history_width"])
    config = MARAConfig(**data["config"])
    log = EpisodeLog(config, episode, width, recorded.families, data["steps"])
    sim = Simulator(config, episode_bank(episode, per_batch, width, recorded.families, str(recorded.root)))
    sim.load(episode.episode(log.effective_budgets()))
    for k, task in enumerate(episode.tasks):  # ε of a user job may apply to another metric than L(s)
        if task.metric != "cumulative_mean":
            sim.loss_table[k, 1:] = tracked(sim.bank.per_batch[episode.curve_id(k)], task.metric, task.ema_decay)
            derive_loss_row(sim, k)
    successes, expirations = [], []
    for step in data["steps"]:
        outcome = sim.step(step["picks"])
        successes.append(outcome.successes)
        expirations.append(outcome.expirations)
    return Replay(successes, expirations, list(sim.task_outcomes()))


def replay_mismatches(out: str | Path) -> list[str]:
    """Every difference between the live run's successes/expiries and the replay's (empty: identical)."""
    data = load_episode_log(out)
    again = replay(out)
    problems = []
    for step, s, e in zip(data["steps"], again.successes, again.expirations):
        if (step["successes"], step["expirations"]) != (s, e):
            problems.append(f"step {step['t']}: live {step['successes']} successes / {step['expirations']} "
                            f"expiries, replay {s} / {e}")
    for k, (live, sim) in enumerate(zip(data["outcomes"], again.outcomes)):
        if live != sim:
            problems.append(f"task {k}: live {live}, replay {sim}")
    return problems
