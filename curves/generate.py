"""Generate real training-loss curves into a bank: ``python -m curves.generate --family NAME --split S --count N``.

Each curve's recipe (init seed, data-order seed, batch size, learning rate) is derived from
``(family, split, index)`` alone (:mod:`curves.recipe`), each finished curve is written to the bank at once
and atomically, and a rerun skips curves the bank already holds — so an interrupted run resumes where it
stopped and produces the same bank.  Several generators may write one bank at once (each write holds the
bank's lock and starts from the files on disk).  Output is deterministic for a given machine and thread count
(we use one thread).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from curves.bank import DEFAULT_BANK, MANIFEST, SPLITS, BankWriter, CurveRecord
from mara_common.checks import (MAX_THREADS, argparse_type, existing_dir, integer, torch_device, writable_dir,
                                 writable_file)
from mara_common.cli import FILE_ERRORS, Parser, parse, run_command
from curves.catalog import FAMILIES, PRESETS, Family, get_family
from curves.recipe import Recipe, draw_recipe
from curves.recorder import CurveRecorder, declare_keeping_rules, generator_commit

MAX_LENGTH = 100_000  # batches per curve: far beyond any family's (about 700), far below what exhausts memory
MAX_INDEX = 100_000  # curve indices run from 0 to MAX_INDEX - 1


def check_indices(start: int, count: int, names: tuple[str, str] = ("start", "count")) -> None:
    """Refuse curve indices ``start .. start+count-1`` that reach past ``MAX_INDEX - 1``, naming both
    arguments (``names``: how the caller spells them), before any curve is trained."""
    integer(names[0], start, low=0)
    integer(names[1], count, low=1)
    if start + count > MAX_INDEX:
        raise ValueError(f"{names[0]} {start} and {names[1]} {count} ask for curve indices up to {start + count - 1}; "
                         f"curve indices run from 0 to {MAX_INDEX - 1}")


def recipe_for(family: Family, split: str, index: int) -> Recipe:
    """The deterministic recipe of curve ``family/split/index``."""
    return draw_recipe(family.name, split, index, family.batch_sizes)


def run_recipe(family: Family, recipe: Recipe, n_batches: int, preset: str = "cpu", data_root: str | Path | None = None,
               device: str = "cpu") -> np.ndarray:
    """Train one curve and return its per-batch losses (float32) without touching any bank."""
    losses: list[float] = []
    family.train(recipe, n_batches, losses.append, preset, data_root, device)
    return np.asarray(losses, dtype=np.float32)


def regenerate(record: CurveRecord, n_batches: int | None = None, data_root: str | Path | None = None,
               device: str = "cpu") -> np.ndarray:
    """Re-run a stored curve's recorded recipe (the first ``n_batches``), e.g. to audit a shipped bank.

    Runs with one torch thread, as the generator does: CPU kernels sum in a thread-count-dependent order and
    training amplifies those last-bit differences within a few dozen batches.
    """
    recipe = Recipe(record.seed, record.data_seed, record.batch_size, record.lr)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return run_recipe(get_family(record.family), recipe, n_batches or record.length, record.preset, data_root,
                          device)
    finally:
        torch.set_num_threads(threads)


def recorder_for(writer: BankWriter, family: Family, split: str, index: int, recipe: Recipe, preset: str,
                 length: int, commit: str) -> CurveRecorder:
    """The recorder of curve ``family/split/index``: the record fields every generator path writes."""
    return CurveRecorder(writer.root, family.name, split, index, seed=recipe.seed, data_seed=recipe.data_seed,
                         batch_size=recipe.batch_size, lr=recipe.lr, preset=preset, source=family.dataset,
                         length=length, commit=commit, writer=writer)


def append_timing(timings: str | Path, family: str, split: str, index: int, batch_size: int, seconds: float,
                  device: str) -> None:
    """Append one JSON line with a finished curve's wall time (read by ``curves.datasheet --timings``)."""
    entry = {"family": family, "split": split, "index": index, "batch_size": batch_size,
             "seconds": round(seconds, 3), "device": device, "time": time.strftime("%Y-%m-%dT%H:%M:%S")}
    with open(timings, "a") as handle:
        handle.write(json.dumps(entry) + "\n")


