"""Stage II: train the MAT allocator with PPO + GAE over a frozen predictor (paper §4.2–4.4, Algorithm 1).

Read top to bottom: build the frozen predictor, the model and N environments; then repeat — collect a
rollout (one batched predictor call per vector step), compute GAE advantages, run the PPO update, log to
TensorBoard, and write the resumable state every ``checkpoint_every`` env steps.

**Checkpoint rule (fixed before any evaluation).**  Every ``validate_every`` env steps (at the first PPO
update that crosses a multiple) and after the last update, the greedy policy is scored on the run's
validation workload — episodes drawn from the bank's ``val`` curves (:mod:`mara_agents.mat.validation`) — and
the model with the highest score so far is exported (ties keep the earlier one).  The validation workloads
are a mixture at the training load and a small stress test (§5.4), weighted equally.  No evaluation workload,
and no ``test`` curve, is ever looked at.  With ``validate_every = 0`` the final model is exported.

The paper fixes its checkpoint at env step 10,500.  We do not: with the default rollout a run has then made
7 PPO updates and no environment has finished its first episode, and the greedy policy's validation score
moves by several points from one check to the next, so a fixed step would export noise.

**Privileged critic.**  With ``--privileged-critic`` the values come from a separate network that also reads
each task's true remaining demand (:mod:`mara_agents.mat.critic`); the optimiser trains it with the actor, the
critic-only warm-up fits it alone, and it is saved in the run state but never exported.

**Resume.**  ``<run_dir>/last.pt`` holds model, optimiser, value normaliser, generator states and counters,
written atomically with a SHA-256 sidecar; the state before it is kept as ``last.prev.pt`` and used when the
last one fails its check.  A killed run restarted with the same command (paths may be spelled differently)
continues from the last save, losing at most ``checkpoint_every`` env steps; ``--no-resume`` over an existing
run needs ``--force``; the environments start fresh episodes (seeded from the seed and the step
count) because in-flight episodes are not saved, so a resumed run is reproducible but not bit-identical to
an uninterrupted one.
"""

from __future__ import annotations

import dataclasses
import datetime
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.tensorboard import SummaryWriter

from curves.bank import DEFAULT_BANK
from mara_agents.checkpoint_io import (bank_checksum, file_sha256, git_commit, load_run_state, portable_path,
                                       remove_run_state, save_run_state)
from mara_agents.config_cli import changed_settings
from mara_agents.mat.checkpoint import export_policy, load_policy_model
from mara_agents.mat.config import MATTrainConfig
from mara_agents.mat.critic import PrivilegedCritic
from mara_agents.mat.model import MATModel
from mara_agents.mat.ppo import Batch, ValueNorm, gae, ppo_update
from mara_agents.mat.rollout import Rollout, VectorRollout
from mara_agents.mat.tokens import Tokens
from mara_agents.mat.validation import validation_score, validation_workload
from mara_agents.predictors.demand import make_demand
from mara_agents.predictors.fm.predictor import DEFAULT_CHECKPOINT as DEFAULT_FM

# Fields that may differ when a run is resumed; any other change is refused.  Paths compare by what they name.
_RESUMABLE_CHANGES = frozenset({"device", "threads", "steps", "resume", "force", "out", "checkpoint_every",
                                "snapshot_every", "run_dir", "progress", "unverified"})
_PATHS = frozenset({"fm_checkpoint", "env.bank"})


@dataclass(frozen=True)
class TrainResult:
    """Where the exported policy went and how long training took."""

    checkpoint: Path
    global_step: int
    seconds: float
    steps_per_second: float


