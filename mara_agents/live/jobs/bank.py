"""``python -m mara_agents.live.jobs bank SOURCE... --out BANK``: your jobs' curves as a bank FM can be trained on.

A live run records its jobs' curves in ``OUT/bank``, each filed as a test curve of a family the predictors
never saw (:func:`~mara_env.live.jobs.job_specs`).  This command turns one or more sources into a bank with
``train``, ``val`` and ``test`` splits that ``python train.py fm --bank BANK`` accepts:

* a **recorded run** (a folder: the ``--out`` of a jobs run) gives each job's recorded losses (the runs of one
  job file add up as in the twin, :func:`~mara_agents.live.jobs.twin.load_recorded`).  A run stops a job at
  its target or budget, where a forecast's horizon reaches 2·B; ``--complete FILE`` runs each recorded job
  of the job file here, alone, to 2·B (once its first steps agree with the record);
* a **job file** (``.py`` or ``.toml``) runs each job here, alone, to 2·B steps, once per ``--seed-offsets``
  value (seed = the job's seed + the offset), so one file gives as many curves per job as offsets.

Each job is a family of its own, named after the job, whose budget rule is the job's budget (a forecast of
it never reads more than B points).  A job whose name matches a ``--val`` pattern is filed under ``val``, one
matching ``--test`` under ``test`` (role ``ood``: ``train.py fm`` never reads it), every other under ``train``.
Patterns are shell globs on job names (``'sine-*'``): hold out whole kinds of job to see how FM does on a
kind it never saw.  ``--keep-bank BANK`` also files the ID families' ``train`` curves of ``BANK`` (the shipped
bank, say) under ``train``, so that a fine-tune learns your jobs beside FM's families rather than in their place.
The bank is written beside ``--out`` and renamed into place, whole or not at all; ``--out`` must not exist.
"""

from __future__ import annotations

import argparse
import dataclasses
import fnmatch
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from curves.bank import BankWriter, CurveBank, CurveRecord, FamilySpec, load_bank
from curves.recorder import generator_commit
from mara_agents.live.jobs.files import JobFileError, load_jobs
from mara_agents.live.jobs.twin import AGREE_RTOL, load_recorded
from mara_env.live.jobs import SOURCE, Job, run_offline

SPLIT_ROLES = {"train": "id", "val": "id", "test": "ood"}
PRESET = "user"


@dataclass(frozen=True)
class JobCurve:
    """One run of one job: what the bank records of it."""

    name: str
    index: int
    seed: int
    batch_size: int
    lr: float
    budget: int
    losses: np.ndarray


def offline_curves(jobs: Sequence[Job], offsets: Sequence[int] = (0,)) -> list[JobCurve]:
    """Each job run here, alone, to twice its budget, once per seed offset (seed = the job's seed + offset)."""
    curves = []
    for job in jobs:
        for index, offset in enumerate(offsets):
            run = dataclasses.replace(job, seed=job.seed + offset)
            curves.append(JobCurve(job.name, index, run.seed, job.batch_size, job.lr, job.budget,
                                   run_offline(run, 2 * job.budget)))
    return curves


def recorded_curves(folders: Sequence[str | Path], complete: Sequence[Job] = ()) -> list[JobCurve]:
    """The jobs recorded in ``folders``; those also in ``complete`` continued here to twice their budget
    (``ValueError`` where the run here does not begin with the record, to the twin's tolerance)."""
    by_name = {job.name: job for job in complete}
    curves = []
    for recorded in load_recorded(folders).jobs:
        task, losses = recorded.task, recorded.losses
        job = by_name.get(task.family)
        if job is not None and losses.size < 2 * task.budget:
            again = run_offline(job, 2 * task.budget)
            if again.size < losses.size or not np.allclose(again[:losses.size], losses, rtol=AGREE_RTOL, atol=0.0):
                raise ValueError(f"--complete: job {task.family!r} run here differs from its record; give the job "
                                 f"file that was run")
            losses = again
        curves.append(JobCurve(task.family, 0, task.seed, task.batch_size, task.lr, task.budget, losses))
    return curves


def matches(name: str, patterns: Sequence[str]) -> bool:
    """Whether a job name matches one of the shell-glob ``patterns`` (case-sensitive)."""
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def jobs_matching(jobs: Sequence[Job], patterns: Sequence[str], flag: str) -> list[Job]:
    """The jobs whose names match ``patterns``; ``ValueError`` naming ``flag`` for a pattern that matches none."""
    for pattern in patterns:
        if not any(matches(job.name, [pattern]) for job in jobs):
            raise ValueError(f"{flag} {pattern!r} matches no job (jobs: {', '.join(sorted(j.name for j in jobs))})")
    return [job for job in jobs if matches(job.name, patterns)]


def split_of(name: str, val: Sequence[str], test: Sequence[str]) -> str:
    """The split a job's curves go to: ``val`` or ``test`` if its name matches one of those patterns, else ``train``."""
    in_val, in_test = matches(name, val), matches(name, test)
    if in_val and in_test:
        raise ValueError(f"job {name!r} matches both a --val and a --test pattern")
    return "val" if in_val else "test" if in_test else "train"