def generate(family_name: str, split: str, count: int, bank: str | Path = DEFAULT_BANK, preset: str = "cpu",
             data_root: str | Path | None = None, device: str = "cpu", start: int = 0, progress: bool = True,
             timings: str | Path | None = None, length: int | None = None) -> int:
    """Ensure curves ``start .. start+count-1`` of ``family/split`` exist in ``bank``; returns how many were made.

    ``length`` overrides the family's curve length (twice its largest budget) for quick smoke-test banks;
    indices past ``MAX_INDEX - 1`` are refused (:func:`check_indices`).
    """
    family = get_family(family_name)
    check_indices(start, count)
    length = family.length if length is None else integer("length", length, low=1, high=MAX_LENGTH)
    writer = BankWriter(bank)
    declare_keeping_rules(writer, family.spec(preset))
    commit = generator_commit()
    todo = [i for i in range(start, start + count) if not writer.has(family.name, split, i)]
    bar = tqdm(todo, desc=f"{family.name}/{split}", unit="curve", disable=not progress, file=sys.stderr)
    for index in bar:
        recipe = recipe_for(family, split, index)
        began = time.perf_counter()
        with recorder_for(writer, family, split, index, recipe, preset, length, commit) as rec:
            family.train(recipe, length, rec.log, preset, data_root, device)
        seconds = time.perf_counter() - began
        if timings is not None:
            append_timing(timings, family.name, split, index, recipe.batch_size, seconds, device)
        bar.set_postfix(s_per_curve=f"{seconds:.1f}")
    return len(todo)


def bank_with_curves(bank: str | Path) -> int:
    """How many finished curves a bank's manifest lists (0 when it cannot be read): the "saved" of an
    interrupted command's last line."""
    try:
        return len(json.loads((Path(bank) / MANIFEST).read_text()).get("curves", []))
    except (OSError, ValueError, AttributeError):
        return 0


def add_generation_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags every curve-training command shares (``curves.generate``, ``curves.build_bank``), each
    checked as it is parsed: a refused value is a usage error naming the flag, before any work."""
    parser.add_argument("--bank", default=str(DEFAULT_BANK), type=argparse_type(writable_dir, "--bank"),
                        help="bank directory to add curves to")
    parser.add_argument("--preset", choices=PRESETS, default="cpu", help="model sizes: cpu (narrow) or paper")
    parser.add_argument("--data-root", default=None, type=argparse_type(existing_dir, "--data-root"),
                        help="folder with the paper's data or overrides")
    parser.add_argument("--device", default="cpu", type=argparse_type(torch_device, "--device"),
                        help="torch device, e.g. cuda")
    parser.add_argument("--threads", type=argparse_type(integer, "--threads", int, low=1, high=MAX_THREADS),
                        default=1, help="torch CPU threads (1 keeps runs reproducible)")
    parser.add_argument("--timings", default=None, type=argparse_type(writable_file, "--timings"),
                        help="append one JSON line per curve with its wall time")
    parser.add_argument("--length", type=argparse_type(integer, "--length", int, low=1, high=MAX_LENGTH),
                        default=None, help="override the curve length, ≥ 1 (smoke tests only; omit it for the "
                                           "family's length)")


def _parser() -> argparse.ArgumentParser:
    parser = Parser(prog="python -m curves.generate", description=__doc__.split("\n")[0])
    parser.add_argument("--family", required=True, choices=sorted(FAMILIES), help="task family to train")
    parser.add_argument("--split", required=True, choices=SPLITS, help="bank split the curves go to")
    parser.add_argument("--count", type=argparse_type(integer, "--count", int, low=1, high=MAX_INDEX),
                        required=True, help="number of curves (indices start..start+count-1)")
    parser.add_argument("--start", type=argparse_type(integer, "--start", int, low=0, high=MAX_INDEX), default=0,
                        help="first curve index")
    add_generation_arguments(parser)
    parser.add_argument("--no-progress", action="store_true", help="disable the progress bar")
    return parser


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; a missing dataset or an unusable bank is one line and exit status 2, an interruption
    exit status 130."""
    args = parse(_parser(), argv, lambda args: check_indices(args.start, args.count, ("--start", "--count")))
    if isinstance(args, int):
        return args
    before = bank_with_curves(args.bank)

    def work() -> int:
        torch.set_num_threads(args.threads)
        made = generate(args.family, args.split, args.count, args.bank, args.preset, args.data_root, args.device,
                        args.start, not args.no_progress, args.timings, args.length)
        print(f"{args.family}/{args.split}: {made} new curve(s) in {args.bank}", file=sys.stderr)
        return 0

    return run_command(work, FILE_ERRORS,
                       lambda: f"{bank_with_curves(args.bank) - before} new curve(s) saved in {args.bank}; run the "
                               f"same command again to resume")


if __name__ == "__main__":
    raise SystemExit(main())