def flatten(rollout: Rollout, advantages: torch.Tensor, returns: torch.Tensor,
            reference: MATModel | None = None) -> Batch:
    """(T, N, …) rollout → (T·N, …) PPO batch, with the actions' log-probs under ``reference`` if given."""
    privileged = rollout.privileged.flatten(0, 1) if rollout.privileged is not None else None
    slots, glob, present = rollout.slots.flatten(0, 1), rollout.glob.flatten(0, 1), rollout.present.flatten(0, 1)
    actions, log_probs = rollout.actions.flatten(0, 1), rollout.log_probs.flatten(0, 1)
    if reference is None:
        reference_log_probs = torch.zeros_like(log_probs)
    else:
        with torch.no_grad():
            reference_log_probs = reference.evaluate(Tokens(slots, glob, present), actions)[0]
    return Batch(slots=slots, glob=glob, present=present, actions=actions, log_probs=log_probs,
                 advantages=advantages.flatten(), returns=returns.flatten(), reference_log_probs=reference_log_probs,
                 privileged=privileged)


def initial_policy(config: MATTrainConfig, device: torch.device) -> MATModel | None:
    """The exported policy ``--init-from`` names (frozen: the KL penalty's reference), or None."""
    if not config.init_from:
        return None
    reference, predictor = load_policy_model(config.init_from, device, verify=not config.unverified)
    if predictor != config.predictor or reference.hparams != config.hparams():
        raise ValueError(f"--init-from {config.init_from}: trained with predictor {predictor!r} and "
                         f"{reference.hparams}, this run has {config.predictor!r} and {config.hparams()}")
    return reference.requires_grad_(False)


def checked_state(path: Path, config: MATTrainConfig) -> dict[str, Any]:
    """The saved run state, refusing to resume a run started with different training settings."""
    state = load_run_state(path)
    changed = changed_settings(state["config"], as_record(config), _RESUMABLE_CHANGES, _PATHS)
    if changed:
        raise ValueError(f"{path}: cannot resume, the run was started with different {changed}; "
                         "use another --run-dir or --no-resume")
    return state


def crossed(step: int, steps: int, every: int) -> bool:
    """Whether the update that ended at env step ``step`` (after ``steps`` more) crossed a multiple of ``every``."""
    return bool(every) and step // every > (step - steps) // every


def validation_workloads(config: MATTrainConfig, run: Path, bank: str) -> list[Path]:
    """The run's validation workload files (none without validation): the mixture, then the stress test."""
    if not config.validate_every:
        return []
    workloads = [validation_workload(run / "validation.json", bank, config.env.task_set, config.env.arrival_prob,
                                     config.validation_roots, config.validation_episodes)]
    if config.validation_stress_episodes:
        workloads.append(validation_workload(run / "validation_stress.json", bank, "stress", 0.0, 1,
                                             config.validation_stress_episodes))
    return workloads


def selection_rule(config: MATTrainConfig) -> str:
    """The checkpoint rule in words, for the manifest."""
    if not config.validate_every:
        return "the final model (no validation)"
    stress = (f" and {config.validation_stress_episodes} stress-test episodes (equal weight)"
              if config.validation_stress_episodes else "")
    return (f"highest greedy success rate on the validation workloads ({config.validation_roots} roots x "
            f"{config.validation_episodes} episodes, {config.env.task_set} task set, p={config.env.arrival_prob}{stress}; "
            f"val curves), scored every {config.validate_every} env steps and at the end; "
            "ties keep the earlier model (fixed before evaluation; no test curve used)")


