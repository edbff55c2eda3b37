"""FM before and after fine-tuning on a job file's jobs, each kind held out in turn (``docs/research/fm_jobs.md``).

    python -m studies.fm_user_jobs examples/numpy_jobs.py --out /tmp/fm-jobs [--splits val]

A job's kind is its name up to the last ``-`` (``sine-0`` is a ``sine``).  For each kind in turn (the fold's
*test* kind) the next kind in the file's order is its *val* kind and every other kind trains: the file's jobs,
run here once per seed offset, become a bank (:mod:`mara_agents.live.jobs.bank`) and ``train.py fm`` fine-tunes
the shipped FM on it, keeping the checkpoint with the lowest flow-matching loss on the val kind's curves.  Both
FMs then forecast the val kind's and the test kind's jobs as the ``forecast`` command does (each job's own run
to 2·B, Table 1's prefixes): capped MAE, feasibility accuracy and the share answered "never" (at the horizon).
The documented rule adopts a fold's fine-tuned FM only where its capped MAE on the val kind is lower.

With ``--keep-bank`` each fold's bank also holds the shipped bank's ID training curves (round 2 of the page).
Every fold writes ``OUT/<fold>.json`` as it ends and is skipped when run again; ``--splits val`` scores the val
kinds alone (the test kinds' jobs are not forecast).  Prints one row per fold and the folds pooled.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from curves.bank import DEFAULT_BANK, CurveBank, load_bank
from mara_agents.live.jobs.bank import JobCurve, check_splits, offline_curves, write_bank
from mara_agents.live.jobs.files import JobFileError, load_jobs
from mara_agents.live.jobs.forecast import job_queries, offline_losses
from mara_agents.predictors.bench import budget_success_accuracy, capped_mae, horizon_share, timed_predict
from mara_agents.predictors.demand import make_predictor
from mara_agents.predictors.fm.predictor import DEFAULT_CHECKPOINT
from mara_agents.predictors.train import FMTrainConfig, train
from mara_common.atomic import atomic_write_json
from mara_env.live.jobs import Job

OFFSETS = tuple(range(0, 8000, 1000))  # eight runs of each job: its own seed and seven others
FINE_TUNE = dict(lr=1e-4, max_steps=1500, eval_every=50, patience=6, val_examples=1024, progress=False)
MODELS = ("shipped", "adapted")


def kind_of(job: Job) -> str:
    """A job's kind: its name up to the last ``-``."""
    return job.name.rsplit("-", 1)[0]


def folds(jobs: Sequence[Job]) -> list[tuple[str, str]]:
    """(test kind, val kind) per fold: each kind in file order, with the kind after it (cyclically) as val."""
    kinds = list(dict.fromkeys(kind_of(job) for job in jobs))
    if len(kinds) < 3:
        raise ValueError(f"leaving one kind out needs at least 3 kinds of job (train, val, test), got {kinds}")
    return [(kind, kinds[(k + 1) % len(kinds)]) for k, kind in enumerate(kinds)]


def estimates(jobs: Sequence[Job], losses: dict[str, np.ndarray], checkpoint: str) -> dict[str, list[float]]:
    """FM's answers on the jobs' Table 1 prefixes, with the truth, cap, prefix and budget of each."""
    queries = job_queries(jobs, losses)
    answer, _ = timed_predict(make_predictor("fm", checkpoint), queries.query)
    return {"estimate": answer.tolist(), "truth": queries.truth.tolist(), "cap": queries.query.cap.tolist(),
            "prefix": queries.prefix.tolist(), "budget": queries.budget.tolist()}


def figures(scored: Sequence[dict[str, list[float]]]) -> dict[str, float]:
    """Capped MAE, feasibility accuracy and the share at the horizon ("never") over the pooled answers."""
    pooled = {key: np.concatenate([np.asarray(item[key], dtype=np.float64) for item in scored]) for key in scored[0]}
    return {"prefixes": int(pooled["truth"].size),
            "mae": capped_mae(pooled["estimate"], pooled["truth"], pooled["cap"]),
            "accuracy": budget_success_accuracy(pooled["estimate"], pooled["truth"], pooled["prefix"],
                                                pooled["budget"]),
            "never": horizon_share(pooled["estimate"], pooled["cap"])}


