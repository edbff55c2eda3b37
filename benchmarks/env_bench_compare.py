"""This checkout's environment speed against another's, side by side:
``python -m benchmarks.env_bench_compare OTHER_CHECKOUT [--repeat 3] [--steps N] [--bank DIR]``.

A change to the simulators must keep their speed, but on a shared machine two bench runs minutes apart
differ by more than the change does. This command runs the core figures of :mod:`benchmarks.env_bench` — the
Gymnasium env with the precomputed matching and with the FIFO rule, the native vector env at N = 1 and
N = 64 with the precomputed matching, and at N = 64 in the ``flat`` format with ``conflicts="repair"`` — in
one subprocess per checkout, alternating the two checkouts ``--repeat`` times (the order flips every round),
and prints per figure the median rate per CPU second of each checkout and their ratio (this / other).

The subprocesses call only ``single_env``, ``vector_env`` and ``fifo_picks`` of :mod:`benchmarks.env_bench`, so
an older checkout that has them can be compared. Bad arguments print one line and exit with status 2.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from mara_common.checks import argparse_type, existing_dir, integer
from mara_common.cli import Parser

THIS_CHECKOUT = Path(__file__).resolve().parents[1]
# Run in each checkout: the figures as {name: env steps per CPU second}, one JSON line.
_FIGURES = r"""
import json, sys
try:
    from benchmarks import env_bench as bench
except ImportError:  # a checkout from before the benchmarks left the mara_env package
    from mara_env import bench
bank, steps, whole = (sys.argv[1] or None), int(sys.argv[2]), int(sys.argv[3])
rates = {}
def rate(name, timed, count):
    rates[name] = timed.per_second(count)[1]
rate("gym env, precomputed", bench.single_env(bank, None, steps), steps)
rate("gym env, FIFO rule", bench.single_env(bank, bench.fifo_picks, steps), steps)
for n in (1, 64):
    vector_steps = max(steps // n, whole)
    rate(f"vector env N={n}, precomputed", bench.vector_env(bank, n, None, vector_steps), vector_steps * n)
vector_steps = max(steps // 64, whole)
rate("vector env N=64, flat+repair", bench.vector_env(bank, 64, None, vector_steps, observation="flat",
                                                        conflicts="repair"), vector_steps * 64)
print(json.dumps(rates))
"""


def figures(checkout: Path, bank: str | None, steps: int) -> dict[str, float]:
    """The core figures of the code in ``checkout`` (a subprocess with that checkout first on the path)."""
    from mara_env.config import MARAConfig

    whole_episodes = 3 * MARAConfig().arrival_window  # as the bench: every sub-env plays whole episodes
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(checkout), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", _FIGURES, bank or "", str(steps), str(whole_episodes)],
                          cwd=checkout, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"the figures of {checkout} failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def compare(other: Path, repeat: int, steps: int, bank: str | None) -> list[str]:
    """The table's lines: per figure, each checkout's median CPU-second rate over ``repeat`` alternating
    rounds and the ratio this / other."""
    runs: dict[Path, list[dict[str, float]]] = {THIS_CHECKOUT: [], other: []}
    for round_ in range(repeat):
        order = (other, THIS_CHECKOUT) if round_ % 2 == 0 else (THIS_CHECKOUT, other)
        for checkout in order:
            runs[checkout].append(figures(checkout, bank, steps))
    lines = [f"{'figure (env steps per CPU second)':34s} {'other':>11s} {'this':>11s}  this/other",
             f"(other: {other}; this: {THIS_CHECKOUT}; median of {repeat} alternating runs each)"]
    for name in runs[other][0]:
        theirs = statistics.median(figures_[name] for figures_ in runs[other])
        ours = statistics.median(figures_[name] for figures_ in runs[THIS_CHECKOUT])
        lines.append(f"{name:34s} {theirs:11,.0f} {ours:11,.0f}  {ours / theirs:10.3f}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = Parser(description="this checkout's env speed against another checkout's, side by side")
    parser.add_argument("other", type=argparse_type(existing_dir), help="the other checkout's root directory")
    parser.add_argument("--repeat", type=argparse_type(integer, None, int, low=1, high=100), default=3,
                        help="alternating runs of each checkout (the median is shown)")
    parser.add_argument("--steps", type=argparse_type(integer, None, int, low=1000, high=10**8), default=20000,
                        help="env steps per single-env figure (>= 1000)")
    parser.add_argument("--bank", default=None, type=argparse_type(existing_dir),
                        help="curve bank directory (default: the shipped bank)")
    args = parser.parse_args(argv)
    other = Path(args.other).resolve()
    if not any((other / path).is_file() for path in ("benchmarks/env_bench.py", "mara_env/bench.py")):
        parser.error(f"other: {args.other!r} is not a MARA checkout (it has no benchmarks/env_bench.py)")
    for line in compare(other, args.repeat, args.steps, args.bank):
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
