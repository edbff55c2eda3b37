"""A twin of your cluster: your recorded jobs replayed in the simulator under many arrival sequences.

Every live run records its jobs' losses (``OUT/bank``) and settings (``OUT/episode.json``).  The twin takes
one or more such folders, draws ``sequences`` arrival sequences of those jobs per load (each step a job
arrives with probability ``load``, in a random order), and plays every sequence under every allocator on
the :class:`~mara_env.live.simulator.LiveSimulator` — the ``MARA-v0`` simulator whose losses are revealed as
the jobs run — through the live step that a live run and its replay take
(:func:`mara_env.live.step.live_step`).  Each served job reveals its next recorded loss; nothing runs.

A job's steps depend on its code and seed alone, not on when it runs, so its record holds the losses of any
schedule up to the record's length.  A record that stops before the job met its target and before its
budget (a job a live run left unfinished) is continued with its last loss, unless the job file is given
(:func:`complete`: such jobs then run here, alone, to their budget); the table counts the job-steps that
used a continued loss, and a twin where that count is 0 is exact.  Folders that recorded the same
job (the same name) add up to its longest record, once their common steps agree.

Each allocator's success count per sequence is compared, paired by sequence, with EDF's and FIFO's: the mean
difference and its t interval at level 0.95.  An abandoning allocator (``slack-fm+abandon``, ...) plays with the
abandon action, as a live run of it does, and the table shows how many jobs it abandoned.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from curves.bank import FamilySpec, load_bank
from mara_agents.evaluation.stats import half_width
from mara_agents.live.jobs.schedule import abandons, named_policy
from mara_agents.play.policy import Policy
from mara_env.config import MARAConfig
from mara_env.engine import action_picks, resolve_conflicts
from mara_env.live.record import load_episode_log
from mara_env.live.jobs import Job, run_offline
from mara_env.live.simulator import LiveSimulator
from mara_env.live.step import live_step, served_tasks
from mara_env.live.tasks import LiveEpisode, LiveTask, tracked

TWIN_POLICIES = ("fifo", "edf", "edf+abandon", "lara", "lara+abandon", "lara-fm", "lara-fm+abandon", "slack-fm",
                 "slack-fm+abandon")
ANCHORS = ("edf", "fifo")
# how closely a job run here must repeat its record: a worker with another thread count rounds a torch job's
# sums differently, so its losses agree to float32 rounding, not bit for bit
AGREE_RTOL = 1e-4


@dataclass(frozen=True)
class RecordedJob:
    """One job as the twin plays it: its task (its arrival is redrawn per sequence), its recorded losses, its
    bank family, and whether the record covers every step a schedule could give it."""

    task: LiveTask
    losses: np.ndarray
    spec: FamilySpec

    @property
    def exact(self) -> bool:
        """Whether the record reaches the job's crossing or its budget: then no schedule runs past it."""
        series = tracked(self.losses, self.task.metric, self.task.ema_decay)
        return self.losses.size >= self.task.budget or bool(np.any(series <= self.task.eps))


@dataclass(frozen=True)
class Recorded:
    """The jobs of one or more recorded folders, and the simulator's history width their runs used;
    ``unrecorded`` holds the jobs that never ran a step (no loss to replay; :func:`complete` can run them)."""

    jobs: tuple[RecordedJob, ...]
    history_width: int
    unrecorded: tuple[RecordedJob, ...] = ()


def load_recorded(folders: Sequence[str | Path]) -> Recorded:
    """The jobs recorded in ``folders`` (each a run's ``--out``: ``episode.json`` and ``bank/``); ``ValueError``
    naming the folder for one that is not a recorded run, or for a job whose records disagree."""
    if not folders:
        raise ValueError("give at least one recorded run's folder (the --out of a jobs run)")
    jobs: dict[str, RecordedJob] = {}
    width = 0
    for folder in map(Path, folders):
        if not (folder / "bank").is_dir():
            raise ValueError(f"{folder}: not a recorded run (no bank/ beside episode.json; give a jobs run's --out)")
        log = load_episode_log(folder)
        episode, bank = LiveEpisode.from_json(log["episode"]), load_bank(folder / "bank")
        width = max(width, int(log["history_width"]))
        for k, task in enumerate(episode.tasks):
            losses = bank.per_batch.get(episode.curve_id(k), np.zeros(0, dtype=np.float32))
            job = RecordedJob(task, np.asarray(losses, dtype=np.float32), bank.families[task.family])
            jobs[task.family] = _longer(jobs.get(task.family), job, folder)
    ran = tuple(job for job in jobs.values() if job.losses.size)
    if not ran:
        raise ValueError(f"{', '.join(map(str, folders))}: no job ran a step, so there is nothing to replay")
    return Recorded(ran, width, tuple(job for job in jobs.values() if not job.losses.size))


