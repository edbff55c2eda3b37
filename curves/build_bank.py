"""Build a whole bank, resumably, in an order that makes it usable early: ``python -m curves.build_bank``.

Work is done in chunks — test curves first (in thirds), then val, then train — first for every family
but the two ResNets (by far the slowest on a CPU), then for the ResNets, so an interrupted build holds
complete families; each chunk ends with a calibration so the manifest always carries current ε rules (fitted
on the curves each family's manifest entry names, so a bank calibrated with ``curves.calibrate --calibrate-on``
keeps its rules as it grows).  Rerunning skips finished curves.  A family whose data is missing is refused
before anything is trained, with its install hint: a build never reports complete with families left out.
Counts per family: ID 30 train / 6 val / 24 test (``--train``/``--val`` change the ID counts, e.g. the
paper's 50 / 10), OOD 6 val / 24 test.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from dataclasses import dataclass
from itertools import groupby
from pathlib import Path

import torch

from curves.bank import BankWriter
from curves.calibrate import calibrate_bank
from curves.catalog import FAMILIES, PAPER, SHIPPED, get_family
from mara_common.checks import MAX_THREADS, argparse_type, choice, integer, number
from mara_common.cli import FILE_ERRORS, Parser, parse, run_command
from curves.data.errors import DataMissingError
from curves.generate import add_generation_arguments, bank_with_curves, generate

COUNTS = {"id": {"train": 30, "val": 6, "test": 24}, "ood": {"train": 0, "val": 6, "test": 24}}
# (split, first, last fraction of the split's count): test in thirds, then val, then train in thirds
CHUNKS = [("test", 0, 1 / 3), ("test", 1 / 3, 2 / 3), ("test", 2 / 3, 1), ("val", 0, 1),
          ("train", 0, 1 / 3), ("train", 1 / 3, 2 / 3), ("train", 2 / 3, 1)]
PAPER_COUNTS = {"train": 50, "val": 10}  # the paper's split sizes per configuration (Appendix A.2)
MAX_COUNT = 10_000  # curves per split and family a build may ask for

MAX_GPUS = 64  # num_gpus per Ray task
MAX_RETRIES = 100

SLOW_LAST = ["resnet18_fmnist", "resnet34_fmnist", "resnet18_cifar10", "resnet34_cifar10"]

log = logging.getLogger("curves.build_bank")


@dataclass(frozen=True)
class Job:
    """Curves ``start .. stop-1`` of one family and split; ``chunk`` numbers the calibration point it ends."""

    family: str
    split: str
    start: int
    stop: int
    chunk: int


def plan(families: list[str], scale: float = 1.0, counts: dict[str, dict[str, int]] = COUNTS) -> list[Job]:
    """Every curve of a build, in build order (``counts[role][split]`` curves per family; ``scale`` shrinks
    them, for quick trial banks).

    Two passes: every family except the slow ResNets through all chunks, then the ResNets.  A build cut short
    then holds complete families (and the ResNets' test curves first) rather than train splits missing
    everywhere.
    """
    passes = [[n for n in families if n not in SLOW_LAST], [n for n in families if n in SLOW_LAST]]
    jobs, chunk = [], 0
    for group in passes:
        for split, start, stop in CHUNKS:
            for name in group:
                count = counts[get_family(name).role][split]
                start_n, stop_n = int(round(start * count) * scale), int(round(stop * count) * scale)
                if stop_n > start_n:
                    jobs.append(Job(name, split, start_n, stop_n, chunk))
            chunk += 1
    return jobs


def log_calibration(bank: str | Path, label: str) -> None:
    """Recalibrate the bank and log each family's feasibility (called whenever a chunk has new curves)."""
    rows = calibrate_bank(bank)
    log.info("calibrated after %s: %s", label,
             ", ".join(f"{r['family']}={100 * r['feasibility']:.0f}%({r['curves']})" for r in rows))


def build(families: list[str], bank: str | Path, preset: str, data_root: str | None, device: str,
          timings: str | None, scale: float = 1.0, length: int | None = None,
          counts: dict[str, dict[str, int]] = COUNTS) -> None:
    """Generate every chunk for every family (``counts`` per role and split, as :func:`plan` takes them).

    ``length`` overrides curve lengths for smoke-test banks, which are then left uncalibrated: their curves
    are shorter than the families' available times.  A family whose data is missing raises
    :class:`DataMissingError` (:func:`check_families_data` checks them all before any work).
    """
    for _, chunk in groupby(plan(families, scale, counts), key=lambda job: job.chunk):
        made_any = False
        jobs = list(chunk)
        for job in jobs:
            began = time.time()
            made = generate(job.family, job.split, job.stop - job.start, bank, preset, data_root, device,
                            job.start, progress=False, timings=timings, length=length)
            if made:
                made_any = True
                log.info("%s/%s[%d:%d]: %d curve(s) in %.0f s", job.family, job.split, job.start, job.stop, made,
                         time.time() - began)
        if made_any and length is None:
            log_calibration(bank, f"{jobs[0].split}[{jobs[0].start}:{jobs[0].stop}]")
    if length is None:
        calibrate_bank(bank)
    log.info("bank complete at %s", bank)


def check_families_data(jobs: list[Job], bank: str | Path, data_root: str | None, asked_by: str) -> None:
    """Raise :class:`DataMissingError` in one line naming ``asked_by`` (the flag that chose the families), every
    family with curves left to make whose data is missing, and each missing data set's install hint."""
    writer = BankWriter(bank)
    needed = dict.fromkeys(job.family for job in jobs
                           if not all(writer.has(job.family, job.split, i) for i in range(job.start, job.stop)))
    missing: dict[str, list[str]] = {}
    for name in needed:
        try:
            get_family(name).check_data(data_root)
        except DataMissingError as exc:
            missing.setdefault(str(exc), []).append(name)
    if missing:
        count = sum(map(len, missing.values()))
        reasons = "; ".join(f"{', '.join(names)}: {why}" for why, names in missing.items())
        raise DataMissingError(f"{asked_by}: {count} of {len(needed)} families cannot be built, nothing was: {reasons}")


RAY_ONLY = ("cpus_per_curve", "gpus_per_curve", "family_resources")


def _parser() -> argparse.ArgumentParser:
    parser = Parser(prog="python -m curves.build_bank", description=__doc__.split("\n")[0])
    add_generation_arguments(parser)
    parser.add_argument("--paper-families", action="store_true", help="build the paper's families (needs --data-root)")
    parser.add_argument("--families", nargs="+", default=None, metavar="FAMILY",
                        type=argparse_type(choice, "--families", choices=sorted(FAMILIES)),
                        help="override the family list")
    for split, default in (("train", COUNTS["id"]["train"]), ("val", COUNTS["id"]["val"])):
        parser.add_argument(f"--{split}", type=argparse_type(integer, f"--{split}", int, low=1, high=MAX_COUNT),
                            default=default, help=f"{split} curves per ID family (default {default}; the paper: "
                                                  f"{PAPER_COUNTS[split]})")
    parser.add_argument("--scale", type=argparse_type(number, "--scale", float, low=0.0, high=1.0, low_open=True),
                        default=1.0, help="fraction of the standard counts, in (0, 1]")
    ray_args = parser.add_argument_group("Ray (docs/ray.md)")
    ray_args.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                          help="train the curves as Ray tasks: a local Ray, or the cluster at ADDRESS")
    ray_args.add_argument("--cpus-per-curve", default=None, help="num_cpus per curve (default --threads)",
                          type=argparse_type(number, "--cpus-per-curve", float, low=0.0, high=MAX_THREADS,
                                             low_open=True))
    ray_args.add_argument("--gpus-per-curve", default=None,
                          type=argparse_type(number, "--gpus-per-curve", float, low=0.0, high=MAX_GPUS),
                          help="num_gpus per curve (default 1 with a cuda device, else 0; fractions pack curves)")
    ray_args.add_argument("--family-resources", nargs="+", default=[], metavar="NAME=CPUS[:GPUS]",
                          help="per-family resources, e.g. resnet34_cifar10=2:1")
    ray_args.add_argument("--retries", type=argparse_type(integer, "--retries", int, low=0, high=MAX_RETRIES),
                          default=2, help="resubmissions of a failed curve before it is reported")
    return parser


