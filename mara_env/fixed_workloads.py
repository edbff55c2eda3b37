"""The fixed evaluation workloads: generated once from the shipped bank's test curves.

For each task set (id, rl_ood, vit_ood) and load p ∈ {0.04, 0.05, 0.06, 0.07}: 5 roots × 12 episodes, one
file per (task set, load); plus ``stress.json`` (5 roots × 12 episodes of the stress test).  Every root has
its own seed derived from (task set, load, root), so files can be regenerated independently and a test pins
their checksums.  Regenerate with ``python -m mara_env.fixed_workloads`` (only after the bank or the task
rules change); it refuses a bank whose test pools are incomplete.
"""

from __future__ import annotations

import sys
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from curves.bank import DEFAULT_BANK, CurveBank, load_bank
from mara_common.checks import argparse_type, existing_dir, integer, writable_dir
from mara_common.cli import FILE_ERRORS, Parser, parse, run_command
from mara_env.config import MARAConfig
from mara_env.tasksets import TASK_SETS
from mara_env.workload import Workload, save_workload

WORKLOAD_DIR = Path(__file__).resolve().parent / "workloads"
EVAL_TASK_SETS = ("id", "rl_ood", "vit_ood")
EVAL_LOADS = (0.04, 0.05, 0.06, 0.07)
ROOTS = 5
EPISODES_PER_ROOT = 12
SEED_BASE = 20260401
EVAL_SPLITS = ("test",)
FULL_TEST_POOL = 24  # test curves per family in a complete bank (curves.build_bank's counts)


def workload_path(task_set: str, load: float | None = None, directory: Path = WORKLOAD_DIR) -> Path:
    """Where the fixed workload of a task set and load lives (the stress set has no load)."""
    if task_set == "stress":
        return directory / "stress.json"
    return directory / f"{task_set}_p{load:.2f}.json"


def root_rng(task_set: str, load: float, root: int, seed_base: int = SEED_BASE) -> np.random.Generator:
    """Independent generator per (task set, load, root); the task set enters by a checksum of its name, so
    registering more task sets never changes another set's draws."""
    code = zlib.crc32(task_set.encode())
    return np.random.default_rng([seed_base, code, int(round(load * 1000)), root])


def build_workload(bank: CurveBank, task_set: str, load: float, roots: int = ROOTS,
                   episodes: int = EPISODES_PER_ROOT, splits: Sequence[str] = EVAL_SPLITS,
                   seed_base: int = SEED_BASE) -> Workload:
    """Draw ``roots × episodes`` episodes of a task set from the bank's curves of ``splits`` (default: the
    test curves of the fixed evaluation workloads; MAT's checkpoint selection draws from ``val``)."""
    window = MARAConfig().arrival_window
    drawn = []
    for root in range(roots):
        rng = root_rng(task_set, load, root, seed_base)
        drawn.extend(TASK_SETS[task_set].sample(bank, rng, load, window, splits, root=root, index=i)
                     for i in range(episodes))
    return Workload(tuple(drawn), task_set, None if task_set == "stress" else load)


def check_complete_pools(bank: CurveBank, splits: Sequence[str] = EVAL_SPLITS, size: int = FULL_TEST_POOL) -> None:
    """Refuse a bank whose evaluation pools are partial (a build still running): a workload drawn from it
    would over-use the first curves of a family, and no later rebuild would reproduce it."""
    for family in sorted(bank.families):
        count = len(bank.ids(family, splits))
        if count < size:
            raise ValueError(f"bank {bank.root}: family {family!r} has {count} {'/'.join(splits)} curves, fewer "
                             f"than the {size} of a complete bank; finish the bank before drawing fixed workloads")


def generate_all(bank: CurveBank, directory: Path = WORKLOAD_DIR) -> list[Path]:
    """Write every fixed evaluation workload file; returns their paths."""
    written = []
    for task_set in EVAL_TASK_SETS:
        for load in EVAL_LOADS:
            path = workload_path(task_set, load, directory)
            save_workload(path, build_workload(bank, task_set, load))
            written.append(path)
    stress = workload_path("stress", directory=directory)
    save_workload(stress, build_workload(bank, "stress", 0.0))
    written.append(stress)
    return written


def main(argv: list[str] | None = None) -> int:
    """CLI: every flag is checked before any work (one line, exit status 2), and so is the bank."""
    parser = Parser(prog="python -m mara_env.fixed_workloads", description=__doc__.splitlines()[0])
    parser.add_argument("--bank", default=str(DEFAULT_BANK), type=argparse_type(existing_dir, "--bank"),
                        help="curve bank directory")
    parser.add_argument("--out", default=str(WORKLOAD_DIR), type=argparse_type(writable_dir, "--out"),
                        help="directory for the workload files")
    parser.add_argument("--min-test-curves", default=FULL_TEST_POOL,
                        type=argparse_type(integer, "--min-test-curves", int, low=1, high=10_000),
                        help="refuse a bank with fewer test curves in any family (a partial build)")
    args = parse(parser, argv)
    if isinstance(args, int):
        return args
    try:
        bank = load_bank(args.bank)
        check_complete_pools(bank, size=args.min_test_curves)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    def work() -> int:
        for path in generate_all(bank, Path(args.out)):
            print(path)
        return 0

    return run_command(work, FILE_ERRORS,
                       lambda: f"each workload file in {args.out} is written whole; run the command again to write "
                               "them all")


if __name__ == "__main__":
    sys.exit(main())
