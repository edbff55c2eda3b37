"""``LiveMARAEnv``: MARA-v0's contract over real training jobs run on Ray."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from curves.bank import DEFAULT_BANK, FamilySpec
from mara_env.config import MARAConfig
from mara_env.dynamics import SUCCEEDED
from mara_env.engine import action_picks, cached_bank, reset_info, resolve_conflicts
from mara_env.gym_env import observation_spaces
from mara_env.live.jobs import SOURCE, Job, check_jobs, job_episode, job_specs
from mara_env.live.record import EpisodeLog, save_episode
from mara_env.live.runner import BatchRunner, JobRunner, connect
from mara_env.live.simulator import LiveSimulator
from mara_env.live.step import abandoned_tasks, live_step, served_tasks
from mara_env.live.tasks import LiveEpisode, draw_live_episode


@dataclass(frozen=True)
class LiveSettings:
    """What the live backend adds to :class:`~mara_env.config.MARAConfig`."""

    families: tuple[str, ...] = ("cnn_fmnist",)
    """Families random episodes draw tasks from (uniformly); each must use the shared classifier trainer."""
    preset: str = "cpu"
    """Model sizes: ``cpu`` (the shipped bank's) or ``paper``."""
    device: str = "cpu"
    """Torch device of the workers; ``cuda`` makes each node one GPU (and one CPU)."""
    data_root: str | None = None
    """Folder with the paper's data (``curves`` data sources)."""
    reference_bank: str | None = None
    """Bank whose calibrated ε and B rules random episodes use and whose H_max is the history width;
    ``None`` is the shipped bank."""
    max_steps: int | None = None
    """Truncate the episode after this many steps (``None``: run until every task has left)."""
    node_cpus: float = 1.0
    """Logical CPUs each node's actor holds (below 1 packs several nodes onto one core, e.g. for tests)."""
    attempts: int = 3
    """Tries per batch before a task's recipe counts as failed (the task then expires)."""
    address: str | None = None
    """Ray cluster address; ``None`` starts a local Ray (with max(M, CPU count) logical CPUs) if none runs."""

    def __post_init__(self) -> None:
        if isinstance(self.families, str) or not self.families or not all(isinstance(f, str) for f in self.families):
            raise ValueError(f"families must be a non-empty sequence of family names, got {self.families!r}")
        object.__setattr__(self, "families", tuple(self.families))
        if self.max_steps is not None and (isinstance(self.max_steps, bool) or self.max_steps < 1):
            raise ValueError(f"max_steps must be a positive integer or None, got {self.max_steps!r}")
        if not self.node_cpus > 0:
            raise ValueError(f"node_cpus must be positive, got {self.node_cpus!r}")
        if self.attempts < 1:
            raise ValueError(f"attempts must be at least 1, got {self.attempts!r}")


class LiveMARAEnv(gym.Env[dict[str, np.ndarray], np.ndarray]):
    """MARA-v0 where every task is a real training run and every node a Ray resource unit.

    ## Description
    Same dynamics as ``MARA-v0`` (see :class:`mara_env.gym_env.MARAEnv`): tasks arrive, wait in the FIFO
    queue, occupy one of K slots, and succeed when their cumulative-average training loss reaches ε or expire
    at their deadline. Here a task is a training job of a ``curves`` family recipe (model, data, Adam, batch
    size, learning rate), and serving it runs one real optimisation batch on a Ray worker; the loss streams
    into the observation. Between batches the task's state lives in Ray's object store, so any node can run
    any task's next batch.

    ## Action Space, Observation Space, Rewards
    Identical to ``MARA-v0`` with ``observation="dict"``: ``MultiDiscrete([K + 1] * M)`` actions, the same
    Dict observation (history width = the reference bank's H_max), the same shaped or sparse reward. Every
    registered policy drives it unchanged. With ``abandon=True`` (``MultiDiscrete([2K + 1] * M)``), K + j
    abandons slot j − 1 as in ``MARA-v0``: the task runs no batch, leaves as ``abandoned``, and its state is
    dropped from the object store; the step's log entry lists it under ``abandoned``.

    ## Episode End
    Terminates as ``MARA-v0`` does; with ``max_steps`` also truncates after that many steps (tasks still in
    the system are reported as ``running`` / ``queued``). ``info["failed"]`` lists tasks whose recipe failed
    for good in the step. The step's timings (dispatch wall time, slowest and summed batch compute, time in
    the workers) and retries are in ``env.log.steps[-1]``, not in ``info``, which stays deterministic.

    ## Faults
    A batch whose worker raised or died is rerun from the task's last state, up to ``attempts`` times; a
    task whose batches keep failing expires at the end of that step (its node idles) and is listed in
    ``failed_tasks``.

    ## Recording
    After an episode, :meth:`save` writes the tasks' per-batch losses as a curve bank and the episode log;
    :func:`mara_env.live.replay` replays the decisions in the simulator to the same successes and expiries.

    ## Arguments
    ``LiveMARAEnv(config=MARAConfig(num_nodes=..., max_active=..., arrival_prob=..., arrival_window=...),
    settings=LiveSettings(families=..., ...))``; ``reset(options={"episode": LiveEpisode(...)})`` plays given
    tasks instead of drawing them. ``batch_function`` replaces the worker's batch function (fault tests).
    ``jobs`` (a sequence of :class:`~mara_env.live.jobs.Job`) plays the user's own jobs instead of family
    recipes: every episode is those jobs at their arrivals, ``settings.families`` is ignored, each step runs
    as a Ray task with the job's resources, and the history width grows to the largest budget if that
    exceeds the reference bank's H_max.
    """

    metadata = {"render_modes": []}

    def __init__(self, config: MARAConfig | None = None, settings: LiveSettings | None = None,
                 batch_function: Callable[..., Any] | None = None, jobs: Sequence[Job] | None = None):
        self.config = config or MARAConfig()
        self.settings = settings or LiveSettings()
        if self.config.observation != "dict":
            raise ValueError(f"the live env offers observation='dict' only, got {self.config.observation!r}")
        if self.config.actions != "picks":
            raise ValueError(f"the live env takes one pick per node (actions='picks'), got {self.config.actions!r}")
        if self.config.node_options:
            raise ValueError(f"node_speeds={self.config.node_speeds!r} and switch_cost={self.config.switch_cost!r} are "
                             "simulator options; the live env runs one real batch per served node and step, so "
                             "leave them at their defaults")
        m, k = self.config.num_nodes, self.config.max_active
        self.jobs = check_jobs(jobs) if jobs is not None else None
        reference = cached_bank(str(self.settings.reference_bank or DEFAULT_BANK))
        cpus = max([job.cpus for job in self.jobs]) if self.jobs else self.settings.node_cpus
        local_cpus = max(int(np.ceil(m * cpus)), os.cpu_count() or 1)
        connect(self.settings.address, None if self.settings.address else local_cpus)
        width = reference.max_length
        if self.jobs is not None:
            self.runner: BatchRunner = JobRunner(self.jobs, self.settings.attempts)
            self.facts: dict[str, dict[str, Any]] = {}
            self.specs: dict[str, FamilySpec] = job_specs(self.jobs)
            width = max(width, *(job.budget for job in self.jobs))
        else:
            self.runner = BatchRunner(m, self.settings.families, self.settings.device, self.settings.preset,
                                      self.settings.data_root, self.settings.attempts, batch_function,
                                      self.settings.node_cpus)
            self.facts = self.runner.facts
            not_live = sorted(name for name, fact in self.facts.items() if not fact["live"])
            if not_live:
                self.runner.close()
                raise ValueError(f"families {not_live} have their own training loop and cannot run live")
            self.specs = {name: reference.families.get(name, facts["spec"]) for name, facts in self.facts.items()}
        self.sim = LiveSimulator(self.config, width)
        choices = 2 * k + 1 if self.config.abandon else k + 1
        self.action_space = spaces.MultiDiscrete([choices] * m)
        self.observation_space = spaces.Dict({"action_mask": spaces.Box(0, 1, (m, choices), np.int8),
                                              **observation_spaces(k, self.sim.history_width)})
        self.log: EpisodeLog | None = None
        self.ended = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Start an episode: ``options["episode"]`` (a :class:`LiveEpisode`) or one drawn with ``seed``."""
        super().reset(seed=seed)
        episode = (options or {}).get("episode")
        if episode is None and self.jobs is not None:
            episode = job_episode(self.jobs)
        elif episode is None:
            cfg = self.config
            sizes = {name: fact["batch_sizes"] for name, fact in self.facts.items()}
            episode = draw_live_episode(self.settings.families, self.specs, sizes, self.np_random, cfg.arrival_prob,
                                        cfg.arrival_window, self.settings.preset)
        unknown = sorted({task.family for task in episode.tasks} - set(self.specs))
        if unknown:
            raise ValueError(f"episode uses families {unknown} outside settings.families {self.settings.families}")
        self.runner.states.clear()
        self.sim.load_live(episode, self.specs)
        self.log = EpisodeLog(self.config, episode, self.sim.history_width, self.specs)
        self.ended = False
        return self.sim.observation(), reset_info(self.config, 0)

    def step(self, action: Any):
        """Run one batch for every task a node serves (on Ray), then take the live step with their losses
        (:func:`~mara_env.live.step.live_step`): the engine's reward, info and episode end, plus truncation
        and ``info["failed"]``."""
        if self.log is None or self.ended:
            raise RuntimeError("call reset() before step()" if self.log is None else
                               "the episode has ended; call reset() before step() again")
        sim, cfg = self.sim, self.config
        occupied = sim.occupied
        picks, repaired = resolve_conflicts(cfg, action_picks(cfg, action, occupied), occupied)
        served = served_tasks(sim, picks)
        batches = self.runner.run([(node, task, sim.live_episode.tasks[task]) for node, task in served.items()])
        t, status = sim.t, sim.status.copy()
        step = live_step(sim, picks.tolist(), batches.losses, batches.failed,
                         None if repaired is None else int(repaired))
        for task in np.flatnonzero((sim.status != status) & (sim.status >= SUCCEEDED)).tolist():
            self.runner.forget(task)
        self.log.failed.update(batches.failed)
        timing = {"dispatch_s": batches.wall_s, "compute_max_s": batches.compute_max_s,
                  "compute_sum_s": batches.compute_sum_s, "worker_sum_s": batches.worker_sum_s,
                  "retries": batches.retries}
        info = step.info
        dropped = {"abandoned": abandoned_tasks(sim, status)} if cfg.abandon else {}
        self.log.steps.append({"t": t, "picks": step.picks, "served": sorted(batches.losses),
                               "losses": {str(k): v for k, v in sorted(batches.losses.items())},
                               "failed": sorted(batches.failed), "successes": info["successes"],
                               "expirations": info["expirations"], "conflicts": info["conflicts"], **dropped,
                               **timing})
        info["failed"] = sorted(batches.failed)
        limit = self.settings.max_steps
        truncated = not step.terminated and limit is not None and len(self.log.steps) >= limit
        self.ended = step.terminated or truncated
        if truncated:
            info["episode_metrics"] = sim.metrics()
            info["task_outcomes"] = sim.task_outcomes()
        return sim.observation(), step.reward, step.terminated, truncated, info

    @property
    def failed_tasks(self) -> dict[int, str]:
        """Tasks of this episode whose recipe failed every attempt, with the last error."""
        return dict(self.log.failed) if self.log else {}

    def task_outcomes(self) -> tuple[str, ...]:
        """Per task, in the episode's order: ``succeeded``, ``expired``, ``running``, ``queued`` or ``not arrived``."""
        return self.sim.task_outcomes()

    def metrics(self) -> dict[str, float]:
        """The episode metrics so far (those of ``info["episode_metrics"]`` at the episode's end)."""
        return self.sim.metrics()

    @property
    def t(self) -> int:
        """The current step of the episode."""
        return self.sim.t

    @property
    def live_episode(self) -> LiveEpisode:
        """The tasks of the episode being played."""
        if self.log is None:
            raise RuntimeError("call reset() before reading the episode")
        return self.sim.live_episode

    @property
    def losses(self) -> list[list[float]]:
        """Per task, the losses of the batches it has run so far (a copy)."""
        return [list(losses) for losses in self.sim.per_batch]

    def finished_at(self) -> list[int | None]:
        """Per task, the step at which it succeeded or expired (``None`` while it has not)."""
        return [step if step >= 0 else None for step in self.sim.left_at.tolist()]

    def save(self, folder: str | Path, **extra: Any) -> Path:
        """Write this episode's curve bank and log into ``folder`` (``extra`` goes into the log as is)."""
        if self.log is None:
            raise RuntimeError("call reset() and play an episode before save()")
        self.log.extra.update(extra)
        sources = {name: fact["source"] for name, fact in self.facts.items()} or dict.fromkeys(self.specs, SOURCE)
        return save_episode(folder, self.log, self.sim.per_batch, list(self.task_outcomes()), self.sim.metrics(),
                            sources)

    def close(self) -> None:
        """Release the node actors (a local Ray this env started keeps running until ``ray.shutdown()``)."""
        self.runner.close()