def _check(args: argparse.Namespace) -> None:
    """The checks that span flags; fills in ``args.families`` (the families to build)."""
    args.asked_by = ("--families" if args.families else "--paper-families" if args.paper_families
                     else "the shipped families")
    args.families = args.families or (PAPER if args.paper_families else SHIPPED)
    if args.ray is None:
        given = [name for name in RAY_ONLY if getattr(args, name) not in (None, [])]
        if given:
            raise ValueError(f"--{given[0].replace('_', '-')} needs --ray")
    if args.ray is not None and not args.ray.strip():
        raise ValueError("--ray ADDRESS must not be empty (give no address for a local Ray)")
    if args.family_resources:
        from curves.ray_build import parse_family_resources
        parse_family_resources(args.family_resources)
    args.counts = {"id": {**COUNTS["id"], "train": args.train, "val": args.val}, "ood": COUNTS["ood"]}
    if not plan(args.families, args.scale, args.counts):
        raise ValueError(f"--scale {args.scale} selects no curve (each split's count times --scale rounds to 0)")


def main(argv: list[str] | None = None) -> int:
    """CLI entry point: every flag is checked before any work (a refusal is one line and exit status 2); an
    unusable bank is one line and status 2; SIGINT/SIGTERM exits 130 saying how many curves were saved; with
    ``--ray`` a curve that failed every attempt, or a family whose data the workers lack, makes the exit
    status 1."""
    args = parse(_parser(), argv, _check)
    if isinstance(args, int):
        return args
    families = args.families
    before = bank_with_curves(args.bank)

    def work() -> int:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stdout)
        torch.set_num_threads(args.threads)
        if args.ray is None:
            BankWriter(args.bank)  # an unusable bank is refused here, before any data is loaded
            check_families_data(plan(families, args.scale, args.counts), args.bank, args.data_root, args.asked_by)
            build(families, args.bank, args.preset, args.data_root, args.device, args.timings, args.scale,
                  args.length, args.counts)
            return 0
        from curves.ray_build import run_cli
        return run_cli(args, families)

    return run_command(work, FILE_ERRORS,
                       lambda: f"{bank_with_curves(args.bank)} curve(s) in {args.bank}, "
                               f"{bank_with_curves(args.bank) - before} new; run the same command again to resume")


if __name__ == "__main__":
    raise SystemExit(main())
