"""Train MARA's two stages: ``python train.py fm …`` (the flow-matching predictor, stage I) and
``python train.py mat --seed S [--predictor fm|wls] [--reward shaped|sparse] [--steps 100000] [--device cuda]``
(the MAT allocator, stage II); ``python train.py mat-il --seed S`` trains MAT-IL, our imitation recipe for the
same allocator (not the paper's; ``docs/research/learned_allocator.md``).  ``python train.py {fm,mat,mat-il} --help``
lists every setting; each command line is generated from the stage's settings dataclasses
(:class:`~mara_agents.predictors.train.FMTrainConfig`, :class:`~mara_agents.training.config.MATTrainConfig`,
:class:`~mara_agents.training.config.MATILConfig`), which check every setting — paths included — before any
training starts.  A bad setting or an unusable file is one line on stderr and exit status 2; SIGINT or SIGTERM
saves what can be resumed and exits with status 130, saying where (:mod:`mara_common.cli`)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

USAGE = ("usage: python train.py {fm,mat,mat-il} [options]   (python train.py fm --help, python train.py mat --help, "
         "python train.py mat-il --help)")


def _resume_note(state: Path) -> Callable[[], str]:
    """What an interrupted resumable run kept: its training state, if one was written."""
    def note() -> str:
        if state.is_file():
            return f"the training state is saved in {state}; run the same command again to resume"
        return "no training state was saved yet; the next run starts afresh"
    return note


def _kept_policy(out: Path, run: Path) -> Callable[[], str]:
    """What an interrupted MAT-IL run kept (the best policy it exported so far), and how to start it again."""
    def note() -> str:
        kept = f"the best policy so far is {out}" if out.is_file() else "no policy was exported yet"
        again = (f"; to train it again, add --force (it replaces {run})" if run.is_dir() and any(run.iterdir())
                 else "")
        return f"MAT-IL does not resume; {kept}{again}"
    return note


def _stage(name: str) -> tuple[Callable[[list[str]], Any], Callable[[Any], Any], Callable[[Any], str],
                                Callable[[Any], Callable[[], str]]]:
    """(parse the flags, train, describe the result, say what an interruption kept) of a stage."""
    if name == "fm":
        from mara_agents.predictors import train as fm
        return fm.parse_config, fm.train, fm.describe, lambda config: _resume_note(Path(config.run_dir) / "last.pt")
    if name == "mat-il":
        from mara_agents.training.config import parse_il_config
        from mara_agents.training.il_train import train_il
        return (parse_il_config, train_il, lambda result: (
            f"MAT-IL checkpoint {result.checkpoint} (+ .json manifest); {result.global_step} env steps, "
            f"{result.seconds:.0f} s wall, {result.steps_per_second:.0f} env steps/s while collecting"),
            lambda config: _kept_policy(config.out_path, config.run_path))
    from mara_agents.training.config import parse_config
    from mara_agents.training.train import train
    return (parse_config, train, lambda result: (
        f"MAT checkpoint {result.checkpoint} (+ .json manifest); {result.global_step} env steps, "
        f"{result.seconds:.0f} s, {result.steps_per_second:.0f} env steps/s"),
        lambda config: _resume_note(Path(config.run_path) / "last.pt"))


def main(argv: Sequence[str] | None = None) -> int:
    """Dispatch to the stage's trainer; returns the exit status."""
    from curves.bank import BankError
    from mara_agents.play.checkpoints import CheckpointError
    from mara_common.cli import run_command
    from mara_env.workload import WorkloadError

    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in ("fm", "mat", "mat-il"):
        print(USAGE, file=sys.stderr)
        return 2
    parse, train, describe, kept = _stage(args[0])
    config = parse(args[1:])  # every setting is checked here, before any training (exit 2 on a bad one)

    def run() -> int:
        print(describe(train(config)))
        return 0
    return run_command(run, (ValueError, OSError, CheckpointError, BankError, WorkloadError), kept(config))


if __name__ == "__main__":
    sys.exit(main())
