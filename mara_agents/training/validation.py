"""Checkpoint selection for MAT: score the greedy policy on fixed validation workloads of ``val`` curves.

PPO's policy quality moves up and down from update to update, and the training return is computed on
sampled actions while evaluation decodes greedily, so neither "the last update" nor "the best training
return" reliably picks a good policy.  Instead training scores the greedy policy every few thousand env
steps on fixed workloads drawn from the bank's ``val`` curves (never the ``test`` curves behind the
evaluation workloads) and exports the best-scoring model.  The workloads are the two situations the paper
evaluates a scheduler in — the training mixture at the training load, and the infeasible-task stress
construction (§5.4) — and the score weighs them equally: a policy trained on mixtures alone can do well there
while still serving hopeless tasks to their deadlines, which the mixture episodes rarely punish.  Each
workload is drawn from its own seed, once per run, and saved in the run directory so a resumed run scores
against the same episodes.

**Checking a checkpoint after training** (``python -m mara_agents.training.validation TARGET ...``): scores
shipped or freshly trained checkpoints, or registered methods for reference, on a second pair of workloads
drawn from ``val`` curves with another seed (:data:`CHECK_SEED`), so no run ever selected a checkpoint on
them.  It prints the mixture success rate, the stress success rate and in how many stress episodes every
feasible task finished, and lists the others by root and episode so they can be traced: the numbers to decide
a training change on without looking at a ``test`` curve.  Stress episodes are cheap, so ``--stress-only``
with many episodes can resolve miss rates far below what the default 48 episodes can.  ``--num-nodes``,
``--node-speeds`` and ``--switch-cost`` play the check in a setting beyond the paper, the one the checkpoints
were trained for.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch

from mara_common import checks
from curves.bank import DEFAULT_BANK, load_bank
from mara_agents.mat.policy import MATPolicy, load_mat_policy
from mara_agents.allocators.registry import POLICIES, make_policy
from mara_agents.play.checkpoints import CheckpointError, bank_checksum
from mara_common.config_cli import integer_list
from mara_agents.mat.checkpoint import load_policy
from mara_agents.mat.ensemble import load_mat_ensemble
from mara_agents.mat.model import MATModel
from mara_agents.mat.setting import Setting
from mara_agents.play.policy import Policy
from mara_agents.predictors.base import Predictor
from mara_agents.play.lockstep import evaluate_workload
from mara_env.fixed_workloads import build_workload
from mara_env.tasksets import TASK_SETS
from mara_env.workload import save_workload

VALIDATION_SPLITS = ("val",)
VALIDATION_SEED = 20261202  # distinct from the evaluation workloads' seed base
CHECK_SEED = 777  # the check workloads: val curves too, but never used to select a checkpoint
LISTED_MISSES = 10  # incomplete stress episodes listed per target (a policy that misses everywhere would flood)


def validation_workload(path: Path, bank: str, task_set: str, load: float, roots: int, episodes: int,
                        seed_base: int = VALIDATION_SEED) -> Path:
    """The run's validation workload file: drawn once from ``val`` curves, then reused (also on resume)."""
    if not path.exists():
        drawn = build_workload(load_bank(bank), task_set, load, roots=roots, episodes=episodes,
                               splits=VALIDATION_SPLITS, seed_base=seed_base)
        save_workload(path, drawn)
    return path


def validation_score(model: MATModel, predictor: Predictor, workloads: Sequence[Path], bank: str,
                     **options: Any) -> float:
    """Mean over the workloads of the greedy policy's mean success rate on each (episodes in lock-step), played
    with the env ``options`` (the run's setting, :meth:`~mara_agents.mat.setting.Setting.options`)."""
    was_training = model.training
    policy = MATPolicy(model, predictor)
    scores = [np.nanmean([row["success_rate"] for row in evaluate_workload(policy, path, bank=bank, **options)])
              for path in workloads]
    model.train(was_training)
    return float(np.mean(scores))


class CheckResult(NamedTuple):
    """One target's check figures; ``mixture`` is NaN when the mixture was skipped."""

    mixture: float  # mean success rate (%)
    stress: float  # mean success rate (%)
    episodes: int  # stress episodes played
    incomplete: list[tuple[int, int, int, int]]  # (root, episode, successes, feasible) of those missing a task

    @property
    def complete(self) -> int:
        """Stress episodes in which every independently feasible task finished."""
        return self.episodes - len(self.incomplete)


def check_scores(policy: Policy, mixture: Path | None, stress: Path, bank: str,
                 setting: Setting = Setting()) -> CheckResult:
    """Mixture and stress success rates, and which stress episodes left a feasible task unfinished, played in
    ``setting``."""
    options = setting.options()
    mixed = float("nan") if mixture is None else 100 * float(np.nanmean(
        [row["success_rate"] for row in evaluate_workload(policy, mixture, bank=bank, **options)]))
    stressed = evaluate_workload(policy, stress, bank=bank, **options)
    incomplete = [(int(row["root"]), int(row["episode"]), int(row["successes"]), int(row["oracle_successes"]))
                  for row in stressed if row["successes"] < row["oracle_successes"]]
    return CheckResult(mixed, 100 * float(np.mean([row["success_rate"] for row in stressed])), len(stressed),
                       incomplete)


