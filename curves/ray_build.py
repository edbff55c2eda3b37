"""Build a bank on a Ray cluster: ``python -m curves.build_bank --ray [ADDRESS]``.

Every missing curve of the build plan (:func:`curves.build_bank.plan`) becomes one Ray task that trains the
curve's recipe and returns its per-batch losses; the driver is the bank's only writer, so the files are the
ones the local path writes (same manifest records, same arrays).  Each recipe asks for its own resources
(``num_cpus`` / ``num_gpus``, per family if needed), curves the bank already holds are skipped (the build is
resumable), and a curve whose task fails — the worker raised or died — is submitted again up to ``retries``
times, then listed in the report's ``failed``: never silently dropped.  Calibration runs whenever a chunk of
the plan is complete, as in the local build (not for smoke-test banks of shortened curves).
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from curves.bank import BankWriter
from curves.build_bank import COUNTS, MAX_GPUS, Job, log_calibration, plan
from curves.calibrate import calibrate_bank
from curves.catalog import FAMILIES, get_family
from mara_common.checks import MAX_THREADS, number
from curves.data.errors import DataMissingError
from curves.generate import append_timing, recipe_for, recorder_for, run_recipe
from mara_common.ray_support import connect, require_ray
from curves.recorder import declare_keeping_rules, generator_commit

log = logging.getLogger("curves.ray_build")


@dataclass(frozen=True)
class Resources:
    """What one recipe's Ray task asks for; ``threads`` is its torch thread count (1 keeps curves reproducible)."""

    num_cpus: float = 1.0
    num_gpus: float = 0.0
    threads: int = 1


@dataclass
class BuildReport:
    """What a Ray build did: curves made, curves that failed every attempt (id → last error), skipped families."""

    made: int = 0
    retried: int = 0
    failed: dict[str, str] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)


def parse_family_resources(items: list[str]) -> dict[str, Resources]:
    """``NAME=CPUS[:GPUS]`` command-line items → per-family resources (``ValueError`` naming a bad item)."""
    out = {}
    for item in items:
        name, _, amounts = item.partition("=")
        cpus, _, gpus = amounts.partition(":")
        try:
            num_cpus = number("--family-resources CPUS", float(cpus), low=0.0, high=MAX_THREADS, low_open=True)
            num_gpus = number("--family-resources GPUS", float(gpus or 0.0), low=0.0, high=MAX_GPUS)
        except ValueError as exc:
            message = "" if "--family-resources" not in str(exc) else f" ({exc})"
            raise ValueError(f"--family-resources item {item!r} must look like NAME=CPUS or NAME=CPUS:GPUS with "
                             f"CPUS > 0 and GPUS ≥ 0{message}") from None
        if name not in FAMILIES:
            raise ValueError(f"--family-resources item {item!r}: unknown family {name!r}; known: {sorted(FAMILIES)}")
        out[name] = Resources(num_cpus, num_gpus, max(1, int(num_cpus)))
    return out


def train_curve(family: str, split: str, index: int, preset: str, data_root: str | None, device: str,
                length: int | None, threads: int) -> tuple[np.ndarray, float]:
    """Worker side: train curve ``family/split/index`` and return (per-batch losses, wall seconds)."""
    torch.set_num_threads(threads)
    spec = get_family(family)
    began = time.perf_counter()
    losses = run_recipe(spec, recipe_for(spec, split, index), length or spec.length, preset, data_root, device)
    return losses, time.perf_counter() - began


def _cause(exc: BaseException) -> BaseException:
    """The exception a Ray task raised, unwrapped from Ray's error (or ``exc`` itself)."""
    return getattr(exc, "cause", None) or exc


def build_on_ray(families: list[str], bank: str | Path, preset: str = "cpu", data_root: str | None = None,
                 device: str = "cpu", timings: str | None = None, scale: float = 1.0, length: int | None = None,
                 resources: Resources | None = None, family_resources: Mapping[str, Resources] | None = None,
                 retries: int = 2, progress: bool = True, train: Callable[..., Any] = train_curve,
                 counts: dict[str, dict[str, int]] = COUNTS) -> BuildReport:
    """Run the build plan on the connected Ray cluster (call ``ray.init`` first); returns the report.

    ``train`` is the worker function (:func:`train_curve`'s signature); tests replace it to inject faults.
    """
    import ray

    writer = BankWriter(bank)
    build = _RayBuild(ray, ray.remote(max_retries=0)(train), writer, bank, preset, data_root, device, length,
                      timings, retries, resources or Resources(), dict(family_resources or {}), generator_commit())
    jobs = plan(families, scale, counts)
    for name in dict.fromkeys(job.family for job in jobs):
        declare_keeping_rules(writer, get_family(name).spec(preset))
    todo = [(job, index) for job in jobs for index in range(job.start, job.stop)
            if not writer.has(job.family, job.split, index)]
    for job, index in todo:
        build.left_in_chunk[job.chunk] = build.left_in_chunk.get(job.chunk, 0) + 1
        build.submit(job, index, 1)
    build.bar = tqdm(total=len(todo), desc="curves on ray", unit="curve", disable=not progress, file=sys.stderr)
    while build.pending:
        (ref,), _ = ray.wait(list(build.pending), num_returns=1)
        build.settle(ref)
    build.bar.close()
    for name, why in build.report.missing.items():
        log.warning("skipped %s: %s", name, why)
    for cid, why in build.report.failed.items():
        log.error("curve %s failed %d times: %s", cid, retries + 1, why)
    if length is None:
        calibrate_bank(bank)
    return build.report


