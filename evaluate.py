"""Evaluate allocators on the fixed evaluation workloads and print the success-rate table.

    python evaluate.py                      # FIFO and EDF next to the Oracle bound, p = 0.04, all task sets
    python evaluate.py --methods fifo edf random --loads 0.04 0.07 --quick

Success rates follow the paper's statistic: per-episode rate → mean over each root's episodes → mean ± sample
standard deviation across the 5 roots.  The Oracle is independent feasibility (paper §5.1), not a policy.
"""

from __future__ import annotations

import argparse
import sys
import time

from mara_agents import POLICIES, make_policy
from mara_agents.runner import evaluate_workload, summarise
from mara_env.fixed_workloads import EPISODES_PER_ROOT, EVAL_TASK_SETS, ROOTS, workload_path
from mara_env.workload import WorkloadError
from curves.bank import BankError


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", nargs="+", default=["fifo", "edf"], choices=sorted(POLICIES))
    parser.add_argument("--task-sets", nargs="+", default=[*EVAL_TASK_SETS, "stress"],
                        choices=[*EVAL_TASK_SETS, "stress"])
    parser.add_argument("--loads", nargs="+", type=float, default=[0.04], choices=[0.04, 0.05, 0.06, 0.07])
    parser.add_argument("--roots", type=int, default=ROOTS, help="evaluation roots to use (first N)")
    parser.add_argument("--episodes", type=int, default=EPISODES_PER_ROOT, help="episodes per root (first N)")
    parser.add_argument("--quick", action="store_true", help="2 roots x 2 episodes: a smoke test")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.quick:
        args.roots, args.episodes = 2, 2
    cells = [(ts, None) if ts == "stress" else (ts, load) for ts in args.task_sets
             for load in (args.loads if ts != "stress" else [None])]
    start = time.perf_counter()
    header = f"{'task set':<10} {'load':>5}" + "".join(f"{m.upper():>16}" for m in args.methods) + f"{'Oracle':>16}"
    print(f"Success rate (%), mean ± sample std over {args.roots} roots × {args.episodes} episodes")
    print(header)
    print("-" * len(header))
    for task_set, load in cells:
        path = workload_path(task_set, load)
        selected = [r * EPISODES_PER_ROOT + e for r in range(args.roots) for e in range(args.episodes)]
        line = f"{task_set:<10} {'-' if load is None else f'{load:.2f}':>5}"
        rows = []
        for method in args.methods:
            rows = evaluate_workload(make_policy(method), path, episodes=selected)
            mean, std = summarise(rows)
            line += f"{100 * mean:>9.2f} ± {100 * std:<4.2f}"
        mean, std = summarise(rows, "oracle_rate")
        print(line + f"{100 * mean:>9.2f} ± {100 * std:<4.2f}", flush=True)
    print(f"\nwall time {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (WorkloadError, BankError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