def manifest(config: MATTrainConfig, model: MATModel, global_step: int, seconds: float,
             recent: deque[dict[str, float]], validation: list[tuple[int, float]],
             role: str = "selected") -> dict[str, Any]:
    """How the exported policy was trained (JSON beside the checkpoint); ``role`` is ``selected`` (the
    checkpoint rule's pick) or ``snapshot`` (a learning-curve export)."""
    bank = config.env.bank or str(DEFAULT_BANK)
    fm = Path(config.fm_checkpoint or DEFAULT_FM)
    rates = [e["success_rate"] for e in recent if np.isfinite(e["success_rate"])]
    return {
        "format": "mara-mat-manifest", "method": config.method,
        "config": as_record(config), "hparams": model.hparams.to_dict(),
        "step": global_step, "role": role,
        "selection_rule": selection_rule(config),
        "validation_scores": [{"step": step, "success_rate": score} for step, score in validation],
        "train_seconds": round(seconds, 1),
        "train_success_rate_last_episodes": float(np.mean(rates)) if rates else None,
        "train_episodes_in_that_mean": len(rates),
        "data": {"bank": portable_path(bank), "bank_sha256": bank_checksum(bank), "task_set": config.env.task_set,
                 "curve_splits": list(config.env.curve_splits), "arrival_prob": config.env.arrival_prob},
        "predictor": {"name": config.predictor,
                      "checkpoint": portable_path(fm) if config.predictor == "fm" else None,
                      "checkpoint_sha256": file_sha256(fm) if config.predictor == "fm" else None},
        "initial_policy": ({"checkpoint": portable_path(config.init_from),
                            "checkpoint_sha256": file_sha256(config.init_from)} if config.init_from else None),
        "git_commit": git_commit(), "torch": torch.__version__,
        "created_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def as_record(config: MATTrainConfig) -> dict[str, Any]:
    """The config as plain JSON-able data (nested groups as dicts) for manifests and run states."""
    record = dataclasses.asdict(config)
    record["env"]["curve_splits"] = list(config.env.curve_splits)
    return record


def prepare_fresh_run(config: MATTrainConfig, state_path: Path) -> None:
    """``--no-resume`` on a directory that already holds a run replaces it only with ``--force``, and then
    removes its state and validation workloads so nothing of the old run is reused."""
    if config.resume or not state_path.exists():
        return
    if not config.force:
        raise ValueError(f"{state_path.parent} already holds a training run; --no-resume would replace it: add "
                         "--force to do so, or choose another --run-dir")
    remove_run_state(state_path)
    for name in ("validation.json", "validation_stress.json"):
        (state_path.parent / name).unlink(missing_ok=True)


def train(config: MATTrainConfig) -> TrainResult:
    """Run (or resume) one MAT training run; returns where the selected policy was exported."""
    if config.device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {config.device!r}: CUDA is not available on this machine")
    torch.set_num_threads(config.threads)
    device = torch.device(config.device)
    torch.manual_seed(config.seed)
    run = Path(config.run_path)
    state_path = run / "last.pt"
    prepare_fresh_run(config, state_path)
    demand = make_demand(config.predictor, config.fm_checkpoint, config.device, verify=not config.unverified)
    model = MATModel(config.hparams()).to(device)
    start = initial_policy(config, device)
    if start is not None:
        model.load_state_dict(start.state_dict())
    reference = start if config.ppo.reference_kl > 0 else None  # the KL penalty's reference, only when it counts
    privileged = PrivilegedCritic(config.hparams()).to(device) if config.privileged_critic else None
    trained = list(model.parameters()) + (list(privileged.parameters()) if privileged is not None else [])
    optimizer = torch.optim.Adam(trained, lr=config.ppo.lr, eps=1e-5)
    values = privileged if privileged is not None else model.value_head  # what the critic-only warm-up fits
    critic = torch.optim.Adam(values.parameters(), lr=config.ppo.lr, eps=1e-5)
    value_norm = ValueNorm().to(device)
    sampler = torch.Generator(device=device).manual_seed(config.seed)
    shuffler = torch.Generator().manual_seed(config.seed + 1)
    bank = config.env.bank or str(DEFAULT_BANK)
    validation: list[tuple[int, float]] = []  # (env step, score) of every validation so far
    global_step, update, trained_seconds = 0, 0, 0.0
    if config.resume and state_path.exists():
        state = checked_state(state_path, config)
        model.load_state_dict(state["model"])
        if privileged is not None:
            privileged.load_state_dict(state["privileged_critic"])
        optimizer.load_state_dict(state["optimizer"])
        critic.load_state_dict(state["critic"])
        value_norm.load_state_dict(state["value_norm"])
        sampler.set_state(state["generators"]["sampler"])
        shuffler.set_state(state["generators"]["shuffler"])
        global_step, update = state["global_step"], state["update"]
        validation = [(int(step), float(score)) for step, score in state["validation"]]
        trained_seconds = state["seconds"]
        print(f"resumed {state_path} at env step {global_step}", flush=True)

    workloads = validation_workloads(config, run, bank)
    envs = VectorRollout(config.env, config.num_envs, demand, seed=(config.seed, global_step), device=device)
    writer = SummaryWriter(str(run / "tb"), purge_step=global_step)
    settings = config.ppo
    recent: deque[dict[str, float]] = deque(maxlen=50)
    started, last_saved, first_step, resumed_seconds = time.perf_counter(), global_step, global_step, trained_seconds
    while global_step < config.steps:
        tick = time.perf_counter()
        if settings.anneal_lr:
            for group in optimizer.param_groups:
                group["lr"] = settings.lr * (1.0 - global_step / config.steps)
        rollout = envs.collect(model, value_norm, config.rollout_steps, sampler, privileged)
        collected = time.perf_counter()
        advantages, returns = gae(rollout.rewards, rollout.values, rollout.dones, rollout.last_value,
                                  settings.gamma, settings.gae_lambda)
        warming = update < config.critic_warmup
        stats = ppo_update(model, critic if warming else optimizer, flatten(rollout, advantages, returns, reference),
                           value_norm, settings, shuffler, critic_only=warming, critic=privileged)
        steps = config.rollout_steps * config.num_envs
        global_step += steps
        update += 1
        elapsed = time.perf_counter() - tick
        trained_seconds += elapsed

        for episode in envs.drain_finished():
            recent.append(episode)
            writer.add_scalar("charts/episode_return", episode["return"], global_step)
            if np.isfinite(episode["success_rate"]):
                writer.add_scalar("charts/success_rate", episode["success_rate"], global_step)
        for key, value in stats.items():
            writer.add_scalar(f"losses/{key}", value, global_step)
        writer.add_scalar("charts/steps_per_second", steps / elapsed, global_step)
        writer.add_scalar("charts/rollout_seconds", collected - tick, global_step)
        rates = [e["success_rate"] for e in recent if np.isfinite(e["success_rate"])]
        if config.progress:
            print(f"update {update} step {global_step} sps {steps / elapsed:.0f} (rollout {collected - tick:.1f}s) "
                  f"success {np.mean(rates) if rates else float('nan'):.3f} entropy {stats['entropy']:.3f} "
                  f"value_loss {stats['value_loss']:.3f}", flush=True)

        last = global_step >= config.steps
        if workloads and (crossed(global_step, steps, config.validate_every) or last):
            score = validation_score(model, demand.predictor, workloads, bank)
            writer.add_scalar("charts/validation_success_rate", score, global_step)
            print(f"validation at step {global_step}: success {score:.4f}", flush=True)
            best = max((s for _, s in validation), default=-1.0)
            validation.append((global_step, score))
            if score > best:
                export_policy(config.out_path, model, config.predictor,
                              manifest(config, model, global_step, trained_seconds, recent, validation))
        if config.snapshot_every and (crossed(global_step, steps, config.snapshot_every) or last):
            export_policy(run / "snapshots" / f"step_{global_step}.pt", model, config.predictor,
                          manifest(config, model, global_step, trained_seconds, recent, validation, role="snapshot"))
        if (validation and validation[-1][0] == global_step or global_step - last_saved >= config.checkpoint_every
                or last):
            save_run_state(state_path, {
                "model": model.state_dict(), "optimizer": optimizer.state_dict(), "critic": critic.state_dict(),
                "value_norm": value_norm.state_dict(),
                "generators": {"sampler": sampler.get_state(), "shuffler": shuffler.get_state()},
                "global_step": global_step, "update": update, "seconds": trained_seconds,
                "config": as_record(config), "validation": validation,
                **({"privileged_critic": privileged.state_dict()} if privileged is not None else {})})
            last_saved = global_step
    if not workloads:
        export_policy(config.out_path, model, config.predictor,
                      manifest(config, model, global_step, trained_seconds, recent, validation))
    writer.close()
    seconds = time.perf_counter() - started
    return TrainResult(Path(config.out_path), global_step, seconds,
                       ((global_step - first_step) / (trained_seconds - resumed_seconds))
                       if trained_seconds > resumed_seconds else float("nan"))
