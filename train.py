"""Train MARA's two stages: ``python train.py fm …`` (the flow-matching predictor, stage I) and
``python train.py mat --seed S [--predictor fm|wls] [--reward shaped|sparse] [--steps 100000] [--device cuda]``
(the MAT allocator, stage II); ``python train.py mat-il --seed S`` trains MAT-IL, our imitation recipe for the
same allocator (not the paper's; ``docs/learned_allocator.md``).  ``python train.py {fm,mat,mat-il} --help``
lists every setting; each command line is generated from the stage's settings dataclasses
(:class:`~mara_agents.predictors.train.FMTrainConfig`, :class:`~mara_agents.mat.config.MATTrainConfig`,
:class:`~mara_agents.mat.il_train.MATILConfig`), which check every setting — paths included — before any
training starts.  A bad setting or an unusable file is one line on stderr and exit status 2; SIGINT or SIGTERM
saves what can be resumed and exits with status 130, saying where (:mod:`mara_agents.interrupt`)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path

USAGE = ("usage: python train.py {fm,mat,mat-il} [options]   (python train.py fm --help, python train.py mat --help, "
         "python train.py mat-il --help)")


def _resume_note(state: Path) -> Callable[[], str]:
    """What an interrupted run kept: its resumable state, if one was written."""
    def note() -> str:
        if state.is_file():
            return f"the training state is saved in {state}; run the same command again to resume"
        return "no training state was saved yet; the next run starts afresh"
    return note


def main(argv: Sequence[str] | None = None) -> int:
    """Dispatch to the stage's trainer; returns the exit status."""
    from curves.bank import BankError
    from mara_agents.checkpoint_io import CheckpointError
    from mara_agents.interrupt import run_command
    from mara_env.workload import WorkloadError

    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in ("fm", "mat", "mat-il"):
        print(USAGE, file=sys.stderr)
        return 2
    stage, rest = args[0], args[1:]
    errors = (ValueError, OSError, CheckpointError, BankError, WorkloadError)
    if stage == "fm":
        from mara_agents.predictors.train import parse_config as parse_fm, report, train as train_fm
        config = parse_fm(rest)
        return run_command(lambda: report(train_fm(config)), errors, _resume_note(Path(config.run_dir) / "last.pt"))
    if stage == "mat-il":
        from mara_agents.mat.il_train import parse_config as parse_il, train_il
        il_config = parse_il(rest)

        def run_il() -> int:
            result = train_il(il_config)
            print(f"MAT-IL checkpoint {result.checkpoint} (+ .json manifest); {result.global_step} env steps, "
                  f"{result.seconds:.0f} s wall, {result.steps_per_second:.0f} env steps/s while collecting")
            return 0
        kept = il_config.out_path
        return run_command(run_il, errors, lambda: "MAT-IL does not resume; " + (
            f"the best policy so far is {kept}" if kept.is_file() else "no policy was exported yet"))
    from mara_agents.mat.config import parse_config
    from mara_agents.mat.train import train as train_mat
    mat_config = parse_config(rest)

    def run_mat() -> int:
        result = train_mat(mat_config)
        print(f"MAT checkpoint {result.checkpoint} (+ .json manifest); {result.global_step} env steps, "
              f"{result.seconds:.0f} s, {result.steps_per_second:.0f} env steps/s")
        return 0
    return run_command(run_mat, errors, _resume_note(Path(mat_config.run_path) / "last.pt"))


if __name__ == "__main__":
    sys.exit(main())
