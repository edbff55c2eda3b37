"""Build a whole bank, resumably, in an order that makes it usable early: ``python -m curves.build_bank``.

Work is done in chunks — test curves first (in thirds), then val, then train — first for every family
but the two ResNets (by far the slowest on a CPU), then for the ResNets, so an interrupted build holds
complete families; each chunk ends with a calibration so the manifest always carries current ε rules.  Rerunning skips finished curves; families whose data is missing are skipped with
their install hint.  Counts per family (issue 3): ID 30 train / 6 val / 24 test, OOD 6 val / 24 test.
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

from curves.bank import DEFAULT_BANK
from curves.calibrate import calibrate_bank
from curves.catalog import PAPER, PRESETS, SHIPPED, get_family
from curves.data.errors import DataMissingError
from curves.generate import generate

COUNTS = {"id": {"train": 30, "val": 6, "test": 24}, "ood": {"train": 0, "val": 6, "test": 24}}
CHUNKS = [("test", 0, 8), ("test", 8, 16), ("test", 16, 24), ("val", 0, 6),
          ("train", 0, 10), ("train", 10, 20), ("train", 20, 30)]

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


def plan(families: list[str], scale: float = 1.0) -> list[Job]:
    """Every curve of a build, in build order (``scale`` shrinks the counts, for quick trial banks).

    Two passes: every family except the slow ResNets through all chunks, then the ResNets.  A build cut short
    then holds complete families (and the ResNets' test curves first) rather than train splits missing
    everywhere.
    """
    passes = [[n for n in families if n not in SLOW_LAST], [n for n in families if n in SLOW_LAST]]
    jobs, chunk = [], 0
    for group in passes:
        for split, start, stop in CHUNKS:
            for name in group:
                role = get_family(name).role
                start_n, stop_n = int(start * scale), int(min(stop, COUNTS[role][split]) * scale)
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
          timings: str | None, scale: float = 1.0, length: int | None = None) -> None:
    """Generate every chunk for every family.

    ``length`` overrides curve lengths for smoke-test banks, which are then left uncalibrated: their curves
    are shorter than the families' available times.
    """
    missing: set[str] = set()
    for _, chunk in groupby(plan(families, scale), key=lambda job: job.chunk):
        made_any = False
        jobs = list(chunk)
        for job in jobs:
            if job.family in missing:
                continue
            began = time.time()
            try:
                made = generate(job.family, job.split, job.stop - job.start, bank, preset, data_root, device,
                                job.start, progress=False, timings=timings, length=length)
            except DataMissingError as exc:
                log.warning("skipping %s: %s", job.family, exc)
                missing.add(job.family)
                continue
            if made:
                made_any = True
                log.info("%s/%s[%d:%d]: %d curve(s) in %.0f s", job.family, job.split, job.start, job.stop, made,
                         time.time() - began)
        if made_any and length is None:
            log_calibration(bank, f"{jobs[0].split}[{jobs[0].start}:{jobs[0].stop}]")
    if length is None:
        calibrate_bank(bank)
    log.info("bank complete at %s", bank)


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; with ``--ray`` a curve that failed every attempt makes the exit status 1."""
    parser = argparse.ArgumentParser(prog="python -m curves.build_bank", description=__doc__.split("\n")[0])
    parser.add_argument("--bank", default=str(DEFAULT_BANK))
    parser.add_argument("--preset", choices=PRESETS, default="cpu")
    parser.add_argument("--data-root", default=None, help="with the paper's data: build the paper's families")
    parser.add_argument("--paper-families", action="store_true", help="build the paper's families (needs --data-root)")
    parser.add_argument("--families", nargs="*", default=None, help="override the family list")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--timings", default=None, help="JSON-lines file of per-curve wall times")
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the standard counts")
    parser.add_argument("--length", type=int, default=None, help="override the curve length (smoke tests only)")
    ray_args = parser.add_argument_group("Ray (docs/ray.md)")
    ray_args.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                          help="train the curves as Ray tasks: a local Ray, or the cluster at ADDRESS")
    ray_args.add_argument("--cpus-per-curve", type=float, default=None, help="num_cpus per curve (default --threads)")
    ray_args.add_argument("--gpus-per-curve", type=float, default=None,
                          help="num_gpus per curve (default 1 with a cuda device, else 0; fractions pack curves)")
    ray_args.add_argument("--family-resources", nargs="*", default=[], metavar="NAME=CPUS[:GPUS]",
                          help="per-family resources, e.g. resnet34_cifar10=2:1")
    ray_args.add_argument("--retries", type=int, default=2,
                          help="resubmissions of a failed curve before it is reported")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stdout)
    torch.set_num_threads(args.threads)
    families = args.families or (PAPER if args.paper_families else SHIPPED)
    if args.ray is None:
        build(families, args.bank, args.preset, args.data_root, args.device, args.timings, args.scale, args.length)
        return 0
    from curves.ray_build import run_cli
    return run_cli(args, families)


if __name__ == "__main__":
    raise SystemExit(main())