@dataclass
class _RayBuild:
    """A build in flight: the settings every task gets, the tasks out, the curves each chunk still waits for
    (its calibration runs when none is left) and the report so far."""

    ray: Any
    remote: Any
    writer: BankWriter
    bank: str | Path
    preset: str
    data_root: str | None
    device: str
    length: int | None
    timings: str | None
    retries: int
    default: Resources
    family_resources: dict[str, Resources]
    commit: str
    report: BuildReport = field(default_factory=BuildReport)
    pending: dict[Any, tuple[Job, int, int]] = field(default_factory=dict)
    left_in_chunk: dict[int, int] = field(default_factory=dict)
    bar: Any = None

    def submit(self, job: Job, index: int, attempt: int) -> None:
        """Queue one curve's task with its family's resources."""
        need = self.family_resources.get(job.family, self.default)
        ref = self.remote.options(num_cpus=need.num_cpus, num_gpus=need.num_gpus).remote(
            job.family, job.split, index, self.preset, self.data_root, self.device, self.length, need.threads)
        self.pending[ref] = (job, index, attempt)

    def settle(self, ref: Any) -> None:
        """Store the finished task ``ref``'s curve, or resubmit it, or record why it failed for good."""
        job, index, attempt = self.pending.pop(ref)
        cid = f"{job.family}/{job.split}/{index:03d}"
        try:
            losses, seconds = self.ray.get(ref)
            batch_size = _store(self.writer, job, index, losses, self.preset, self.commit, self.length)
        except DataMissingError as exc:
            self.report.missing.setdefault(job.family, str(_cause(exc)))
            self.drop_family(job.family)
        except (self.ray.exceptions.RayError, FloatingPointError, ValueError) as exc:
            if attempt <= self.retries:
                self.report.retried += 1
                log.warning("%s failed (attempt %d of %d), retrying: %s", cid, attempt, self.retries + 1,
                            str(_cause(exc)).splitlines()[0] if str(_cause(exc)) else type(_cause(exc)).__name__)
                self.submit(job, index, attempt + 1)
                return
            self.report.failed[cid] = f"{type(_cause(exc)).__name__}: {_cause(exc)}"
        else:
            self.report.made += 1
            if self.timings is not None:
                append_timing(self.timings, job.family, job.split, index, batch_size, seconds, self.device)
        self.bar.update(1)
        self.left_in_chunk[job.chunk] -= 1
        if self.left_in_chunk[job.chunk] == 0 and self.report.made and self.length is None:
            log_calibration(self.bank, f"chunk {job.chunk}")

    def drop_family(self, family: str) -> None:
        """A family's data is missing: cancel its other curves (the local build skips such families too)."""
        for ref in [ref for ref, (job, _, _) in self.pending.items() if job.family == family]:
            job, _, _ = self.pending.pop(ref)
            self.ray.cancel(ref)
            self.left_in_chunk[job.chunk] -= 1
            self.bar.update(1)


def _store(writer: BankWriter, job: Job, index: int, losses: np.ndarray, preset: str, commit: str,
           length: int | None) -> int:
    """Write one finished curve with the record fields the local generator writes; returns its batch size."""
    family = get_family(job.family)
    recipe = recipe_for(family, job.split, index)
    with recorder_for(writer, family, job.split, index, recipe, preset, length or family.length, commit) as rec:
        for value in np.asarray(losses).tolist():
            rec.log(value)
    return recipe.batch_size


def run_cli(args: Any, families: list[str]) -> int:
    """``build_bank --ray``: connect (local Ray unless an address is given), build, report, disconnect."""
    try:
        ray = require_ray("build_bank --ray")
        family_resources = parse_family_resources(args.family_resources)
    except (ValueError, ModuleNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    gpus = args.gpus_per_curve if args.gpus_per_curve is not None else float(args.device.startswith("cuda"))
    cpus = args.cpus_per_curve if args.cpus_per_curve is not None else float(args.threads)
    BankWriter(args.bank)  # an unusable bank is refused before Ray starts
    try:  # "local": a new local Ray, even if RAY_ADDRESS is set
        connect(args.ray, purpose="build_bank --ray")
    except ConnectionError as exc:
        print(f"error: --ray: {exc}", file=sys.stderr)
        return 2
    try:
        report = build_on_ray(families, args.bank, args.preset, args.data_root, args.device, args.timings, args.scale,
                              args.length, Resources(cpus, gpus, args.threads), family_resources, args.retries,
                              counts=args.counts)
    finally:
        ray.shutdown()
    print(f"{report.made} new curve(s) in {args.bank}; {report.retried} resubmission(s); "
          f"{len(report.failed)} failed; {len(report.missing)} family(ies) skipped for missing data")
    for cid, why in report.failed.items():
        print(f"FAILED {cid}: {why}")
    for family, why in report.missing.items():
        print(f"SKIPPED {family}: {why}")
    return 1 if report.failed or report.missing else 0
