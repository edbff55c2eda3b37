"""``python train.py mat-il``: the MAT-IL recipe — the paper's MAT architecture trained by DAgger from a
privileged expert (:mod:`mara_agents.mat.imitation`).  Not the paper's recipe; ``mara`` stays the
reproduction (``python train.py mat``).

**Checkpoint rule (fixed before any evaluation)**, the same as MARA's: after every DAgger round the greedy
student is scored on the run's validation workloads (the mixture at ``--arrival-prob`` and the small stress
test, both drawn from ``val`` curves with the training runs' selection seed, equal weight) and the
best-scoring model is exported (ties keep the earlier one).  No test curve is ever played.

The run writes TensorBoard logs (``<run_dir>/tb``: imitation loss and agreement, β, data-set size, episode
success rate of the mixed expert/student play, env steps/s, validation score) and prints the training cost:
env steps/s of data collection and the wall time of the whole recipe.  It is short (minutes), so it does not
resume: rerun it with ``--force`` to replace a run directory.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.tensorboard import SummaryWriter

from curves import checks
from curves.bank import DEFAULT_BANK
from mara_agents.checkpoint_io import bank_checksum, file_sha256, git_commit, portable_path
from mara_agents.config_cli import check_integers, check_run_files
from mara_agents.config_cli import parse_config as parse_dataclass
from mara_agents.mat.checkpoint import export_policy
from mara_agents.mat.imitation import ExpertRollout, ImitationSettings, LabelledStates, environment_configs, fit
from mara_agents.mat.model import MATHyperParameters, MATModel
from mara_agents.mat.train import TrainResult
from mara_agents.mat.validation import VALIDATION_SEED, validation_score, validation_workload
from mara_agents.predictors.demand import PREDICTORS, make_demand
from mara_agents.predictors.fm.predictor import DEFAULT_CHECKPOINT as DEFAULT_FM
from mara_env.config import MARAConfig

METHOD = "mat-il"
ENV_FLAGS = {
    "arrival_prob": "load p of the validation mixture (training loads: --load-low to --load-high)",
    "task_set": "training and validation task set (train/val curves only)",
    "bank": "curve bank directory (default: the shipped curves/bank)",
}
MAX_ENVS = 4096  # parallel environments, each holding its episode and the expert's view of it


@dataclass
class MATILConfig:
    """MAT-IL settings; ``python train.py mat-il --help`` lists them."""

    seed: int = field(default=0, metadata={"help": "seed of initialisation, episodes and the expert/student mix"})
    predictor: str = field(default="fm", metadata={"help": "frozen demand predictor the student sees: fm or wls"})
    fm_checkpoint: str = field(default="", metadata={"help": "FM predictor checkpoint ('' = the shipped one)"})
    num_envs: int = field(default=16, metadata={"help": "parallel environments (loads spread over the range)"})
    validation_roots: int = field(default=4, metadata={"help": "roots of the validation mixture"})
    validation_episodes: int = field(default=12, metadata={"help": "episodes per root of the validation mixture"})
    validation_stress_episodes: int = field(default=8, metadata={"help": "stress episodes of the validation"})
    device: str = field(default="cpu", metadata={"help": "torch device: cpu or cuda"})
    threads: int = field(default=1, metadata={"help": "torch CPU threads"})
    run_dir: str = field(default="", metadata={"help": "logs and validation workloads ('' = runs/mat-il/seed<S>)"})
    out: str = field(default="", metadata={
        "help": "exported checkpoint ('' = <run_dir>/selected.pt); a .json manifest goes beside it"})
    force: bool = field(default=False, metadata={"help": "replace a run directory that already holds a run"})
    unverified: bool = field(default=False, metadata={
        "help": "accept an --fm-checkpoint without a manifest to verify it against"})
    progress: bool = field(default=True, metadata={"help": "print a line per DAgger round"})
    env: MARAConfig = field(default_factory=MARAConfig, metadata={"flags": ENV_FLAGS})
    imitation: ImitationSettings = field(default_factory=ImitationSettings)
    model: MATHyperParameters = field(default_factory=MATHyperParameters)

    def __post_init__(self) -> None:
        if self.predictor not in PREDICTORS:
            raise ValueError(f"predictor must be one of {PREDICTORS}, got {self.predictor!r}")
        check_integers(self, ("seed", "validation_stress_episodes"), 0)
        check_integers(self, ("num_envs", "validation_roots", "validation_episodes", "threads"), 1)
        if self.env.observation != "dict" or self.env.workload is not None:
            raise ValueError("env: MAT-IL trains on the dict observation of random episodes")
        if self.imitation.stress_envs >= self.num_envs:
            raise ValueError(f"stress_envs ({self.imitation.stress_envs}) must be below num_envs ({self.num_envs})")
        checks.integer("num_envs", self.num_envs, 1, MAX_ENVS)
        check_run_files(self.run_path, self.out_path, device=self.device, threads=self.threads, bank=self.env.bank,
                        inputs={"fm_checkpoint": self.fm_checkpoint})

    @property
    def run_path(self) -> Path:
        return Path(self.run_dir or f"runs/mat-il/seed{self.seed}")

    @property
    def out_path(self) -> Path:
        return Path(self.out) if self.out else self.run_path / "selected.pt"

    def hparams(self) -> MATHyperParameters:
        """The architecture: ``model`` with the env's node and slot counts."""
        return dataclasses.replace(self.model, num_nodes=self.env.num_nodes, num_slots=self.env.max_active)


def parse_config(argv: Sequence[str] | None = None) -> MATILConfig:
    """The command line generated from :class:`MATILConfig`."""
    return parse_dataclass(MATILConfig, argv, "python train.py mat-il",
                           "Train MAT by DAgger from a privileged expert (MAT-IL; not the paper's recipe).")


