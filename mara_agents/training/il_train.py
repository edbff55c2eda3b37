"""``python train.py mat-il``: the MAT-IL recipe — the paper's MAT architecture trained by DAgger from a
privileged expert (:mod:`mara_agents.training.imitation`).  Not the paper's recipe; ``mara`` stays the
reproduction (``python train.py mat``).

**Checkpoint rule (fixed before any evaluation)**, the same as MARA's: after every DAgger round the greedy
student is scored on the run's validation workloads (the mixture at ``--arrival-prob`` and the small stress
test, both drawn from ``val`` curves with the training runs' selection seed, equal weight) and the
best-scoring model is exported (ties keep the earlier one).  With ``--start-candidate`` the untrained student
(which, with ``--slack-prior``, serves what FM-slack serves) is scored first, at step 0, as a candidate like the
rounds' students, so imitation is kept only where it beats where it started.  No test curve is ever played.

The run writes TensorBoard logs (``<run_dir>/tb``: imitation loss and agreement, β, data-set size, episode
success rate of the mixed expert/student play, env steps/s, validation score) and prints the training cost:
env steps/s of data collection and the wall time of the whole recipe.  It is short (minutes), so it does not
resume: rerun it with ``--force`` to replace a run directory.  A finished run records so in
``<run_dir>/finished.json`` (written atomically, last; it holds every validation score): the same command run again returns at once and names
the checkpoint, so a job list such as ``mat-il … && mat --init-from …`` can be rerun as a whole.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch.utils.tensorboard import SummaryWriter

from mara_common.atomic import atomic_write_json
from mara_agents.mat.checkpoint import export_policy
from mara_agents.training.config import MATILConfig, changed_run_settings, parse_il_config, with_defaults
from mara_agents.training.imitation import ExpertRollout, LabelledStates, environment_configs, fit
from mara_agents.mat.model import MATModel
from mara_agents.training.train import TrainResult, record_score, start_torch, training_manifest, validation_workloads
from mara_agents.training.validation import validation_score
from mara_agents.predictors.demand import make_demand

RECIPE = "DAgger from the privileged slack expert (mara_agents/training/imitation.py)"
FINISHED = "finished.json"  # in the run directory: the config, checkpoint and cost of a run that completed


def finished_run(config: MATILConfig) -> TrainResult | None:
    """The result recorded by a finished run of this config in its run directory (settings that do not
    change what is trained, such as the device or ``--out``, may differ), or None."""
    path = config.run_path / FINISHED
    if config.force or not path.is_file():
        return None
    record = json.loads(path.read_text())
    checkpoint = Path(record["checkpoint"])
    recorded = with_defaults(record["config"], MATILConfig().record())  # settings added since read as their default
    if changed_run_settings(recorded, config) or not checkpoint.is_file():
        return None
    return TrainResult(checkpoint, int(record["global_step"]), float(record["seconds"]),
                       float(record["steps_per_second"]))


def prepare_run(config: MATILConfig) -> Path:
    """The run directory, empty: one that holds a previous run is replaced only with ``--force``."""
    run = config.run_path
    if run.exists() and any(run.iterdir()):
        if not config.force:
            raise ValueError(f"{run} already holds a run that did not finish or has other settings; add --force to "
                             "replace it, or choose another --run-dir")
        shutil.rmtree(run)
    run.mkdir(parents=True, exist_ok=True)
    return run


def keep_if_best(config: MATILConfig, model: MATModel, validation: list[tuple[int, float]], step: int,
                 started: float, score: float) -> None:
    """The checkpoint rule: record the student's validation score and export it when it is the best so far."""
    if record_score(validation, step, score):
        export_policy(config.out_path, model, config.predictor, training_manifest(
            config, model, step, time.perf_counter() - started, validation, paper_recipe=False, recipe=RECIPE),
            config.setting)


