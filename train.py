"""Train MARA's two stages: ``python train.py fm …`` (the flow-matching predictor, stage I) and
``python train.py mat --seed S [--predictor fm|wls] [--reward shaped|sparse] [--steps 100000] [--device cuda]``
(the MAT allocator, stage II).  ``python train.py {fm,mat} --help`` lists every setting."""

from __future__ import annotations

import sys
from collections.abc import Sequence

USAGE = "usage: python train.py {fm,mat} [options]   (python train.py fm --help, python train.py mat --help)"


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in ("fm", "mat"):
        raise SystemExit(USAGE)
    stage, rest = args[0], args[1:]
    if stage == "fm":
        from mara_agents.predictors.train import main as train_fm
        train_fm(rest)
        return
    from mara_agents.mat.config import parse_config
    from mara_agents.mat.train import train as train_mat
    result = train_mat(parse_config(rest))
    print(f"MAT checkpoint {result.checkpoint} (+ .json manifest); {result.global_step} env steps, "
          f"{result.seconds:.0f} s, {result.steps_per_second:.0f} env steps/s")


if __name__ == "__main__":
    main()