def as_record(config: MATILConfig) -> dict[str, Any]:
    """The config as plain JSON-able data."""
    record = dataclasses.asdict(config)
    record["env"]["curve_splits"] = list(config.env.curve_splits)
    return record


def manifest(config: MATILConfig, model: MATModel, step: int, seconds: float,
             validation: list[tuple[int, float]]) -> dict[str, Any]:
    """How the exported policy was trained (JSON beside the checkpoint)."""
    bank = config.env.bank or str(DEFAULT_BANK)
    fm = Path(config.fm_checkpoint or DEFAULT_FM)
    uses_fm = config.predictor == "fm"
    return {
        "format": "mara-mat-manifest", "method": METHOD, "paper_recipe": False,
        "recipe": "DAgger from the privileged slack expert (mara_agents/mat/imitation.py)",
        "config": as_record(config), "hparams": model.hparams.to_dict(), "step": step, "role": "selected",
        "selection_rule": (f"highest greedy success rate on the validation workloads ({config.validation_roots} "
                           f"roots x {config.validation_episodes} episodes, {config.env.task_set}, "
                           f"p={config.env.arrival_prob}, and {config.validation_stress_episodes} stress "
                           "episodes, equal weight; val curves), scored after every DAgger round; ties keep "
                           "the earlier model (fixed before evaluation; no test curve used)"),
        "validation_scores": [{"step": s, "success_rate": v} for s, v in validation],
        "train_seconds": round(seconds, 1),
        "data": {"bank": portable_path(bank), "bank_sha256": bank_checksum(bank), "task_set": config.env.task_set,
                 "curve_splits": list(config.env.curve_splits),
                 "arrival_prob": [config.imitation.load_low, config.imitation.load_high]},
        "predictor": {"name": config.predictor, "checkpoint": portable_path(fm) if uses_fm else None,
                      "checkpoint_sha256": file_sha256(fm) if uses_fm else None},
        "git_commit": git_commit(), "torch": torch.__version__,
        "created_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def prepare_run(config: MATILConfig) -> Path:
    """The run directory, empty: one that holds a previous run is replaced only with ``--force``."""
    run = config.run_path
    if run.exists() and any(run.iterdir()):
        if not config.force:
            raise ValueError(f"{run} already holds a run; add --force to replace it, or choose another --run-dir")
        shutil.rmtree(run)
    run.mkdir(parents=True, exist_ok=True)
    return run


def train_il(config: MATILConfig) -> TrainResult:
    """Run the MAT-IL recipe; returns where the selected policy was exported and the training cost."""
    if config.device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {config.device!r}: CUDA is not available on this machine")
    started = time.perf_counter()
    torch.set_num_threads(config.threads)
    torch.manual_seed(config.seed)
    device = torch.device(config.device)
    run = prepare_run(config)
    settings = config.imitation
    bank = config.env.bank or str(DEFAULT_BANK)
    demand = make_demand(config.predictor, config.fm_checkpoint, config.device, verify=not config.unverified)
    model = MATModel(config.hparams()).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=settings.bc_lr)
    workloads = [validation_workload(run / "validation.json", bank, config.env.task_set, config.env.arrival_prob,
                                     config.validation_roots, config.validation_episodes, VALIDATION_SEED)]
    if config.validation_stress_episodes:
        workloads.append(validation_workload(run / "validation_stress.json", bank, "stress", 0.0, 1,
                                             config.validation_stress_episodes, VALIDATION_SEED))
    rollout = ExpertRollout(environment_configs(config.env, settings, config.num_envs), demand, config.seed, device)
    rng = np.random.default_rng(config.seed)
    shuffler = torch.Generator().manual_seed(config.seed + 1)
    writer = SummaryWriter(str(run / "tb"))
    data = LabelledStates()
    vector_steps = math.ceil(settings.round_steps / config.num_envs)
    step, collect_seconds, validation = 0, 0.0, []
    for round_index in range(settings.rounds):
        beta = settings.beta_decay ** round_index
        tick = time.perf_counter()
        rollout.collect(model, vector_steps, beta, rng, data)
        collected = time.perf_counter()
        stats = fit(model, optimizer, data, settings, shuffler, device)
        fitted = time.perf_counter()
        step += vector_steps * config.num_envs
        collect_seconds += collected - tick
        score = validation_score(model, demand.predictor, workloads, bank)
        rates = rollout.drain_finished()
        for key, value in {**stats, "beta": beta, "states": len(data),
                           "fit_seconds": fitted - collected}.items():
            writer.add_scalar(f"imitation/{key}", value, step)
        writer.add_scalar("charts/steps_per_second", vector_steps * config.num_envs / (collected - tick), step)
        writer.add_scalar("charts/validation_success_rate", score, step)
        if rates:
            writer.add_scalar("charts/success_rate", float(np.nanmean(rates)), step)
        if config.progress:
            print(f"round {round_index} step {step} beta {beta:.3f} states {len(data)} "
                  f"sps {vector_steps * config.num_envs / (collected - tick):.0f} fit {fitted - collected:.0f}s "
                  f"loss {stats['imitation_loss']:.3f} agreement {stats['agreement']:.3f} "
                  f"validation {score:.4f}", flush=True)
        best = max((s for _, s in validation), default=-1.0)
        validation.append((step, score))
        if score > best:
            export_policy(config.out_path, model, config.predictor,
                          manifest(config, model, step, time.perf_counter() - started, validation))
    writer.close()
    seconds = time.perf_counter() - started
    return TrainResult(config.out_path, step, seconds, step / collect_seconds if collect_seconds else float("nan"))


def main(argv: Sequence[str] | None = None) -> TrainResult:
    """Parse the command line and train (``train.py`` reports errors and the result)."""
    return train_il(parse_config(argv))