def train_il(config: MATILConfig) -> TrainResult:
    """Run the MAT-IL recipe; returns where the selected policy was exported and the training cost (a run
    that already finished in the run directory is not trained again: its recorded result is returned)."""
    done = finished_run(config)
    if done is not None:
        unwritten = "" if done.checkpoint.resolve() == config.out_path.resolve() else \
            f"; nothing was written to {config.out_path}"
        print(f"{config.run_path} already holds this finished MAT-IL run{unwritten}; its checkpoint is "
              f"{done.checkpoint}", flush=True)
        return done
    started = time.perf_counter()
    device = start_torch(config)
    run = prepare_run(config)
    settings = config.imitation
    demand = make_demand(config.predictor, config.fm_checkpoint, config.device, verify=not config.unverified)
    model = MATModel(config.hparams()).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=settings.bc_lr)
    workloads = validation_workloads(config)
    rollout = ExpertRollout(environment_configs(config.env, settings, config.num_envs), demand, config.seed, device)
    rng = np.random.default_rng(config.seed)
    shuffler = torch.Generator().manual_seed(config.seed + 1)
    writer = SummaryWriter(str(run / "tb"))
    data = LabelledStates()
    vector_steps = math.ceil(settings.round_steps / config.num_envs)
    step, collect_seconds, validation = 0, 0.0, []
    if settings.start_candidate:  # the untrained student is a candidate too
        keep_if_best(config, model, validation, step, started,
                     validation_score(model, demand.predictor, workloads, config.bank, **config.play_options()))
    for round_index in range(settings.rounds):
        beta = settings.beta_decay ** round_index
        tick = time.perf_counter()
        rollout.collect(model, vector_steps, beta, rng, data)
        collected = time.perf_counter()
        stats = fit(model, optimizer, data, settings, shuffler, device)
        fitted = time.perf_counter()
        step += vector_steps * config.num_envs
        collect_seconds += collected - tick
        score = validation_score(model, demand.predictor, workloads, config.bank, **config.play_options())
        stats.update(beta=beta, states=len(data), fit_seconds=fitted - collected)
        log_round(writer, config, round_index, step, stats, rollout.drain_finished(), score, collected - tick)
        keep_if_best(config, model, validation, step, started, score)
    writer.close()
    seconds = time.perf_counter() - started
    result = TrainResult(config.out_path, step, seconds, step / collect_seconds if collect_seconds else float("nan"))
    atomic_write_json(run / FINISHED, {"config": config.record(), "checkpoint": str(config.out_path.resolve()),
                                       "global_step": step, "seconds": seconds, "validation": validation,
                                       "steps_per_second": result.steps_per_second})
    return result


def log_round(writer: SummaryWriter, config: MATILConfig, round_index: int, step: int, stats: dict[str, float],
              rates: list[float], score: float, collecting: float) -> None:
    """TensorBoard scalars of one DAgger round (and a printed line with ``--progress``): the imitation
    statistics, the collection speed, the validation score and the mixed play's episode success rate."""
    for key, value in stats.items():
        writer.add_scalar(f"imitation/{key}", value, step)
    steps_per_second = math.ceil(config.imitation.round_steps / config.num_envs) * config.num_envs / collecting
    writer.add_scalar("charts/steps_per_second", steps_per_second, step)
    writer.add_scalar("charts/validation_success_rate", score, step)
    if rates:
        writer.add_scalar("charts/success_rate", float(np.nanmean(rates)), step)
    if config.progress:
        print(f"round {round_index} step {step} beta {stats['beta']:.3f} states {stats['states']} "
              f"sps {steps_per_second:.0f} fit {stats['fit_seconds']:.0f}s loss {stats['imitation_loss']:.3f} "
              f"agreement {stats['agreement']:.3f} validation {score:.4f}", flush=True)


def main(argv: Sequence[str] | None = None) -> TrainResult:
    """Parse the command line and train (``train.py`` reports errors and the result)."""
    return train_il(parse_il_config(argv))
