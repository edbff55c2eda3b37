"""Stage II: train the MAT allocator with PPO + GAE over a frozen predictor (paper §4.2–4.4, Algorithm 1).

:func:`train` reads top to bottom: :func:`setup` builds the frozen predictor, the model, its optimisers and
generators (:class:`Learner`); :func:`restore` continues a saved run; then each pass of the loop collects a
rollout of N environments (one batched predictor call per vector step), computes GAE advantages, runs the
PPO update, logs to TensorBoard, and :func:`save` applies the checkpoint rule and writes the resumable state.
What MAT-IL (:mod:`mara_agents.training.il_train`) shares with it lives here too: :func:`start_torch`,
:func:`validation_workloads` and :func:`training_manifest`, the one description of an exported policy.

**Checkpoint rule (fixed before any evaluation).**  Every ``validate_every`` env steps (at the first PPO
update that crosses a multiple) and after the last update, the greedy policy is scored on the run's
validation workloads — episodes drawn from the bank's ``val`` curves (:mod:`mara_agents.training.validation`) —
and the model with the highest score so far is exported (ties keep the earlier one; ``--start-candidate``
also scores an ``--init-from`` start at step 0).  The validation workloads are a mixture at the training
load and a small stress test (§5.4), weighted equally.  No evaluation workload, and no ``test`` curve, is ever
looked at.  With ``validate_every = 0`` the final model is exported.  The paper fixes its checkpoint at a
step instead; ``mara_agents/checkpoints/README.md`` says why we do not.

**Privileged critic.**  With ``--privileged-critic`` the values come from a separate network that also reads
each task's true remaining demand (:mod:`mara_agents.training.critic`); the optimiser trains it with the actor, the
critic-only warm-up fits it alone, and it is saved in the run state but never exported.

**Resume.**  ``<run_dir>/last.pt`` holds model, optimisers, value normaliser, generator states and counters,
written atomically with a SHA-256 sidecar; the state before it is kept as ``last.prev.pt`` and used when the
last one fails its check.  A killed run restarted with the same command (paths may be spelled differently)
continues from the last save, losing at most ``checkpoint_every`` env steps; ``--no-resume`` over an existing
run needs ``--force``; the environments start fresh episodes (seeded from the seed and the step
count) because in-flight episodes are not saved, so a resumed run is reproducible but not bit-identical to
an uninterrupted one.  The state records where the selected policy was exported: a resumed run given another
``--out`` writes there only when it selects a new policy, and otherwise (a finished run, say) names the file
that holds it and says that nothing was written to ``--out``.
"""

from __future__ import annotations

import dataclasses
import datetime
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.tensorboard import SummaryWriter

from mara_agents.play.checkpoints import (bank_checksum, file_sha256, git_commit, load_run_state, portable_path,
                                       remove_run_state, save_run_state)
from mara_agents.mat.checkpoint import export_policy, load_policy
from mara_agents.training.config import MATTrainConfig, RunSettings, changed_run_settings, upgrade_record
from mara_agents.training.critic import PrivilegedCritic
from mara_agents.mat.model import MATModel
from mara_agents.training.ppo import Rollout, ValueNorm, gae, ppo_update
from mara_agents.training.rollout import VectorRollout
from mara_agents.mat.tokens import Tokens
from mara_agents.training.validation import validation_score, validation_workload
from mara_agents.predictors.demand import Demand, make_demand
from mara_agents.predictors.fm.predictor import DEFAULT_CHECKPOINT as DEFAULT_FM

RECENT_EPISODES = 50  # finished training episodes whose mean success rate is logged and recorded


@dataclass(frozen=True)
class TrainResult:
    """Where the exported policy went and how long training took."""

    checkpoint: Path
    global_step: int
    seconds: float
    steps_per_second: float


