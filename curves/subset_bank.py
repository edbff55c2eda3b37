"""Copy the first N curves of each split of a bank into a new bank: ``python -m curves.subset_bank``.

Curves are numbered per family and split, and each one's recipe depends on its ``family/split/index``
only. The first 50 `train` curves of a grown bank are therefore the curves a 50-curve build would make. A
data curve over training-set sizes, and a paper-size bank cut from a larger one, are such subsets. The limits
apply to the families of the roles named (ID by default, as ``build_bank --train/--val`` grows only those);
the other families are copied whole. Family
rules (ε, crossing, ``calibrated_on``) and curve records are copied unchanged. The new bank is written
beside its target and renamed into place, so it appears whole or not at all. An existing target is
refused, never overwritten.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from mara_common.atomic import atomic_write_json, atomic_write_npz
from curves.bank_format import MANIFEST, ROLES, SPLITS, BankError, CurveRecord, parse_record, read_manifest, read_npz
from mara_common.checks import argparse_type, existing_dir, integer, writable_dir
from mara_common.cli import FILE_ERRORS, Parser, parse, run_command

MAX_COUNT = 100_000  # curves per family and split a subset may ask for


def _chosen(records: list[CurveRecord], first: Mapping[str, int], limited: set[str]) -> list[CurveRecord]:
    """The records a subset keeps (``first`` applies to the ``limited`` families); refuses a split of those
    that holds fewer curves than asked for."""
    kept = [rec for rec in records if rec.family not in limited or rec.index < first.get(rec.split, math.inf)]
    for family in sorted(limited):
        for split, count in first.items():
            held = sum(1 for rec in kept if rec.family == family and rec.split == split)
            available = any(rec.family == family and rec.split == split for rec in records)
            if available and held < count:
                raise BankError(f"{family}/{split}: the source holds {held} of the first {count} curves; generate "
                                f"the rest first (python -m curves.generate --family {family} --split {split} "
                                f"--count {count})")
    return kept


def subset_bank(source: str | os.PathLike[str], target: str | os.PathLike[str], first: Mapping[str, int],
                roles: Sequence[str] = ("id",)) -> int:
    """Write the bank ``target`` with curves ``0 .. first[split] − 1`` of each named split of every family of
    ``source`` whose role is in ``roles`` (splits ``first`` does not name, and other families, are copied
    whole); returns how many curves it holds.

    A family with no curve in a split keeps none there.
    """
    source, target = Path(source), Path(target)
    if target.exists():
        raise BankError(f"{target} already exists; name a new directory (a subset never overwrites a bank)")
    manifest = read_manifest(source)
    records = [parse_record(raw, str(source / MANIFEST)) for raw in manifest.get("curves", [])]
    limited = {name for name, raw in manifest.get("families", {}).items() if raw.get("role") in roles}
    kept = _chosen(records, first, limited)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        for family in sorted({rec.family for rec in kept}):
            arrays = read_npz(source / f"{family}.npz")
            atomic_write_npz(staging / f"{family}.npz",
                             {rec.key: arrays[rec.key] for rec in kept if rec.family == family})
        keys = {(rec.family, rec.split, rec.index) for rec in kept}
        curves = [raw for raw in manifest["curves"] if (raw["family"], raw["split"], raw["index"]) in keys]
        atomic_write_json(staging / MANIFEST, {**manifest, "curves": curves})
        os.rename(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return len(kept)


def _parser() -> argparse.ArgumentParser:
    parser = Parser(prog="python -m curves.subset_bank", description=__doc__.split("\n")[0])
    parser.add_argument("--from", dest="source", required=True, type=argparse_type(existing_dir, "--from"),
                        help="the bank to copy from")
    parser.add_argument("--to", dest="target", required=True, type=argparse_type(writable_dir, "--to"),
                        help="the new bank's directory (must not exist)")
    for split in SPLITS:
        parser.add_argument(f"--{split}", type=argparse_type(integer, f"--{split}", int, low=0, high=MAX_COUNT),
                            default=None, help=f"keep the first N {split} curves of each family (default: all)")
    parser.add_argument("--roles", nargs="+", choices=ROLES, default=["id"],
                        help="the roles whose families the limits apply to (default: id; others are copied whole)")
    return parser


def _check(args: argparse.Namespace) -> None:
    if args.target.exists():
        raise ValueError(f"--to: {args.target} already exists; name a new directory")
    if not (args.source / MANIFEST).is_file():
        raise ValueError(f"--from: {args.source} holds no curve bank ({MANIFEST} not found)")


def main(argv: list[str] | None = None) -> int:
    """CLI entry point: flags are checked before any work (one line, exit status 2)."""
    args = parse(_parser(), argv, _check)
    if isinstance(args, int):
        return args
    first = {split: getattr(args, split) for split in SPLITS if getattr(args, split) is not None}

    def work() -> int:
        held = subset_bank(args.source, args.target, first, args.roles)
        print(f"{held} curves in {args.target}")
        return 0

    return run_command(work, FILE_ERRORS,
                       lambda: f"nothing written to {args.target} (a subset appears whole or not at all)")


if __name__ == "__main__":
    sys.exit(main())