def _longer(known: RecordedJob | None, job: RecordedJob, folder: Path) -> RecordedJob:
    """The longer of two records of one job, once they agree on their common steps and on the job's task."""
    if known is None:
        return job
    common = min(known.losses.size, job.losses.size)
    same_task = dataclasses.replace(known.task, arrival=0) == dataclasses.replace(job.task, arrival=0)
    if not same_task or not np.array_equal(known.losses[:common], job.losses[:common]):
        raise ValueError(f"{folder}: job {job.task.family!r} differs from its record in an earlier folder (its "
                         f"target, budget, recipe or losses); give the runs of one job file")
    return job if job.losses.size > known.losses.size else known


def complete(recorded: Recorded, jobs: Sequence[Job]) -> Recorded:
    """``recorded`` with each short record (:attr:`RecordedJob.exact` false) continued, and each job that never ran
    recorded, by the job of that name in ``jobs`` run here, alone, to its budget
    (:func:`~mara_env.live.jobs.run_offline`); ``ValueError`` where the run does not begin with the recorded
    losses, to :data:`AGREE_RTOL` (the job file is not the one that was run)."""
    by_name = {job.name: job for job in jobs}
    done = [job if job.exact or job.task.family not in by_name else _run_here(job, by_name[job.task.family])
            for job in recorded.jobs]
    unrun = [job for job in recorded.unrecorded if job.task.family in by_name]
    left = tuple(job for job in recorded.unrecorded if job.task.family not in by_name)
    return dataclasses.replace(recorded, jobs=tuple(done) + tuple(_run_here(job, by_name[job.task.family])
                                                                  for job in unrun), unrecorded=left)


def _run_here(job: RecordedJob, code: Job) -> RecordedJob:
    """``job``'s record continued by ``code`` run here, alone, to the job's budget, once the run repeats it."""
    losses = run_offline(code, job.task.budget)
    if losses.size < job.losses.size or not np.allclose(losses[:job.losses.size], job.losses, rtol=AGREE_RTOL,
                                                        atol=0.0):
        raise ValueError(f"job {job.task.family!r}: run here, its losses differ from its record; complete it "
                         f"with the job file that was run")
    return dataclasses.replace(job, losses=np.concatenate([job.losses, losses[job.losses.size:]]))


def arrival_sequence(jobs: Sequence[RecordedJob], load: float, rng: np.random.Generator) -> list[RecordedJob]:
    """The jobs in a random order, each arriving a geometric(``load``) number of steps after the one before
    (the first at step 0): a job arrives with probability ``load`` at each step."""
    order = rng.permutation(len(jobs))
    gaps = rng.geometric(load, len(jobs)) - 1
    gaps[0] = 0
    return [dataclasses.replace(jobs[k], task=dataclasses.replace(jobs[k].task, arrival=int(arrival)))
            for k, arrival in zip(order.tolist(), np.cumsum(gaps).tolist())]


class Played(NamedTuple):
    """One arrival sequence under one policy: jobs that succeeded, jobs it abandoned, job-steps past a record."""

    succeeded: int
    abandoned: int
    past: int


def play(jobs: Sequence[RecordedJob], policy: Policy, config: MARAConfig, history_width: int) -> Played:
    """Play one arrival sequence under ``policy`` (``config.abandon`` set for an abandoning one)."""
    episode = LiveEpisode(tuple(job.task for job in jobs), preset="user")
    sim = LiveSimulator(config, history_width)
    sim.load_live(episode, {job.task.family: job.spec for job in jobs})
    policy.reset()
    past, terminated = 0, False
    while not terminated:
        occupied = sim.occupied
        picks, repaired = resolve_conflicts(config, action_picks(config, policy.act(sim.observation()), occupied),
                                            occupied)
        losses = {}
        for task in served_tasks(sim, picks).values():
            record, s = jobs[task].losses, len(sim.per_batch[task])
            past += s >= record.size
            losses[task] = float(record[min(s, record.size - 1)]) if record.size else math.inf
        terminated = live_step(sim, picks.tolist(), losses, (), repaired).terminated
    outcomes = sim.task_outcomes()
    return Played(outcomes.count("succeeded"), outcomes.count("abandoned"), past)


