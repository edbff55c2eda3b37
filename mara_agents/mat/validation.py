"""Checkpoint selection for MAT: score the greedy policy on fixed validation workloads of ``val`` curves.

PPO's policy quality moves up and down from update to update, and the training return is measured on
sampled actions while evaluation decodes greedily, so neither "the last update" nor "the best training
return" reliably picks a good policy.  Instead training scores the greedy policy every few thousand env
steps on fixed workloads drawn from the bank's ``val`` curves (never the ``test`` curves behind the
evaluation workloads) and exports the best-scoring model.  The workloads are the two situations the paper
evaluates a scheduler in — the training mixture at the training load, and the infeasible-task stress
construction (§5.4) — and the score weighs them equally: a policy trained on mixtures alone can do well there
while still serving hopeless tasks to their deadlines, which the mixture episodes rarely punish.  Each
workload is drawn from its own seed, once per run, and saved in the run directory so a resumed run scores
against the same episodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from curves.bank import load_bank
from mara_agents.mat.model import MATModel
from mara_agents.mat.policy import MATPolicy
from mara_agents.predictors.base import Predictor
from mara_agents.runner import evaluate_workload
from mara_env.fixed_workloads import build_workload
from mara_env.workload import save_workload

VALIDATION_SPLITS = ("val",)
VALIDATION_SEED = 20261202  # distinct from the evaluation workloads' seed base


def validation_workload(path: Path, bank: str, task_set: str, load: float, roots: int, episodes: int) -> Path:
    """The run's validation workload file: drawn once from ``val`` curves, then reused (also on resume)."""
    if not path.exists():
        drawn = build_workload(load_bank(bank), task_set, load, roots=roots, episodes=episodes,
                               splits=VALIDATION_SPLITS, seed_base=VALIDATION_SEED)
        save_workload(path, drawn)
    return path


def validation_score(model: MATModel, predictor: Predictor, workloads: Sequence[Path], bank: str) -> float:
    """Mean over the workloads of the greedy policy's mean success rate on each (episodes in lock-step)."""
    was_training = model.training
    policy = MATPolicy(model, predictor)
    scores = [np.nanmean([row["success_rate"] for row in evaluate_workload(policy, path, bank=bank)])
              for path in workloads]
    model.train(was_training)
    return float(np.mean(scores))
