"""The abandon thresholds on ``val`` (``docs/research/abandon_rules.md``): ``python -m studies.abandon_rules``.

Plays each abandoning allocator of :data:`mara_agents.allocators.abandon.ABANDONING` at every candidate threshold,
and its base allocator without abandoning, on small ``id`` workloads drawn from ``val`` curves, in the
``abandon=True`` env, and prints per load the mean success rate, wasted node-steps, abandoned and
abandoned-but-feasible tasks; then each allocator's choice under the documented rule (highest mean success rate
over the loads, ties within half a point to the most conservative candidate). No ``test`` curve is touched.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from curves.bank import DEFAULT_BANK
from mara_agents.allocators.abandon import ABANDONING, make_abandoning_policy
from mara_agents.allocators.registry import make_policy
from mara_agents.training.validation import VALIDATION_SEED, validation_workload
from mara_agents.play.lockstep import evaluate_workload

LOADS = (0.04, 0.07)
BASES = {"slack-fm+abandon": "slack-fm", "lara+abandon": "lara", "edf+abandon": "edf"}
COLUMNS = ("success_rate", "wasted_node_steps", "abandoned", "abandoned_feasible")
TIE = 0.005  # half a point of success rate


def measure(policy, workloads: dict[float, Path], bank: str) -> dict[float, dict[str, float]]:
    """Per load, the mean of each of :data:`COLUMNS` over the workload's episodes (abandon=True env)."""
    means = {}
    for load, path in workloads.items():
        rows = evaluate_workload(policy, path, bank=bank, abandon=True)
        means[load] = {column: float(np.nanmean([row[column] for row in rows])) for column in COLUMNS}
    return means


def mean_success(means: dict[float, dict[str, float]]) -> float:
    """The mean success rate over the loads, weighted alike."""
    return float(np.mean([means[load]["success_rate"] for load in LOADS]))


def choose(candidates: Sequence[float], scores: Sequence[float]) -> float:
    """The documented rule: the best mean success rate; within :data:`TIE` of it, the first (most conservative)."""
    best = max(scores)
    return next(value for value, score in zip(candidates, scores) if score >= best - TIE)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m studies.abandon_rules", description=__doc__)
    parser.add_argument("--bank", default=str(DEFAULT_BANK), help="curve bank (its val curves are played)")
    parser.add_argument("--roots", type=int, default=2, help="workload roots per load")
    parser.add_argument("--episodes", type=int, default=2, help="episodes per root")
    parser.add_argument("--only", choices=sorted(ABANDONING), action="append", help="allocators to play (all)")
    parser.add_argument("--seed-base", type=int, default=VALIDATION_SEED,
                        help="seed base of the val workloads (round 2: VALIDATION_SEED + 1, round 3: + 2)")
    parser.add_argument("--make-room", action="store_true",
                        help="round 3: play the candidates with make_room=True beside the current choice")
    args = parser.parse_args(argv)
    if args.roots < 1 or args.episodes < 1:
        parser.error("--roots and --episodes must be positive")
    with tempfile.TemporaryDirectory() as tmp:
        workloads = {load: validation_workload(Path(tmp) / f"val_id_p{load:g}.json", args.bank, "id", load,
                                               args.roots, args.episodes, args.seed_base) for load in LOADS}
        for name in args.only or sorted(ABANDONING):
            _, _, candidates, _, _ = ABANDONING[name]
            runs = {"no abandon": measure(make_policy(BASES[name]), workloads, args.bank)}
            if args.make_room:
                runs["current choice"] = measure(make_abandoning_policy(name), workloads, args.bank)
            for value in candidates:
                runs[f"threshold {value:g}"] = measure(make_abandoning_policy(name, value, args.make_room),
                                                       workloads, args.bank)
            print(f"\n{name} (val, {args.roots} roots x {args.episodes} episodes per load)")
            for label, means in runs.items():
                cells = "  ".join(f"p={load:g}: " + " ".join(f"{column}={means[load][column]:.3f}" for column in COLUMNS)
                                  for load in LOADS)
                print(f"  {label:<16} {cells}")
            scores = [mean_success(runs[f"threshold {value:g}"]) for value in candidates]
            print(f"  chosen threshold: {choose(candidates, scores):g}"
                  + (f" (make_room; the current choice scores {mean_success(runs['current choice']):.4f} against "
                     f"{max(scores):.4f})" if args.make_room else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