def run_fold(jobs: Sequence[Job], test: str, val: str, curves: list[JobCurve], losses: dict[str, np.ndarray],
             out: Path, splits: Sequence[str], keep: CurveBank | None = None) -> dict:
    """Bank, fine-tune and score one fold; its record (per split and model, FM's answers) is written to
    ``out/<test>.json``."""
    folder = out / test
    patterns = {"val": [f"{val}-*"], "test": [f"{test}-*"]}
    if not (folder / "bank").exists():
        write_bank(curves, folder / "bank", check_splits(curves, patterns["val"], patterns["test"]), keep)
    checkpoint = folder / "fm.pt"
    if not checkpoint.exists():
        train(FMTrainConfig(bank=str(folder / "bank"), run_dir=str(folder / "run"), out=str(checkpoint),
                            init_from=str(DEFAULT_CHECKPOINT), **FINE_TUNE))
    kinds = {"val": val, "test": test}
    record: dict = {}
    for split in splits:
        chosen = [job for job in jobs if kind_of(job) == kinds[split]]
        record[split] = {model: estimates(chosen, losses, "" if model == "shipped" else str(checkpoint))
                         for model in MODELS}
    atomic_write_json(out / f"{test}.json", record)
    return record


def table(plan: Sequence[tuple[str, str]], records: Sequence[dict], splits: Sequence[str]) -> str:
    """One row per fold (``plan``'s test and val kinds) and split, then the folds pooled; ``adopt`` is the val
    rule's verdict."""
    lines = [f"{'fold (test kind)':<18}{'val kind':<13}{'split':<6}" + "".join(
        f"{model + ' ' + name:>18}" for model in MODELS for name in ("MAE", "acc %", "never %")) + f"{'adopt':>7}"]

    def row(label: str, val: str, split: str, scored: dict[str, list]) -> str:
        cells = "".join(f"{value['mae']:>18.2f}{100 * value['accuracy']:>18.1f}{100 * value['never']:>18.1f}"
                        for value in (figures(scored[model]) for model in MODELS))
        return f"{label:<18}{val:<13}{split:<6}{cells}"

    for (test, val), record in zip(plan, records):
        adopt = adopted(record)
        for split in splits:
            lines.append(row(test, val, split, {m: [record[split][m]] for m in MODELS})
                         + f"{'yes' if adopt else 'no':>7}")
    for split in splits:
        lines.append(row("all folds", "", split, {m: [record[split][m] for record in records] for m in MODELS}))
    if "test" in splits:
        picked = [record["test"]["adapted" if adopted(record) else "shipped"] for record in records]
        lines.append(f"all folds, the FM the rule adopts on test: " + ", ".join(
            f"{name} {value:.3g}" for name, value in figures(picked).items()))
    return "\n".join(lines)


def adopted(record: dict) -> bool:
    """The documented rule: a fold's fine-tuned FM is adopted where its capped MAE on the val kind is lower."""
    return figures([record["val"]["adapted"]])["mae"] < figures([record["val"]["shipped"]])["mae"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m studies.fm_user_jobs", description=__doc__.split("\n")[0])
    parser.add_argument("file", help="a job file whose job names are KIND-NUMBER")
    parser.add_argument("--out", required=True, help="folder for the folds' banks, checkpoints and records")
    parser.add_argument("--splits", nargs="+", choices=("val", "test"), default=["val", "test"],
                        help="which held-out kinds to forecast")
    parser.add_argument("--keep-bank", action="store_true",
                        help="each fold's bank also holds the shipped bank's ID training curves")
    args = parser.parse_args(argv)
    try:
        jobs = load_jobs(args.file)
        plan = folds(jobs)
    except (JobFileError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    losses: dict[str, np.ndarray] = {}
    curves: list[JobCurve] = []
    records = []
    for test, val in plan:
        done = out / f"{test}.json"
        record = json.loads(done.read_text()) if done.exists() else None
        if record is None or any(split not in record for split in args.splits):
            if not curves:  # only when a fold has to run: a finished study prints its table at once
                losses, curves = offline_losses(jobs), offline_curves(jobs, OFFSETS)
            keep = load_bank(DEFAULT_BANK) if args.keep_bank else None
            record = run_fold(jobs, test, val, curves, losses, out, args.splits, keep)
        records.append(record)
        print(f"fold {test} (val {val}) done", file=sys.stderr, flush=True)
    print(table(plan, records, args.splits))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
