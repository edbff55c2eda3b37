"""Train MARA's two stages: ``python train.py fm …`` (the flow-matching predictor, stage I) and
``python train.py mat --seed S [--predictor fm|wls] [--reward shaped|sparse] [--steps 100000] [--device cuda]``
(the MAT allocator, stage II); ``python train.py mat-il --seed S`` trains MAT-IL, our imitation recipe for the
same allocator (not the paper's; ``docs/learned_allocator.md``).  ``python train.py {fm,mat,mat-il} --help``
lists every setting; each command line is generated from the stage's settings dataclasses
(:class:`~mara_agents.predictors.train.FMTrainConfig`, :class:`~mara_agents.mat.config.MATTrainConfig`,
:class:`~mara_agents.mat.il_train.MATILConfig`).  A bad setting or an unusable file is one line on stderr and
exit status 2."""

from __future__ import annotations

import sys
from collections.abc import Sequence

USAGE = ("usage: python train.py {fm,mat,mat-il} [options]   (python train.py fm --help, python train.py mat --help, "
         "python train.py mat-il --help)")


def main(argv: Sequence[str] | None = None) -> int:
    """Dispatch to the stage's trainer; returns the exit status."""
    from curves.bank import BankError
    from mara_agents.checkpoint_io import CheckpointError
    from mara_env.workload import WorkloadError

    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in ("fm", "mat", "mat-il"):
        print(USAGE, file=sys.stderr)
        return 2
    stage, rest = args[0], args[1:]
    try:
        if stage == "fm":
            from mara_agents.predictors.train import main as train_fm
            train_fm(rest)
            return 0
        if stage == "mat-il":
            from mara_agents.mat.il_train import main as train_il
            result = train_il(rest)
            print(f"MAT-IL checkpoint {result.checkpoint} (+ .json manifest); {result.global_step} env steps, "
                  f"{result.seconds:.0f} s wall, {result.steps_per_second:.0f} env steps/s while collecting")
            return 0
        from mara_agents.mat.config import parse_config
        from mara_agents.mat.train import train as train_mat
        result = train_mat(parse_config(rest))
    except (ValueError, OSError, CheckpointError, BankError, WorkloadError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted: run the same command again to resume from the last saved state", file=sys.stderr)
        return 130
    print(f"MAT checkpoint {result.checkpoint} (+ .json manifest); {result.global_step} env steps, "
          f"{result.seconds:.0f} s, {result.steps_per_second:.0f} env steps/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
