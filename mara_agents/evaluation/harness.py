"""Run methods (and the bounds) on the fixed workloads: plan the work, reuse the cache, fan out to processes.

The unit of work is one method run (method, training seed) on a list of episodes, played side by side on the
native vector env by the one play loop (:func:`~mara_agents.play.lockstep.play_episodes`); the unit of caching is one
episode.  Every episode is played with a fresh copy of the policy (see :mod:`~mara_agents.evaluation.methods`),
so its result does not depend on which process played it, beside which episodes or in which order — a
parallel run, a serial run and a resumed run give the same numbers bit for bit.  A policy that offers
``act_batch`` (see :func:`~mara_agents.play.policy.is_batched`) instead decides for all of a unit's episodes —
up to :data:`LOCKSTEP_BATCH`, across roots, loads and task sets — in one call per step, which amortises a
neural policy's per-call overhead (its results equal the episode-by-episode ones up to floating-point effects
of batching, so its units are always cut the same way).

With several jobs the units run in worker processes (:mod:`~mara_agents.evaluation.workers`); the probes
(:func:`_available`) and Table 1 run in processes of their own, so the main process builds no policy.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from tqdm import tqdm

from mara_common import checks
from mara_agents.evaluation.cache import ResultCache
from mara_agents.evaluation.clairvoyant import clairvoyant_successes
from mara_agents.evaluation.dispatch import play_units
from mara_agents.evaluation.families import family_counts, vector_played_families
from mara_agents.evaluation.fingerprint import bank_fingerprint, digest, simulator_fingerprint, source_fingerprint
from mara_agents.evaluation.methods import (CLAIRVOYANT, ORACLE, Availability, MethodError, checked, fresh_policy,
                                           is_batched, is_import_path, probe, spec_for)
from mara_agents.evaluation.workers import one_thread, worker_pool
from mara_agents.predictors.shared import SHARED
from mara_agents.play.lockstep import play_episodes
from mara_env.config import MARAConfig
from mara_env.engine import cached_bank, cached_workload
from mara_env.fixed_workloads import workload_path
from mara_env.simulator import oracle_successes
from mara_env.workload import WorkloadError, file_checksum

CACHE_VERSION = 2  # 2: rows carry per-family outcomes
BOUNDS = "bounds"
MAX_JOBS = 4 * (os.cpu_count() or 1)  # each worker holds its own policies and env: more would only exhaust memory
LOCKSTEP_BATCH = 128  # episodes a batched policy plays side by side in one unit of work
METRICS = ("tasks", "successes", "success_rate", "utilisation", "queue_full", "waiting", "ready", "conflicts",
           "steps", "return")


@dataclass(frozen=True)
class Settings:
    """What to evaluate on: the bank, the workload directory, how much of each file, and how to run."""

    bank: Path
    workloads: Path
    roots: int
    episodes: int
    max_seeds: int | None = None
    jobs: int = 1
    cache: Path | None = None
    progress: bool = True
    # a method that cannot be built stops the run (MethodError) instead of being skipped — except a registered
    # method whose optional extra is missing, which is skipped and listed with the reason either way
    strict: bool = False
    ray: str | None = None  # run the units as Ray tasks: "local" (a local Ray of `jobs` CPUs) or a cluster address
    # env options every episode is played with, as (field, value) pairs of MARAConfig (``num_nodes``,
    # ``node_speeds``, ``switch_cost``, ``fairness_metrics``); empty: MARA-v0's defaults, the paper's setting
    env: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        checks.existing_dir("bank", self.bank)
        checks.existing_dir("workloads", self.workloads)
        checks.integer("roots", self.roots, 1)
        checks.integer("episodes", self.episodes, 1)
        if self.max_seeds is not None:
            checks.integer("max_seeds", self.max_seeds, 1)
        checks.integer("jobs", self.jobs, 1, MAX_JOBS)
        if self.cache is not None:
            checks.writable_file("cache", self.cache)
        if self.ray is not None and not isinstance(self.ray, str):
            raise TypeError(f"ray must be an address string or None, got {self.ray!r}")
        MARAConfig(**dict(self.env))  # a bad option raises here, naming it

    @property
    def num_nodes(self) -> int:
        """M of the episodes played (the env options' ``num_nodes``, else the default)."""
        return MARAConfig(**dict(self.env)).num_nodes


@dataclass(frozen=True)
class Target:
    """One selected episode of a workload file, with where it belongs in the tables."""

    task_set: str
    load: float | None
    path: str
    checksum: str
    index: int  # position in the workload file
    root: int
    episode: int  # index within its root


@dataclass(frozen=True)
class Unit:
    """One job: a method run (method, training seed) — or the bounds — on a list of episodes."""

    method: str
    seed: int | None
    targets: tuple[Target, ...]
    keys: tuple[str, ...]
    env: tuple[tuple[str, Any], ...] = ()  # the env options it is played with (Settings.env)


@dataclass
class Results:
    """Every per-episode row, what was skipped and why, and how much was computed versus reused."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[Availability] = field(default_factory=list)
    computed: int = 0
    reused: int = 0


def load_slice(settings: Settings, task_set: str, load: float | None) -> list[Target]:
    """The first ``roots`` roots × first ``episodes`` episodes of a workload file (validated against the bank)."""
    path = workload_path(task_set, load, settings.workloads)
    if not path.is_file():
        raise WorkloadError(f"{path}: workload file not found; generate the fixed workloads with "
                            f"`python -m mara_env.fixed_workloads --bank {settings.bank} --out {settings.workloads}`")
    workload, checksum = cached_workload(str(path), str(settings.bank)), file_checksum(path)
    return [Target(task_set, load, str(path), checksum, i, ep.root, ep.index) for i, ep in enumerate(workload.episodes)
            if ep.root < settings.roots and ep.index < settings.episodes]


def _options(env: tuple[tuple[str, Any], ...]) -> list[dict[str, Any]]:
    """The env options as a key part: none at all with the defaults, so those keys are what they always were."""
    return [dict(sorted(env))] if env else []


def episode_key(run: Availability, target: Target, bank: Path, env: tuple[tuple[str, Any], ...] = ()) -> str:
    """Cache key of one played episode: method, seed, checkpoint hash, workload, bank, simulator code, env
    options."""
    return digest("episode", CACHE_VERSION, run.method, run.seed, run.fingerprint, target.checksum,
                  bank_fingerprint(str(bank)), simulator_fingerprint(), target.index, *_options(env))


def bounds_key(target: Target, bank: Path, num_nodes: int, env: tuple[tuple[str, Any], ...] = ()) -> str:
    """Cache key of one episode's Oracle and Clairvoyant bounds."""
    return digest("bounds", CACHE_VERSION, target.checksum, bank_fingerprint(str(bank)), simulator_fingerprint(),
                  source_fingerprint(clairvoyant_successes), num_nodes, target.index, *_options(env))


# ---------------------------------------------------------------------------------------------- workers
def play_unit(method: str, seed: int | None, targets: Sequence[Target], bank: str,
              env: tuple[tuple[str, Any], ...] = ()) -> list[dict[str, Any]]:
    """Play the episodes side by side on the native vector env (:func:`~mara_agents.play.lockstep.play_episodes`): a
    batched policy decides for all of them in one call per step, any other policy plays each episode as a
    fresh copy of its own.  Each row holds the episode metrics and the per-family outcomes (``families``).  A
    user's policy has its actions checked (:func:`~mara_agents.evaluation.methods.checked`).  ``env`` holds the
    env options (:attr:`Settings.env`)."""
    episodes = [cached_workload(target.path, bank).episodes[target.index] for target in targets]
    config = MARAConfig(**dict(env))
    policy = _player(method, seed, config)
    batched = is_batched(policy)
    players = policy if batched else [policy, *(_player(method, seed, config) for _ in targets[1:])]
    return play_episodes(players, episodes, bank=bank, copy=not batched,  # a policy of one's own may keep it
                         on_end=lambda vec, i: {"families": vector_played_families(vec, i, episodes[i])}, **dict(env))


def _player(method: str, seed: int | None, config: MARAConfig) -> Any:
    policy = fresh_policy(method, seed)
    if not is_import_path(method):
        return policy
    return checked(policy, spec_for(method).label, config.num_nodes, config.max_active)


def bound_unit(targets: Sequence[Target], bank: str, num_nodes: int,
               env: tuple[tuple[str, Any], ...] = ()) -> list[dict[str, Any]]:
    """Oracle and Clairvoyant success counts of the episodes, in all and per family (``families_<bound>``),
    with the env options' node speeds and switching cost."""
    curves, rows = cached_bank(bank), []
    speeds, cost = dict(env).get("node_speeds"), dict(env).get("switch_cost", 0)
    for target in targets:
        episode = cached_workload(target.path, bank).episodes[target.index]
        row: dict[str, Any] = {"tasks": float(len(episode))}
        for bound, won in ((ORACLE, oracle_successes(episode, curves, speeds, cost)),
                           (CLAIRVOYANT, clairvoyant_successes(episode, curves, num_nodes, speeds, cost))):
            row[bound] = float(won.sum())
            row[f"families_{bound}"] = family_counts(episode.curve, won.tolist())
        rows.append(row)
    return rows


def run_unit(unit: Unit, bank: str, num_nodes: int) -> list[dict[str, Any]]:
    """One unit of work's rows: the bounds, or the method's episodes (what a worker process or Ray task runs);
    ``num_nodes`` is M unless the unit's env options set it."""
    try:
        if unit.method == BOUNDS:
            return bound_unit(unit.targets, bank, dict(unit.env).get("num_nodes", num_nodes), unit.env)
        return play_unit(unit.method, unit.seed, unit.targets, bank, unit.env)
    finally:
        release_free_heap()


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    library = ctypes.util.find_library("c")
    return getattr(ctypes.CDLL(library), "malloc_trim", None) if library else None


def release_free_heap() -> None:
    """Give the C heap's free pages back to the operating system (glibc's ``malloc_trim``; elsewhere nothing).

    A unit's short-lived arrays and tensors leave freed heap that glibc keeps for reuse; a
    worker that plays many units would carry it from one to the next on top of its live memory.
    """
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


# ---------------------------------------------------------------------------------------------- driver
def evaluate(requests: Iterable[tuple[str | None, str, float | None]], settings: Settings) -> Results:
    """Evaluate every requested (method, task set, load) plus the bounds of each task set and load.

    A request with method None asks for the bounds only.  Methods that cannot be built are listed in
    ``Results.skipped`` with the reason.  Finished episodes are read from the cache; the others run in
    ``settings.jobs`` processes and are cached as each unit finishes, so an interrupted evaluation resumes
    where it stopped.
    """
    requests = list(dict.fromkeys(requests))
    slices = {(ts, load): load_slice(settings, ts, load) for _, ts, load in requests}
    num_nodes, env = settings.num_nodes, settings.env
    wanted = []
    for method in dict.fromkeys(m for m, _, _ in requests if m is not None):
        seeds = spec_for(method).seeds
        wanted += [(method, seed) for seed in (seeds[: settings.max_seeds] if seeds else (None,))]
    results = Results()
    runs, results.skipped = _available(wanted, settings)

    units: list[Unit] = []
    for targets in slices.values():
        units += _chunks(BOUNDS, None, targets, [bounds_key(t, settings.bank, num_nodes, env) for t in targets],
                         _by_root, env)
    for run in runs:
        targets = [t for m, ts, load in requests if m == run.method for t in slices[ts, load]]
        units += _chunks(run.method, run.seed, targets, [episode_key(run, t, settings.bank, env) for t in targets],
                         _in_batches if run.batched else _by_root, env)

    cache = ResultCache(settings.cache)
    try:
        done = cache.get_many(k for unit in units for k in unit.keys)
        pending = []
        for unit in units:
            missing = [(t, k) for t, k in zip(unit.targets, unit.keys) if k not in done]
            if missing:
                targets, keys = zip(*missing)
                pending.append(Unit(unit.method, unit.seed, targets, keys, unit.env))
        # Big lock-step units first (a short tail at the end), units on the same episodes next to each other: one
        # process plays them in a row, several take them in bundles (dispatch.py), and reuse the predictor answers.
        pending.sort(key=lambda unit: (-len(unit.keys), unit.targets[0].path, unit.targets[0].index))
        results.computed = sum(len(u.keys) for u in pending)
        results.reused = sum(len(u.keys) for u in units) - results.computed
        _execute(pending, settings, num_nodes, cache, done)
    finally:
        cache.close()
    results.rows = _rows(units, done)
    return results


def _available(wanted: list[tuple[str, int | None]],
               settings: Settings) -> tuple[list[Availability], list[Availability]]:
    """Probe every (method, seed): (those that run, those skipped).  With ``settings.strict``, a method that
    cannot be built raises :class:`MethodError` (a registered one whose optional extra is missing is skipped
    anyway).

    Where this process plays the units (one job, no Ray) it probes too, and keeps what it built for them.
    Otherwise a process of its own probes: neither this process nor the workers then keep the policies built
    and the modules imported only to probe, and this process stays small.
    """
    methods, seeds = [m for m, _ in wanted], [s for _, s in wanted]
    if not wanted or (settings.jobs <= 1 and settings.ray is None):
        probed = list(map(probe, methods, seeds))
    else:
        try:
            with worker_pool(1) as prober:
                probed = list(prober.map(probe, methods, seeds))
        except BrokenProcessPool as exc:
            raise MethodError(f"the process that builds the methods to check them ended abruptly ({exc}); "
                              "`--jobs 1` builds them in this process and shows why") from exc
    runs, skipped = [], []
    for availability in probed:
        if availability.reason is not None and settings.strict and not availability.optional:
            seed = availability.seed
            raise MethodError(f"{availability.method}{'' if seed is None else f' (seed {seed})'}: "
                              f"{availability.reason}")
        (runs if availability.reason is None else skipped).append(availability)
    return runs, skipped


def _by_root(targets: list[Target]) -> list[list[int]]:
    """Positions grouped by (workload file, root): the unit of work of a policy played episode by episode."""
    groups: dict[tuple[str, int], list[int]] = {}
    for position, target in enumerate(targets):
        groups.setdefault((target.path, target.root), []).append(position)
    return list(groups.values())


def _in_batches(targets: list[Target]) -> list[list[int]]:
    """Positions in runs of :data:`LOCKSTEP_BATCH`: a batched policy plays each run in lock-step."""
    return [list(range(i, min(i + LOCKSTEP_BATCH, len(targets)))) for i in range(0, len(targets), LOCKSTEP_BATCH)]


def _chunks(method: str, seed: int | None, targets: list[Target], keys: list[str],
            grouping: Callable[[list[Target]], list[list[int]]], env: tuple[tuple[str, Any], ...]) -> list[Unit]:
    return [Unit(method, seed, tuple(targets[i] for i in group), tuple(keys[i] for i in group), env)
            for group in grouping(targets)]


def _execute(pending: list[Unit], settings: Settings, num_nodes: int, cache: ResultCache,
             done: dict[str, Any]) -> None:
    """Run the pending units (in processes when jobs > 1, as Ray tasks with ``ray``), caching each unit's episodes
    as it finishes."""
    bank = str(settings.bank)
    bar = tqdm(total=sum(len(u.keys) for u in pending), unit="episode", desc="evaluating", file=sys.stderr,
               disable=not settings.progress or not pending, dynamic_ncols=True)

    def finish(unit: Unit, rows: list[dict[str, Any]]) -> None:
        fresh = dict(zip(unit.keys, rows))
        cache.put_many(fresh)
        done.update(fresh)
        bar.update(len(rows))

    try:
        if settings.ray is not None:
            from mara_agents.evaluation.ray_executor import run_on_ray
            run_on_ray(pending, bank, num_nodes, settings.ray, settings.jobs, finish)
            return
        if settings.jobs <= 1:
            one_thread()
            try:
                for unit in pending:
                    finish(unit, run_unit(unit, bank, num_nodes))
            finally:
                SHARED.close()  # this process goes on to other work: write the new answers, free the rest
            return
        try:
            play_units(pending, settings.jobs, run_unit, bank, num_nodes, finish)
        except BrokenProcessPool as exc:
            raise MethodError(f"a worker process ended abruptly ({exc}); the episodes finished so far are cached; "
                              "`--jobs 1` plays in this process and shows why") from exc
    finally:
        bar.close()


def _rows(units: list[Unit], done: dict[str, Any]) -> list[dict[str, Any]]:
    """Per-episode rows with their identity (method, seed, task set, load, root, episode), bounds split in two."""
    rows: list[dict[str, Any]] = []
    for unit in units:
        for target, key in zip(unit.targets, unit.keys):
            ident = {"task_set": target.task_set, "load": target.load, "root": target.root, "episode": target.episode}
            value = done[key]
            if unit.method != BOUNDS:
                rows.append({"method": unit.method, "seed": unit.seed, **ident, **value})
                continue
            for bound in (ORACLE, CLAIRVOYANT):
                tasks = value["tasks"]
                rows.append({"method": bound, "seed": None, **ident, "tasks": tasks, "successes": value[bound],
                             "success_rate": value[bound] / tasks if tasks else float("nan"),
                             "families": value[f"families_{bound}"]})
    return rows