@dataclass
class Learner:
    """What PPO trains and a resumable state holds: the model, the privileged critic (None without one), the
    optimiser of every trained parameter, the critic-only warm-up's optimiser (the value head's, or the
    critic's), the value normaliser and the generators of action sampling and minibatch order; plus the frozen
    policy the KL penalty holds the model near (None without the penalty)."""

    model: MATModel
    critic: PrivilegedCritic | None
    optimizer: torch.optim.Optimizer
    value_optimizer: torch.optim.Optimizer
    value_norm: ValueNorm
    sampler: torch.Generator
    shuffler: torch.Generator
    reference: MATModel | None

    def state(self) -> dict[str, Any]:
        """The trained state as a run state stores it."""
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                "critic": self.value_optimizer.state_dict(), "value_norm": self.value_norm.state_dict(),
                "generators": {"sampler": self.sampler.get_state(), "shuffler": self.shuffler.get_state()},
                **({"privileged_critic": self.critic.state_dict()} if self.critic is not None else {})}

    def load(self, state: dict[str, Any]) -> None:
        """Continue from a run state's trained state."""
        self.model.load_state_dict(state["model"])
        if self.critic is not None:
            self.critic.load_state_dict(state["privileged_critic"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.value_optimizer.load_state_dict(state["critic"])
        self.value_norm.load_state_dict(state["value_norm"])
        self.sampler.set_state(state["generators"]["sampler"])
        self.shuffler.set_state(state["generators"]["shuffler"])


@dataclass
class Progress:
    """How far the run is: env steps, PPO updates, seconds spent training, the (env step, score) of every
    validation so far, the env step of the last resumable state written and the file the selected policy was
    exported to (None before the first export)."""

    global_step: int = 0
    update: int = 0
    seconds: float = 0.0
    validation: list[tuple[int, float]] = field(default_factory=list)
    saved_at: int = 0
    selected: Path | None = None


def start_torch(config: RunSettings) -> torch.device:
    """The run's torch device, after setting its CPU threads and seeding the global generator (which the
    weights' initialisation draws from)."""
    if config.device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {config.device!r}: CUDA is not available on this machine")
    torch.set_num_threads(config.threads)
    device = torch.device(config.device)
    torch.manual_seed(config.seed)
    return device


def validation_workloads(config: RunSettings) -> list[Path]:
    """The run's validation workload files: the mixture, then the stress test (if any)."""
    run = config.run_path
    workloads = [validation_workload(run / "validation.json", config.bank, config.env.task_set,
                                     config.env.arrival_prob, config.validation_roots, config.validation_episodes)]
    if config.validation_stress_episodes:
        workloads.append(validation_workload(run / "validation_stress.json", config.bank, "stress", 0.0, 1,
                                             config.validation_stress_episodes))
    return workloads


def training_manifest(config: RunSettings, model: MATModel, step: int, seconds: float,
                      validation: Sequence[tuple[int, float]], role: str = "selected",
                      **details: Any) -> dict[str, Any]:
    """How an exported policy was trained (the JSON beside it): the method, the whole config, the architecture,
    the step and ``role`` (``selected``: the checkpoint rule's pick; ``snapshot``: a learning-curve export),
    the checkpoint rule in words and its validation scores, the data (bank and its SHA-256, task set, curve
    splits, the arrival loads trained on), the frozen predictor and its SHA-256, and the code and torch
    versions; ``details`` adds what one recipe alone records."""
    fm = Path(config.fm_checkpoint or DEFAULT_FM)
    uses_fm = config.predictor == "fm"
    return {
        "format": "mara-mat-manifest", "method": config.method, **details,
        "config": config.record(), "hparams": model.hparams.to_dict(), "step": step, "role": role,
        "selection_rule": config.selection_rule(),
        "validation_scores": [{"step": at, "success_rate": score} for at, score in validation],
        "train_seconds": round(seconds, 1),
        "data": {"bank": portable_path(config.bank), "bank_sha256": bank_checksum(config.bank),
                 "task_set": config.env.task_set, "curve_splits": list(config.env.curve_splits),
                 "arrival_prob": config.training_loads()},
        "predictor": {"name": config.predictor, "checkpoint": portable_path(fm) if uses_fm else None,
                      "checkpoint_sha256": file_sha256(fm) if uses_fm else None},
        "git_commit": git_commit(), "torch": torch.__version__,
        "created_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def initial_policy(config: MATTrainConfig, device: torch.device) -> MATModel | None:
    """The exported policy ``--init-from`` names (frozen: the KL penalty's reference), or None.  It must have
    been trained in this run's setting (M, node speeds, c): a run does not inherit its start's setting but is
    given it, like every other setting, so a mismatch is refused with the flags that would match."""
    if not config.finetune.init_from:
        return None
    reference, predictor, setting = load_policy(config.finetune.init_from, device, verify=not config.unverified)
    if setting != config.setting:
        trained = setting.describe() if setting is not None else "an unrecorded setting"
        hint = f"; add {setting.flags()}" if setting is not None else ""
        raise ValueError(f"--init-from {config.finetune.init_from}: trained in {trained}, this run is in "
                         f"{config.setting.describe()}{hint}")
    if predictor != config.predictor or reference.hparams != config.hparams():
        raise ValueError(f"--init-from {config.finetune.init_from}: trained with predictor {predictor!r} and "
                         f"{reference.hparams}, this run has {config.predictor!r} and {config.hparams()}")
    return reference.requires_grad_(False)


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


def setup(config: MATTrainConfig) -> tuple[Learner, Demand]:
    """A fresh learner (random weights, or ``--init-from``'s) and the frozen demand stage."""
    device = start_torch(config)
    prepare_fresh_run(config, config.run_path / "last.pt")
    demand = make_demand(config.predictor, config.fm_checkpoint, config.device, verify=not config.unverified)
    model = MATModel(config.hparams()).to(device)
    start = initial_policy(config, device)
    if start is not None:
        model.load_state_dict(start.state_dict())
    critic = PrivilegedCritic(config.hparams()).to(device) if config.finetune.privileged_critic else None
    trained = list(model.parameters()) + (list(critic.parameters()) if critic is not None else [])
    values = critic if critic is not None else model.value_head  # what the critic-only warm-up fits
    learner = Learner(model=model, critic=critic, optimizer=torch.optim.Adam(trained, lr=config.ppo.lr, eps=1e-5),
                      value_optimizer=torch.optim.Adam(values.parameters(), lr=config.ppo.lr, eps=1e-5),
                      value_norm=ValueNorm().to(device),
                      sampler=torch.Generator(device=device).manual_seed(config.seed),
                      shuffler=torch.Generator().manual_seed(config.seed + 1),
                      reference=start if config.finetune.reference_kl > 0 else None)
    return learner, demand


def checked_state(path: Path, config: MATTrainConfig) -> dict[str, Any]:
    """The saved run state, refusing to resume a run started with different training settings (a state
    written before the ``finetune`` group existed is read in today's layout)."""
    state = load_run_state(path)
    changed = changed_run_settings(upgrade_record(state["config"]), config)
    if changed:
        raise ValueError(f"{path}: cannot resume, the run was started with different {changed}; "
                         "use another --run-dir or --no-resume")
    return state


def restore(config: MATTrainConfig, learner: Learner) -> Progress:
    """Continue from ``<run_dir>/last.pt`` when resuming and it exists; else a run at step 0."""
    path = config.run_path / "last.pt"
    if not (config.resume and path.exists()):
        return Progress()
    state = checked_state(path, config)
    learner.load(state)
    print(f"resumed {path} at env step {state['global_step']}", flush=True)
    selected = state.get("selected", state["config"]["out"] or str(config.run_path / "selected.pt"))
    return Progress(state["global_step"], state["update"], state["seconds"],
                    [(int(step), float(score)) for step, score in state["validation"]], state["global_step"],
                    Path(selected).resolve() if state["validation"] else None)


def flatten(rollout: Rollout, advantages: torch.Tensor, returns: torch.Tensor,
            reference: MATModel | None = None) -> Rollout:
    """(T, N, …) rollout → (T·N, …) PPO batch, with the actions' log-probs under ``reference`` if given."""
    batch = rollout.flatten(advantages, returns)
    if reference is None:
        return batch
    with torch.no_grad():
        reference_log_probs = reference.evaluate(Tokens(batch.slots, batch.glob, batch.present, batch.nodes),
                                                 batch.actions)[0]
    return dataclasses.replace(batch, reference_log_probs=reference_log_probs)


def crossed(step: int, steps: int, every: int) -> bool:
    """Whether the update that ended at env step ``step`` (after ``steps`` more) crossed a multiple of ``every``."""
    return bool(every) and step // every > (step - steps) // every


def success_rates(episodes: deque[dict[str, float]]) -> list[float]:
    """The success rates of the episodes that had a task to succeed at."""
    return [e["success_rate"] for e in episodes if np.isfinite(e["success_rate"])]


def log_update(writer: SummaryWriter, config: MATTrainConfig, progress: Progress, stats: dict[str, float],
               finished: list[dict[str, float]], recent: deque[dict[str, float]],
               seconds: tuple[float, float]) -> None:
    """TensorBoard scalars of one PPO update (and a printed line with ``--progress``): the episodes it finished
    (kept in ``recent``), its loss statistics, and its ``seconds``: (collecting, the whole update)."""
    step, steps = progress.global_step, config.rollout_steps * config.num_envs
    for episode in finished:
        recent.append(episode)
        writer.add_scalar("charts/episode_return", episode["return"], step)
        if np.isfinite(episode["success_rate"]):
            writer.add_scalar("charts/success_rate", episode["success_rate"], step)
    for key, value in stats.items():
        writer.add_scalar(f"losses/{key}", value, step)
    collecting, elapsed = seconds
    writer.add_scalar("charts/steps_per_second", steps / elapsed, step)
    writer.add_scalar("charts/rollout_seconds", collecting, step)
    if config.progress:
        rates = success_rates(recent)
        print(f"update {progress.update} step {step} sps {steps / elapsed:.0f} (rollout {collecting:.1f}s) "
              f"success {np.mean(rates) if rates else float('nan'):.3f} entropy {stats['entropy']:.3f} "
              f"value_loss {stats['value_loss']:.3f}", flush=True)


def manifest(config: MATTrainConfig, learner: Learner, progress: Progress, recent: deque[dict[str, float]],
             role: str = "selected") -> dict[str, Any]:
    """How the exported policy was trained: the shared manifest, with the recent training episodes' mean
    success rate and the starting policy of a fine-tuning run."""
    rates = success_rates(recent)
    init_from = config.finetune.init_from
    return training_manifest(
        config, learner.model, progress.global_step, progress.seconds, progress.validation, role,
        train_success_rate_last_episodes=float(np.mean(rates)) if rates else None,
        train_episodes_in_that_mean=len(rates),
        initial_policy=({"checkpoint": portable_path(init_from), "checkpoint_sha256": file_sha256(init_from)}
                        if init_from else None))


def record_score(validation: list[tuple[int, float]], step: int, score: float) -> bool:
    """Append ``(step, score)`` to a run's validation scores; True when it is the best so far (the checkpoint
    rule exports it then; ties keep the earlier one)."""
    best = max((s for _, s in validation), default=-1.0)
    validation.append((step, score))
    return score > best


def validate(config: MATTrainConfig, learner: Learner, progress: Progress, demand: Demand, workloads: list[Path],
             recent: deque[dict[str, float]], writer: SummaryWriter) -> None:
    """The checkpoint rule at the current step: score the greedy policy on the validation workloads and
    export it when it scores best so far."""
    step = progress.global_step
    score = validation_score(learner.model, demand.predictor, workloads, config.bank, **config.play_options())
    writer.add_scalar("charts/validation_success_rate", score, step)
    print(f"validation at step {step}: success {score:.4f}", flush=True)
    if record_score(progress.validation, step, score):
        export_policy(config.out_path, learner.model, config.predictor,
                      manifest(config, learner, progress, recent), config.setting)
        progress.selected = config.out_path.resolve()


def save(config: MATTrainConfig, learner: Learner, progress: Progress, demand: Demand, workloads: list[Path],
         recent: deque[dict[str, float]], writer: SummaryWriter) -> None:
    """After an update: apply the checkpoint rule when a validation is due (export the model if it scores
    best so far), export a learning-curve snapshot when one is due, and write the resumable state after a
    validation, every ``checkpoint_every`` env steps and at the end."""
    step, steps = progress.global_step, config.rollout_steps * config.num_envs
    last = step >= config.steps
    if workloads and (crossed(step, steps, config.validate_every) or last):
        validate(config, learner, progress, demand, workloads, recent, writer)
    if config.snapshot_every and (crossed(step, steps, config.snapshot_every) or last):
        export_policy(config.run_path / "snapshots" / f"step_{step}.pt", learner.model, config.predictor,
                      manifest(config, learner, progress, recent, role="snapshot"), config.setting)
    validated = bool(progress.validation) and progress.validation[-1][0] == step
    if validated or step - progress.saved_at >= config.checkpoint_every or last:
        save_run_state(config.run_path / "last.pt", {
            **learner.state(), "global_step": step, "update": progress.update, "seconds": progress.seconds,
            "config": config.record(), "validation": progress.validation,
            **({"selected": str(progress.selected)} if progress.selected is not None else {})})
        progress.saved_at = step


def train(config: MATTrainConfig) -> TrainResult:
    """Run (or resume) one MAT training run; returns where the selected policy was exported."""
    learner, demand = setup(config)
    progress = restore(config, learner)
    workloads = validation_workloads(config) if config.validate_every else []
    envs = VectorRollout(config.env, config.num_envs, demand, seed=(config.seed, progress.global_step),
                         device=torch.device(config.device))
    writer = SummaryWriter(str(config.run_path / "tb"), purge_step=progress.global_step)
    ppo, steps = config.ppo, config.rollout_steps * config.num_envs
    recent: deque[dict[str, float]] = deque(maxlen=RECENT_EPISODES)
    started, first_step, resumed_seconds = time.perf_counter(), progress.global_step, progress.seconds
    if workloads and config.finetune.start_candidate and progress.global_step == 0 and not progress.validation:
        validate(config, learner, progress, demand, workloads, recent, writer)  # the start is a candidate too
    if progress.global_step >= config.steps:
        print(f"{config.run_path} holds a run that already finished at env step {progress.global_step} "
              f"(--steps {config.steps}); nothing to train", flush=True)
    while progress.global_step < config.steps:
        tick = time.perf_counter()
        if ppo.anneal_lr:
            for group in learner.optimizer.param_groups:
                group["lr"] = ppo.lr * (1.0 - progress.global_step / config.steps)
        rollout = envs.collect(learner.model, learner.value_norm, config.rollout_steps, learner.sampler,
                               learner.critic)
        collected = time.perf_counter()
        advantages, returns = gae(rollout.rewards, rollout.values, rollout.dones, rollout.last_value, ppo.gamma,
                                  ppo.gae_lambda)
        warming = progress.update < config.finetune.critic_warmup  # fit the values alone, the policy waits
        stats = ppo_update(learner.model, learner.value_optimizer if warming else learner.optimizer,
                           flatten(rollout, advantages, returns, learner.reference), learner.value_norm, ppo,
                           learner.shuffler, critic_only=warming, critic=learner.critic,
                           kl_weight=config.finetune.reference_kl)
        progress.global_step += steps
        progress.update += 1
        elapsed = time.perf_counter() - tick
        progress.seconds += elapsed
        log_update(writer, config, progress, stats, envs.drain_finished(), recent, (collected - tick, elapsed))
        save(config, learner, progress, demand, workloads, recent, writer)
    if not workloads:
        export_policy(config.out_path, learner.model, config.predictor, manifest(config, learner, progress, recent),
                      config.setting)
        progress.selected = config.out_path.resolve()
    writer.close()
    checkpoint = config.out_path
    if progress.selected is not None and progress.selected != config.out_path.resolve():
        print(f"nothing was written to {config.out_path}: the selected policy of this run (its best validation "
              f"score) is {progress.selected}", flush=True)
        checkpoint = progress.selected
    return TrainResult(checkpoint, progress.global_step, time.perf_counter() - started,
                       ((progress.global_step - first_step) / (progress.seconds - resumed_seconds))
                       if progress.seconds > resumed_seconds else float("nan"))
