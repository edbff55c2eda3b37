"""Latency of greedy MAT decoding: ``python -m benchmarks.decode_bench [--batches 1,4,32] [--out F]``.

The evaluation calls the decoder once per lock-step of a unit with the contended observations of its running
episodes, a few rows at a time, so what matters is the latency of one call on a small batch, which is bound by
per-operation overhead rather than arithmetic.  For each batch size this prints milliseconds per
``act`` call (best of several repeats, one torch thread, ``torch.inference_mode`` as ``MATPolicy`` decodes):

* *one model*: a single shipped member (``mat_il_ens_member0.pt``);
* *members one by one*: three single-model decodes, what decoding the ensemble's members one after the other
  costs;
* *ensemble, grouped*: ``MATEnsemble`` over members 0–2 (each member encodes on its own, their decoder rows run
  together over stacked weights, :mod:`mara_agents.mat.grouped`).

Inputs are random tokens of the shipped model's shape (occupied slots, features, FM-slack ranks): decoding
costs the same whatever the values.  Nothing is written unless ``--out`` is given.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence

import torch

from mara_common import checks
from mara_common.atomic import atomic_write_text
from mara_agents.allocators.registry import CHECKPOINT_DIR, ensemble_members
from mara_agents.mat.checkpoint import load_policy_model
from mara_agents.mat.ensemble import MATEnsemble
from mara_agents.mat.model import MATHyperParameters
from mara_agents.mat.lean_decoder import random_tokens


def best_milliseconds(call: Callable[[], object], calls: int, repeats: int) -> float:
    """The fastest of ``repeats`` timings of ``calls`` calls, in milliseconds per call (after a warm-up)."""
    for _ in range(max(1, calls // 5)):
        call()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            call()
        best = min(best, (time.perf_counter() - start) / calls)
    return best * 1e3


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.decode_bench",
                                     description="Milliseconds per greedy MAT decode: one model, an ensemble's "
                                                 "members one by one, and the grouped ensemble.")
    parser.add_argument("--batches", default="1,4,32", help="comma-separated batch sizes (rows per call)")
    parser.add_argument("--calls", type=int, default=100, help="calls per timing")
    parser.add_argument("--repeats", type=int, default=5, help="timings per figure (the best is kept)")
    parser.add_argument("--out", type=checks.argparse_type(checks.writable_file), default=None,
                        help="also write the lines to this file")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; returns the exit status (2 with one line on stderr for bad settings)."""
    args = parse_args(argv)
    try:
        batches = [int(part) for part in args.batches.split(",")]
        if min(batches) < 1 or args.calls < 1 or args.repeats < 1:
            raise ValueError
    except ValueError:
        print(f"error: --batches must be positive integers joined by ',' and --calls, --repeats ≥ 1, got "
              f"{args.batches!r}, {args.calls}, {args.repeats}", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    paths = ensemble_members("mat-il-ens", 0)
    missing = [path for path in paths if not path.exists()]
    if missing:
        print(f"error: shipped ensemble member not found: {missing[0]} (under {CHECKPOINT_DIR})", file=sys.stderr)
        return 2
    members = [load_policy_model(path, "cpu")[0].eval() for path in paths]
    ensemble = MATEnsemble(members).eval()
    lines = [f"greedy MAT decoding, ms per act call (best of {args.repeats} x {args.calls} calls, 1 torch thread); "
             f"members: {', '.join(path.name for path in paths)}",
             f"{'rows':>5} {'one model':>10} {'members one by one':>19} {'ensemble, grouped':>18}"]
    print("\n".join(lines), flush=True)
    with torch.inference_mode():
        for batch in batches:
            tokens = random_tokens(members[0].hparams, batch, torch.Generator().manual_seed(0))
            one = best_milliseconds(lambda: members[0].act(tokens), args.calls, args.repeats)
            one_by_one = best_milliseconds(lambda: [member.act(tokens) for member in members], args.calls,
                                           args.repeats)
            grouped = best_milliseconds(lambda: ensemble.act(tokens), args.calls, args.repeats)
            lines.append(f"{batch:>5} {one:>10.2f} {one_by_one:>19.2f} {grouped:>18.2f}")
            print(lines[-1], flush=True)
    if args.out:
        atomic_write_text(args.out, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