def check_splits(curves: Sequence[JobCurve], val: Sequence[str], test: Sequence[str]) -> dict[str, str]:
    """Each job's split, after refusing a pattern that matches no job, repeated curves of one job and a bank
    without the ``train`` and ``val`` curves training needs."""
    names = sorted({curve.name for curve in curves})
    for flag, patterns in (("--val", val), ("--test", test)):
        for pattern in patterns:
            if not any(matches(name, [pattern]) for name in names):
                raise ValueError(f"{flag} {pattern!r} matches no job (jobs: {', '.join(names)})")
    keys = [(curve.name, curve.index) for curve in curves]
    twice = sorted({name for name, index in keys if keys.count((name, index)) > 1})
    if twice:
        raise ValueError(f"job(s) {', '.join(twice)} given by more than one source; give each job once")
    splits = {name: split_of(name, val, test) for name in names}
    for needed in ("train", "val"):
        if needed not in splits.values():
            raise ValueError(f"no job goes to {needed!r}: FM training needs both train and val jobs "
                             f"(--val names the val jobs; the jobs --val and --test leave go to train)")
    return splits


def write_bank(curves: Sequence[JobCurve], out: str | Path, splits: dict[str, str],
               keep: CurveBank | None = None) -> Path:
    """Write the bank ``out`` (which must not exist) whole or not at all, with ``keep``'s ID training curves
    beside the jobs' if given; returns ``out``."""
    out = Path(out)
    if out.exists():
        raise ValueError(f"{out} already exists; name a new folder (a bank is never overwritten)")
    kept = [] if keep is None else [name for name, spec in keep.families.items()
                                    if spec.role == "id" and keep.ids(family=name, splits=["train"])]
    clash = sorted(set(kept) & set(splits))
    if clash:
        raise ValueError(f"job(s) {', '.join(clash)} have the name of a family of --keep-bank; rename them")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        writer = BankWriter(staging)
        commit = generator_commit()
        for name in sorted(splits):
            budget = next(curve.budget for curve in curves if curve.name == name)
            writer.declare_family(FamilySpec(name, SPLIT_ROLES[splits[name]], SOURCE, SOURCE, SOURCE,
                                             budget={"kind": "set", "values": [budget]}))
        for curve in curves:
            writer.add(CurveRecord(curve.name, splits[curve.name], curve.index, curve.seed, 0, curve.batch_size,
                                   curve.lr, PRESET, SOURCE, int(curve.losses.size), commit), curve.losses)
        for name in kept:
            writer.declare_family(keep.families[name])
            for curve_id in keep.ids(family=name, splits=["train"]):
                writer.add(keep.records[curve_id], keep.per_batch[curve_id])
        os.rename(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out


def add_bank_command(commands: argparse._SubParsersAction) -> None:
    """The ``bank`` subcommand's arguments."""
    bank = commands.add_parser("bank", help="recorded runs or job files as a train/val/test bank for train.py fm")
    bank.add_argument("sources", nargs="+", help="recorded runs (--out folders of jobs runs) or job files")
    bank.add_argument("--out", required=True, help="the new bank's folder (must not exist)")
    bank.add_argument("--val", nargs="+", default=[], metavar="PATTERN", help="jobs filed under val (globs)")
    bank.add_argument("--test", nargs="+", default=[], metavar="PATTERN", help="jobs filed under test (globs)")
    bank.add_argument("--complete", default=None, metavar="FILE",
                      help="the job file that was run: its recorded jobs are run here to twice their budget")
    bank.add_argument("--seed-offsets", type=int, nargs="+", default=[0], metavar="K",
                      help="a job file's jobs run once per offset, with seed = the job's seed + K")
    bank.add_argument("--keep-bank", default=None, metavar="BANK",
                      help="also file BANK's ID training curves under train (FM keeps its families)")


def bank_command(args: argparse.Namespace) -> int:
    """``bank SOURCE... --out BANK``: one summary line per split, or one line naming the problem and exit 2."""
    try:
        if len(set(args.seed_offsets)) != len(args.seed_offsets) or min(args.seed_offsets) < 0:
            raise ValueError(f"--seed-offsets must be distinct and ≥ 0, got {args.seed_offsets}")
        if Path(args.out).exists():
            raise ValueError(f"--out {args.out} already exists; name a new folder (a bank is never overwritten)")
        files = [source for source in args.sources if not Path(source).is_dir()]
        folders = [source for source in args.sources if Path(source).is_dir()]
        curves = [curve for file in files for curve in offline_curves(load_jobs(file), args.seed_offsets)]
        if folders:
            curves += recorded_curves(folders, load_jobs(args.complete) if args.complete else ())
        elif args.complete:
            raise ValueError("--complete completes recorded runs; give at least one recorded run's folder")
        splits = check_splits(curves, args.val, args.test)
        write_bank(curves, args.out, splits, load_bank(args.keep_bank) if args.keep_bank else None)
    except (JobFileError, ValueError, TypeError) as exc:
        print(f"error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    for split in SPLIT_ROLES:
        jobs = sorted(name for name, where in splits.items() if where == split)
        held = sum(splits[curve.name] == split for curve in curves)
        print(f"{split:<6}{held:>5} curves of {len(jobs)} jobs" + (f": {', '.join(jobs)}" if jobs else ""))
    if args.keep_bank:
        print(f"train  and the ID training curves of {args.keep_bank}")
    print(args.out)
    return 0
