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


def build(families: list[str], bank: str | Path, preset: str, data_root: str | None, device: str,
          timings: str | None, scale: float = 1.0) -> None:
    """Generate every chunk for every family (``scale`` shrinks the counts, for quick trial banks)."""
    missing: set[str] = set()
    # Two passes: every family except the slow ResNets through all chunks, then the ResNets.  A build cut
    # short then holds complete families (and the ResNets' test curves first) rather than train splits
    # missing everywhere.
    passes = [[n for n in families if n not in SLOW_LAST], [n for n in families if n in SLOW_LAST]]
    for group in passes:
        for split, start, stop in CHUNKS:
            made_any = False
            for name in group:
                if name in missing:
                    continue
                role = get_family(name).role
                start_n, stop_n = int(start * scale), int(min(stop, COUNTS[role][split]) * scale)
                if stop_n <= start_n:
                    continue
                began = time.time()
                try:
                    made = generate(name, split, stop_n - start_n, bank, preset, data_root, device, start_n,
                                    progress=False, timings=timings)
                except DataMissingError as exc:
                    log.warning("skipping %s: %s", name, exc)
                    missing.add(name)
                    continue
                if made:
                    made_any = True
                    log.info("%s/%s[%d:%d]: %d curve(s) in %.0f s", name, split, start_n, stop_n, made,
                             time.time() - began)
            if made_any:
                rows = calibrate_bank(bank)
                log.info("calibrated after %s[%d:%d]: %s", split, start, stop,
                         ", ".join(f"{r['family']}={100 * r['feasibility']:.0f}%({r['curves']})" for r in rows))
    calibrate_bank(bank)
    log.info("bank complete at %s", bank)


def main(argv: list[str] | None = None) -> int:
    """CLI entry point."""
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
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stdout)
    torch.set_num_threads(args.threads)
    families = args.families or (PAPER if args.paper_families else SHIPPED)
    build(families, args.bank, args.preset, args.data_root, args.device, args.timings, args.scale)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
