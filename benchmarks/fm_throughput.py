"""FM inference throughput at the batch sizes its callers send (``python -m benchmarks.fm_throughput``).

The predictor benchmark (:mod:`mara_agents.predictors.bench`) times one call over a whole task set (over a
thousand prefixes); the environment's callers send far smaller batches — the evaluation's lock-step play one
call per step with the new prefixes of 60 episodes (a few hundred), MAT training one per vector step, a single
environment at most K.  This prints milliseconds per call and microseconds per prefix of
:meth:`FlowMatchingPredictor.predict` at such sizes, on prefixes drawn (with a fixed seed) from the shipped
bank's ID benchmark queries, at the paper's 8 samples × 4 Euler steps, with CPU seconds beside wall seconds
so that a busy machine shows.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

import numpy as np
import torch

from mara_common import checks
from curves.bank import DEFAULT_BANK, BankError, load_bank
from mara_agents.play.checkpoints import CheckpointError
from mara_common.checks import MAX_THREADS
from mara_common.cli import run_command
from mara_agents.predictors.base import PredictorQuery
from mara_agents.predictors.bench import build_queries
from mara_agents.predictors.fm.predictor import DEFAULT_CHECKPOINT, FlowMatchingPredictor, load_predictor

ROWS = (1, 8, 64, 350)
MAX_ROWS = 100_000  # prefixes per call: FM's per-call memory grows with it


def sample_query(query: PredictorQuery, rows: int, seed: int = 0) -> PredictorQuery:
    """``rows`` prefixes of ``query`` picked by a fixed permutation (with repetition if it has fewer)."""
    order = np.random.default_rng(seed).permutation(len(query))
    return query.subset(np.resize(order, rows))


def time_calls(predictor: FlowMatchingPredictor, query: PredictorQuery, calls: int,
               repeats: int) -> tuple[float, float]:
    """Best (wall, CPU) seconds per call over ``repeats`` rounds of ``calls`` calls, after one warm-up call."""
    predictor.predict(query)
    wall, cpu = float("inf"), float("inf")
    for _ in range(repeats):
        start_wall, start_cpu = time.perf_counter(), time.process_time()
        for _ in range(calls):
            predictor.predict(query)
        wall = min(wall, (time.perf_counter() - start_wall) / calls)
        cpu = min(cpu, (time.process_time() - start_cpu) / calls)
    return wall, cpu


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line settings."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fm_throughput",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=checks.argparse_type(checks.integer, None, int, low=1, high=MAX_ROWS),
                        nargs="+", default=list(ROWS), help=f"prefixes per call (at most {MAX_ROWS})")
    parser.add_argument("--repeats", type=checks.argparse_type(checks.integer, None, int, low=1, high=1000),
                        default=5, help="timed rounds per size (the best is printed)")
    parser.add_argument("--seconds", type=checks.argparse_type(checks.number, None, float, low=0.0, high=3600.0,
                                                               low_open=True),
                        default=0.5, help="about how long one round lasts")
    parser.add_argument("--threads", type=checks.argparse_type(checks.integer, None, int, low=1,
                                                               high=MAX_THREADS), default=1, help="torch CPU threads")
    parser.add_argument("--checkpoint", default=str(DEFAULT_CHECKPOINT),
                        type=checks.argparse_type(checks.existing_file), help="FM checkpoint")
    parser.add_argument("--unverified", action="store_true",
                        help="accept a --checkpoint without a manifest to verify it against")
    parser.add_argument("--bank", default=str(DEFAULT_BANK), type=checks.argparse_type(checks.existing_dir),
                        help="curve bank whose ID test curves give the prefixes")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> list[tuple[int, float, float]]:
    """Print one line per batch size: ms per call and µs per prefix, wall and CPU; return (rows, wall, CPU)."""
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    predictor = load_predictor(args.checkpoint, verify=not args.unverified)
    queries = build_queries(load_bank(args.bank), "ID")
    if queries is None:
        raise SystemExit(f"error: the bank {args.bank} has no calibrated ID test curves to draw prefixes from")
    print(f"FM predict, {predictor.n_samples} samples × {predictor.euler_steps} Euler steps, "
          f"{args.threads} torch thread(s)")
    print("| prefixes per call | ms per call (wall) | ms per call (CPU) | µs per prefix (CPU) |")
    print("|---:|---:|---:|---:|")
    results = []
    for rows in args.rows:
        query = sample_query(queries.query, rows)
        start = time.perf_counter()
        predictor.predict(query)
        calls = max(1, int(args.seconds / max(time.perf_counter() - start, 1e-6)))
        wall, cpu = time_calls(predictor, query, calls, args.repeats)
        print(f"| {rows} | {1e3 * wall:.2f} | {1e3 * cpu:.2f} | {1e6 * cpu / rows:.1f} |")
        results.append((rows, wall, cpu))
    return results


def run(argv: Sequence[str] | None = None) -> int:
    """:func:`main` as a command: exit status 0, 2 with one line for an unusable bank or checkpoint."""
    return run_command(lambda: main(argv), (BankError, CheckpointError, OSError), "stopped")


if __name__ == "__main__":
    sys.exit(run())
