"""The choice of the learned allocator with the abandon action on ``val`` (``docs/research/abandon_rules.md``):
``python -m studies.abandon_learner CHECKPOINT ...``.

Plays each candidate checkpoint (a MAT with the abandon head) and ``slack-fm+abandon`` on the same small ``id``
workloads drawn from ``val`` curves at p = 0.04 and p = 0.07, in the ``abandon=True`` env, and prints per load
the mean success rate, wasted node-steps, abandoned and abandoned-but-feasible tasks, each candidate's success
minus ``slack-fm+abandon``'s, and the choice under the documented rule (the highest mean success rate over the
loads; within half a point, the candidate named first). No ``test`` curve is touched.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from curves.bank import DEFAULT_BANK
from mara_agents.allocators.registry import make_policy
from mara_agents.mat.policy import load_mat_policy
from mara_agents.training.validation import VALIDATION_SEED, validation_workload
from studies.abandon_rules import COLUMNS, LOADS, choose, mean_success, measure

BASELINE = "slack-fm+abandon"
SEED_BASE = VALIDATION_SEED + 3  # fresh val episodes: rounds 1-3 of the thresholds drew + 0, + 1 and + 2


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m studies.abandon_learner", description=__doc__)
    parser.add_argument("checkpoints", nargs="+", help="candidate MAT checkpoints with the abandon head, lowest "
                                                       "seed first (ties go to the first)")
    parser.add_argument("--bank", default=str(DEFAULT_BANK), help="curve bank (its val curves are played)")
    parser.add_argument("--roots", type=int, default=3, help="workload roots per load")
    parser.add_argument("--episodes", type=int, default=4, help="episodes per root")
    parser.add_argument("--seed-base", type=int, default=SEED_BASE, help="seed base of the val workloads")
    args = parser.parse_args(argv)
    if args.roots < 1 or args.episodes < 1:
        parser.error("--roots and --episodes must be positive")
    missing = [path for path in args.checkpoints if not Path(path).is_file()]
    if missing:
        parser.error(f"no checkpoint file {missing[0]!r}")
    with tempfile.TemporaryDirectory() as tmp:
        workloads = {load: validation_workload(Path(tmp) / f"val_id_p{load:g}.json", args.bank, "id", load,
                                               args.roots, args.episodes, args.seed_base) for load in LOADS}
        runs = {BASELINE: measure(make_policy(BASELINE), workloads, args.bank)}
        for path in args.checkpoints:
            runs[path] = measure(load_mat_policy(path), workloads, args.bank)
    print(f"val, id task set, {args.roots} roots x {args.episodes} episodes per load, seed base {args.seed_base}")
    for label, means in runs.items():
        print(f"  {label}: mean success {mean_success(means):.4f}")
        for load in LOADS:
            gain = 100 * (means[load]["success_rate"] - runs[BASELINE][load]["success_rate"])
            cells = " ".join(f"{column}={means[load][column]:.3f}" for column in COLUMNS)
            print(f"    p={load:g}: {cells}  success minus {BASELINE}: {gain:+.2f} points")
    scores = [mean_success(runs[path]) for path in args.checkpoints]
    print(f"chosen: {choose(args.checkpoints, scores)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