@dataclass(frozen=True)
class TwinCell:
    """Per policy, the jobs that succeeded and those it abandoned in each arrival sequence of one (nodes, load)
    cell, and the job-steps that used a continued loss."""

    nodes: int
    load: float
    successes: dict[str, np.ndarray]
    past: dict[str, int]
    abandoned: dict[str, np.ndarray]


def run_twin(recorded: Recorded, nodes: Sequence[int], loads: Sequence[float], sequences: int = 50,
             policies: Sequence[str] = TWIN_POLICIES, seed: int = 0, max_active: int = 10,
             fm_checkpoint: str = "") -> list[TwinCell]:
    """Every policy on the same ``sequences`` arrival sequences per load (drawn from ``seed``), at each node count;
    the policies that read FM read ``fm_checkpoint`` (``""``: the shipped FM).  An abandoning policy plays with
    the abandon action, the others without it: on the same sequences, the outcomes compare as they are."""
    for load in loads:
        if not 0 < load <= 1:
            raise ValueError(f"a load is the arrival probability per step, in (0, 1], got {load!r}")
    if sequences < 2:
        raise ValueError(f"sequences must be at least 2 (the intervals need two), got {sequences!r}")
    built = {name: named_policy(name, fm_checkpoint) for name in policies}
    cells = []
    for load_index, load in enumerate(loads):
        rng = np.random.default_rng([seed, load_index])
        drawn = [arrival_sequence(recorded.jobs, load, rng) for _ in range(sequences)]
        for m in nodes:
            configs = [MARAConfig(num_nodes=m, max_active=max_active, max_nodes=max(16, m),
                                  arrival_window=max(job.task.arrival for job in jobs) + 1) for jobs in drawn]
            played = {name: [play(jobs, policy, dataclasses.replace(config, abandon=abandons(policy)),
                                  recorded.history_width) for jobs, config in zip(drawn, configs)]
                      for name, policy in built.items()}
            cells.append(TwinCell(m, load, {name: np.array([row.succeeded for row in rows])
                                            for name, rows in played.items()},
                                  {name: sum(row.past for row in rows) for name, rows in played.items()},
                                  {name: np.array([row.abandoned for row in rows]) for name, rows in played.items()}))
    return cells


def twin_table(cells: Sequence[TwinCell], jobs: int) -> str:
    """Per cell, each policy's mean successes, its paired difference with EDF and with FIFO (t intervals at level
    0.95), and the mean number of jobs it abandoned."""
    lines = []
    width = max(10, *(len(name) + 2 for cell in cells for name in cell.successes))
    for cell in cells:
        count = len(next(iter(cell.successes.values())))
        lines.append(f"\n{cell.nodes} nodes, load {cell.load:g} ({count} arrival sequences of {jobs} jobs)")
        anchors = [anchor for anchor in ANCHORS if anchor in cell.successes]
        lines.append(f"{'policy':<{width}}{'succeeded':>12}" + "".join(f"{'vs ' + anchor:>18}" for anchor in anchors)
                     + f"{'abandoned':>11}{'steps past a record':>21}")
        for name, won in cell.successes.items():
            versus = "".join(f"{_difference(won - cell.successes[anchor]):>18}" for anchor in anchors)
            lines.append(f"{name:<{width}}{won.mean():>7.2f}/{jobs:<4}{versus}{cell.abandoned[name].mean():>11.2f}"
                         f"{cell.past[name]:>21}")
    return "\n".join(lines).lstrip("\n")


def _difference(values: np.ndarray) -> str:
    """A paired difference as ``mean ± half-width`` (the t interval at level 0.95), ``0`` where every pair is equal."""
    if not values.any():
        return "0"
    return f"{values.mean():+.2f} ± {half_width(values.astype(float)):.2f}"