def _target_policy(target: str, verify: bool = True, setting: Setting = Setting()) -> Policy:
    """A registered method name, the path of an exported MAT checkpoint, or paths joined by ``+`` (an ensemble);
    ``verify=False`` accepts checkpoints without a manifest.  A checkpoint trained in another setting than the
    check's is refused, naming both."""
    if target in POLICIES:
        return make_policy(target)
    paths = target.split("+")
    missing = [path for path in paths if not Path(path).is_file()]
    if missing:
        raise ValueError(f"{missing[0]!r} is neither a registered method ({', '.join(sorted(POLICIES))}) "
                         "nor an existing MAT checkpoint file")
    trained = load_policy(paths[0], verify=verify).setting
    if trained is not None and trained != setting:
        raise ValueError(f"{paths[0]} was trained in {trained.describe()}, the check plays {setting.describe()}; "
                         f"add {trained.flags()}")
    return load_mat_policy(target, verify=verify) if len(paths) == 1 else load_mat_ensemble(paths, verify=verify)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The check's command line; a bad value exits with status 2 and one line naming it."""
    parser = argparse.ArgumentParser(prog="python -m mara_agents.training.validation",
                                     description="Score MAT checkpoints (or registered methods) on check workloads "
                                                 "drawn from val curves; no test curve is touched.")
    parser.add_argument("targets", nargs="+", help="checkpoint .pt files, method names (fifo, lara, mara, ...) or "
                                                   "checkpoints joined by '+' (decoded as one ensemble)")
    parser.add_argument("--bank", default=str(DEFAULT_BANK), type=checks.argparse_type(checks.existing_dir),
                        help="curve bank directory")
    parser.add_argument("--dir", default="runs/check", type=checks.argparse_type(checks.writable_dir),
                        help="where the check workload files are drawn once and kept")
    parser.add_argument("--unverified", action="store_true",
                        help="accept checkpoints without a manifest to verify them against")
    parser.add_argument("--task-set", default="id", help="task set of the mixture workload (default: id)")
    parser.add_argument("--load", type=checks.argparse_type(checks.number, None, float, low=0.0, high=1.0),
                        default=0.04, help="arrival load p of the mixture (default: 0.04)")
    parser.add_argument("--roots", type=int, default=4, help="roots of each workload (default: 4)")
    parser.add_argument("--episodes", type=int, default=12, help="episodes per root (default: 12)")
    parser.add_argument("--seed-base", type=int, default=CHECK_SEED,
                        help=f"seed base of the check workloads (default: {CHECK_SEED}; never {VALIDATION_SEED}, the "
                             "runs' selection seed)")
    parser.add_argument("--stress-only", action="store_true",
                        help="skip the mixture: stress episodes are cheap, so large stress checks (e.g. --roots 10 "
                             "--episodes 60) can find rare misses")
    parser.add_argument("--num-nodes", type=int, default=Setting().num_nodes,
                        help="M: the setting to play in, as the targets were trained (default: 7)")
    parser.add_argument("--node-speeds", type=integer_list, default=None, metavar="INT,INT,...",
                        help="batches each node runs per step (default: all 1)")
    parser.add_argument("--switch-cost", type=int, default=0, help="switching cost c (default: 0)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch CPU threads (default 1: the models are small, and parallel checks then do not "
                             "fight over cores)")
    args = parser.parse_args(argv)
    if args.roots < 1 or args.episodes < 1 or args.threads < 1:
        parser.error("--roots, --episodes and --threads must be ≥ 1")
    if args.task_set not in TASK_SETS:
        parser.error(f"unknown task set {args.task_set!r}; choose one of {sorted(TASK_SETS)}")
    if args.seed_base == VALIDATION_SEED:
        parser.error(f"--seed-base {VALIDATION_SEED} draws the episodes training selects checkpoints on; pick another")
    try:
        args.setting = Setting(args.num_nodes, args.node_speeds, args.switch_cost)
    except (TypeError, ValueError) as error:
        parser.error(str(error))
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Print one row of check scores per target."""
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    directory = Path(args.dir)
    directory.mkdir(parents=True, exist_ok=True)
    try:
        tag = f"{args.roots}x{args.episodes}_seed{args.seed_base}_bank{bank_checksum(args.bank)[:10]}"
        mixture = None if args.stress_only else validation_workload(
            directory / f"{args.task_set}_p{args.load:g}_{tag}.json", args.bank, args.task_set, args.load,
            args.roots, args.episodes, args.seed_base)
        stress = validation_workload(directory / f"stress_{tag}.json", args.bank, "stress", 0.0, args.roots,
                                     args.episodes, args.seed_base)
        policies = [(target, _target_policy(target, not args.unverified, args.setting)) for target in args.targets]
    except (ValueError, OSError, CheckpointError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    drawn = " and ".join(str(path) for path in (mixture, stress) if path is not None)
    print(f"check workloads (val curves, seed base {args.seed_base}): {drawn}")
    print(f"{'target':<48} {'mixture %':>9} {'stress %':>9} {'stress complete':>16}")
    misses = []
    for target, policy in policies:
        result = check_scores(policy, mixture, stress, args.bank, args.setting)
        mixed = f"{result.mixture:>9.2f}" if mixture is not None else f"{'-':>9}"
        print(f"{target:<48} {mixed} {result.stress:>9.2f} {result.complete:>9d} of {result.episodes}", flush=True)
        if result.incomplete:
            listed = ", ".join(f"{root}/{episode} ({done} of {feasible})"
                               for root, episode, done, feasible in result.incomplete[:LISTED_MISSES])
            more = len(result.incomplete) - LISTED_MISSES
            misses.append(f"  {target}: {listed}" + (f" and {more} more" if more > 0 else ""))
    if misses:
        print("stress episodes (root/episode) that left a feasible task unfinished (successes of feasible):")
        print("\n".join(misses))
    return 0


if __name__ == "__main__":
    sys.exit(main())
