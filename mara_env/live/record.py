"""What a live episode leaves behind, and its replay in the simulator.

A live episode writes two things into its output folder:

* ``bank/`` — a curve bank (the ``curves`` format) with one curve per task that ran at least one batch:
  its per-batch losses, recorded under ``family/test/<task index>`` with the task's recipe;
* ``episode.json`` — the episode log: the settings, the tasks, and per step the applied joint action, the
  tasks served, their losses, the failures and the timings; at the end each task's outcome.

:func:`replay` takes the log's decisions through the live step again (:func:`mara_env.live.step.live_step`),
revealing the losses from the recorded curves, and :func:`replay_mismatches` lists every step or task where
the replay's successes and expiries differ from the live run's (none when the log and the bank record the
run faithfully).  With ``abandon=True`` the log lists each step's abandoned tasks, and the replay must abandon
as many in that step.
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
from mara_env.live.simulator import LiveSimulator
from mara_env.live.step import live_step
from mara_env.live.tasks import LiveEpisode

FORMAT = "mara-live-episode"
VERSION = 1
CONFIG_FIELDS = ("num_nodes", "max_active", "arrival_prob", "arrival_window", "reward", "shaping_beta",
                 "warmup_observations", "max_nodes", "conflicts", "abandon")


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
    """The live step's account of the logged decisions: per step the reward and the engine's info, per task the
    outcome.  The info has no ``repaired`` count: the log holds the picks as applied, after any repair."""

    rewards: list[float]
    infos: list[dict[str, Any]]
    outcomes: list[str]

    @property
    def successes(self) -> list[int]:
        """Per step, how many tasks succeeded in it."""
        return [info["successes"] for info in self.infos]

    @property
    def expirations(self) -> list[int]:
        """Per step, how many tasks expired in it."""
        return [info["expirations"] for info in self.infos]


def replay(out: str | Path) -> Replay:
    """Take a live episode's logged decisions through the live step again, each served task revealing its next
    loss from the curves the episode recorded and each failed task failing where the log says."""
    data = load_episode_log(out)
    episode = LiveEpisode.from_json(data["episode"])
    recorded = load_bank(Path(out) / "bank")
    sim = LiveSimulator(MARAConfig(**data["config"]), int(data["history_width"]))
    sim.load_live(episode, recorded.families)
    rewards, infos = [], []
    for step in data["steps"]:
        losses = {task: recorded.per_batch[episode.curve_id(task)][len(sim.per_batch[task])]
                  for task in step["served"]}
        taken = live_step(sim, step["picks"], losses, step["failed"])
        rewards.append(taken.reward)
        infos.append(taken.info)
    return Replay(rewards, infos, list(sim.task_outcomes()))


def replay_mismatches(out: str | Path) -> list[str]:
    """Every difference between the live run's successes/expiries and the replay's (empty: identical)."""
    data = load_episode_log(out)
    again = replay(out)
    problems = []
    for step, s, e, info in zip(data["steps"], again.successes, again.expirations, again.infos):
        if (step["successes"], step["expirations"]) != (s, e):
            problems.append(f"step {step['t']}: live {step['successes']} successes / {step['expirations']} "
                            f"expiries, replay {s} / {e}")
        if len(step.get("abandoned", ())) != info.get("abandoned", 0):
            problems.append(f"step {step['t']}: live {len(step['abandoned'])} abandoned, replay "
                            f"{info.get('abandoned', 0)}")
    for k, (live, sim) in enumerate(zip(data["outcomes"], again.outcomes)):
        if live != sim:
            problems.append(f"task {k}: live {live}, replay {sim}")
    return problems
