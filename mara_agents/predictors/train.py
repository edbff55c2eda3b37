"""Stage I: train the flow-matching predictor on the curve bank (paper §4.4, Algorithm 1 lines 2–11).

One training example is (curve, prefix S_0 of ≥ 4 batches, horizon h inside the stored suffix) drawn from the
``train`` curves of the ID families; the model is the one with the lowest flow-matching loss on a fixed set
of ``val`` examples, and training stops when that loss has not improved for ``patience`` evaluations.

Reproducible and resumable: the examples, noise and flow times of step k are drawn from a generator seeded
by (seed, k), so a run killed at any point and resumed from ``<run_dir>/last.pt`` (written atomically at
every evaluation, and at the last whole step when SIGINT or SIGTERM stops the run) continues exactly as if
it had never stopped.  The selected model is written to ``out``
(small) with a JSON manifest beside it recording how it was trained.

Run ``python -m mara_agents.predictors.train --help`` (or ``python train.py fm``); TensorBoard logs go to
``<run_dir>/tb``.
"""

from __future__ import annotations

import dataclasses
import datetime
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import math

import numpy as np
import torch
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

from mara_common import checks
from curves.bank import DEFAULT_BANK, CurveBank, load_bank
from mara_common.atomic import atomic_write_json
from mara_agents.play.checkpoints import (bank_checksum, file_sha256, git_commit, load_run_state, portable_path,
                                       remove_run_state, save_run_state)
from mara_common.config_cli import changed_settings, check_integers, check_run_files
from mara_common.config_cli import parse_config as parse_dataclass
from mara_agents.predictors.base import MIN_OBSERVATIONS
from mara_agents.predictors.fm.examples import (CurveSet, curves_checksum, draw_examples, example_tensors,
                                               flow_matching_objective, id_curve_set, path_noise)
from mara_agents.predictors.fm.model import FlowMatchingModel, FMHyperParameters
from mara_agents.predictors.fm.predictor import (
    DEFAULT_CHECKPOINT,
    load_model,
    save_checkpoint,
)

# Fields that may change when a run is resumed; every other field must match the saved run (paths compare by
# the file they name).
_RESUMABLE_CHANGES = frozenset({"device", "threads", "max_steps", "patience", "out", "resume", "force", "notes",
                                "run_dir", "progress"})
_PATHS = frozenset({"bank"})
MAX_EXAMPLES = 1 << 20  # examples in one batch or set: each is a padded curve prefix, so more would exhaust memory
MODEL_FLAGS = {"hidden": "GRU width", "history_points": "most prefix points the GRU reads",
               "width": "velocity-MLP hidden width", "time_dim": "sinusoidal time-embedding size"}


@dataclass
class FMTrainConfig:
    """Every setting of stage-I training; the command line is generated from these fields."""

    bank: str = field(default=str(DEFAULT_BANK), metadata={"help": "curve bank directory"})
    run_dir: str = field(default="runs/fm", metadata={"help": "TensorBoard logs and resumable state"})
    out: str = field(default=str(DEFAULT_CHECKPOINT), metadata={"help": "selected checkpoint (+ .json manifest)"})
    seed: int = field(default=0, metadata={"help": "seed of initialisation, examples, noise and flow times"})
    device: str = field(default="cpu", metadata={"help": "torch device: cpu or cuda"})
    threads: int = field(default=1, metadata={"help": "torch CPU threads"})
    batch_size: int = field(default=256, metadata={"help": "examples per optimisation step"})
    lr: float = field(default=1e-3, metadata={"help": "Adam learning rate"})
    grad_clip: float = field(default=1.0, metadata={"help": "gradient-norm clip"})
    max_steps: int = field(default=20000, metadata={"help": "hard limit on optimisation steps"})
    eval_every: int = field(default=250, metadata={"help": "steps between validation, checkpoint and logs"})
    patience: int = field(default=12, metadata={"help": "evaluations without val improvement before stopping"})
    val_examples: int = field(default=4096, metadata={"help": "fixed validation examples"})
    stats_examples: int = field(default=8192, metadata={"help": "training examples used to fix standardisation"})
    min_prefix: int = field(default=MIN_OBSERVATIONS, metadata={"help": "shortest prefix S_0 in batches"})
    resume: bool = field(default=True, metadata={"help": "continue from <run_dir>/last.pt when it exists"})
    init_from: str = field(default="", metadata={
        "help": "fine-tune: start from this FM checkpoint's weights and standardisation (same architecture)"})
    force: bool = field(default=False, metadata={
        "help": "with --no-resume, start afresh even if <run_dir> already holds a run (its state is replaced)"})
    notes: str = field(default="", metadata={"help": "free-text provenance recorded in the manifest"})
    progress: bool = field(default=True, metadata={"help": "show a progress bar"})
    model: FMHyperParameters = field(default_factory=FMHyperParameters, metadata={"flags": MODEL_FLAGS})

    def __post_init__(self) -> None:
        check_integers(self, ("threads", "batch_size", "max_steps", "eval_every", "patience", "val_examples",
                              "stats_examples", "min_prefix"), 1)
        if self.min_prefix < MIN_OBSERVATIONS:
            raise ValueError(f"min_prefix must be ≥ {MIN_OBSERVATIONS} (a predictor needs that many points), "
                             f"got {self.min_prefix}")
        for name in ("lr", "grad_clip"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
        if self.seed < 0:
            raise ValueError(f"seed must be ≥ 0, got {self.seed}")
        if self.max_steps < self.eval_every:
            raise ValueError(f"max_steps={self.max_steps} < eval_every={self.eval_every}: no validation would "
                             "select a model; raise --max-steps or lower --eval-every")
        for name in ("batch_size", "val_examples", "stats_examples"):
            checks.integer(name, getattr(self, name), 1, MAX_EXAMPLES)
        check_run_files(self.run_dir, self.out, device=self.device, threads=self.threads, bank=self.bank)

    def hparams(self) -> FMHyperParameters:
        """The model architecture these settings describe."""
        return self.model


@dataclass(frozen=True)
class TrainResult:
    """What a finished run produced."""

    checkpoint: Path
    manifest: Path
    best_val: float
    best_step: int
    steps: int
    seconds: float


class Validation:
    """A fixed validation set (examples, noise and flow times), so the val loss of a model is a number."""

    def __init__(self, curves: CurveSet, config: FMTrainConfig, hparams: FMHyperParameters, device: torch.device):
        rng = np.random.default_rng([config.seed, 1])
        self.batches = []
        for start in range(0, config.val_examples, 1024):
            n = min(1024, config.val_examples - start)
            batch = example_tensors(curves, draw_examples(curves, rng, n, config.min_prefix), hparams, device)
            self.batches.append((batch, *path_noise(rng, n, hparams.bins, device)))

    @torch.no_grad()
    def loss(self, model: FlowMatchingModel) -> float:
        """Mean Eq. (8) loss over the fixed validation set."""
        model.eval()
        total = sum(flow_matching_objective(model, *item).item() * len(item[1]) for item in self.batches)
        model.train()
        return total / sum(len(item[1]) for item in self.batches)


def fresh_model(train: CurveSet, config: FMTrainConfig, device: torch.device) -> FlowMatchingModel:
    """A seeded model whose standardisation is fixed from ``stats_examples`` training examples."""
    torch.manual_seed(config.seed)
    hparams = config.hparams()
    model = FlowMatchingModel(hparams)
    rng = np.random.default_rng([config.seed, 2])
    batch = example_tensors(train, draw_examples(train, rng, config.stats_examples, config.min_prefix), hparams,
                            torch.device("cpu"))
    model.set_statistics(batch["history"], batch["length"], batch["batch_size"], batch["static"], batch["target"])
    return model.to(device)


def initial_model(config: FMTrainConfig, device: torch.device) -> FlowMatchingModel:
    """The ``init_from`` checkpoint's model, to fine-tune; its architecture must be the one ``config`` names
    (a ``ValueError`` names the settings that differ)."""
    model = load_model(config.init_from, device)
    differ = {key: (value, getattr(config.hparams(), key)) for key, value in dataclasses.asdict(model.hparams).items()
              if getattr(config.hparams(), key) != value}
    if differ:
        raise ValueError(f"--init-from {config.init_from}: its architecture differs from this run's: "
                         + ", ".join(f"{key} {ours} here, {theirs} there" for key, (theirs, ours) in differ.items()))
    return model


def resumable_state(path: Path, config: FMTrainConfig, data_sha256: str) -> dict[str, Any]:
    """The saved state of an interrupted run (or the one before it, if the last fails its check); a changed
    config or changed training curves is a clear error."""
    state = load_run_state(path, warn=tqdm.write)
    changed = changed_settings(state["config"], dataclasses.asdict(config), _RESUMABLE_CHANGES, _PATHS)
    if changed:
        raise ValueError(f"{path}: cannot resume, the run was started with different {changed}; "
                         f"use another --run-dir or --no-resume --force")
    if state.get("data_sha256") != data_sha256:
        raise ValueError(f"{path}: cannot resume, the bank's train/val curves changed since the run started; "
                         f"use another --run-dir or --no-resume --force")
    return state


def write_manifest(config: FMTrainConfig, result: dict[str, Any], train: CurveSet, val: CurveSet,
                   bank_sha256: str) -> Path:
    """The JSON record of how the selected checkpoint was trained, beside it."""
    out = Path(config.out)
    manifest = out.with_suffix(".json")
    families = sorted({cid.split("/")[0] for cid in train.ids})
    atomic_write_json(manifest, {
        "format": "mara-fm-manifest", "checkpoint": out.name,
        "checkpoint_sha256": file_sha256(out), "checkpoint_bytes": out.stat().st_size,
        "config": {**dataclasses.asdict(config), "bank": portable_path(config.bank), "out": portable_path(out)},
        "hparams": config.hparams().to_dict(),
        "data": {"bank": portable_path(config.bank), "bank_sha256": bank_sha256,
                 "curves_sha256": curves_checksum(train, val),
                 "families": families, "train_curves": len(train.ids), "val_curves": len(val.ids),
                 "train_ids": list(train.ids), "val_ids": list(val.ids)},
        **result, "git_commit": git_commit(), "torch": torch.__version__,
        "created_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")})
    return manifest


@dataclass
class Progress:
    """Where a run stands, as ``last.pt`` saves it: steps taken, the best validation loss and its step, the
    evaluations since it last improved (early stopping counts them) and the training seconds so far."""

    step: int = 0
    best_val: float = math.inf
    best_step: int = 0
    stale: int = 0
    seconds: float = 0.0


def train(config: FMTrainConfig) -> TrainResult:
    """Run (or resume) stage-I training and write the selected checkpoint with its manifest."""
    run_dir = _check_run_dir(config)
    last, best = run_dir / "last.pt", run_dir / "best.pt"
    torch.set_num_threads(config.threads)
    device = torch.device(config.device)
    bank = load_bank(config.bank)  # first: a missing bank is one clear BankError
    bank_sha256 = bank_checksum(config.bank)
    train_set = id_curve_set(bank, "train", config.min_prefix)
    val_set = id_curve_set(bank, "val", config.min_prefix)
    data_sha256 = curves_checksum(train_set, val_set)
    run_dir.mkdir(parents=True, exist_ok=True)

    model = fresh_model(train_set, config, device) if not config.init_from else initial_model(config, device)
    optimiser = torch.optim.Adam(model.parameters(), lr=config.lr)
    progress = _restore(config, last, best, model, optimiser, data_sha256)
    validation = Validation(val_set, config, config.hparams(), device)
    _optimise(config, model, optimiser, progress, train_set, validation, data_sha256)

    if not best.exists():
        raise ValueError(f"no validation happened: max_steps={config.max_steps} < eval_every={config.eval_every}")
    save_checkpoint(config.out, load_model(best), {"step": progress.best_step, "val_loss": progress.best_val})
    manifest = write_manifest(config, {"val_loss": progress.best_val, "best_step": progress.best_step,
                                       "steps_trained": progress.step,
                                       "stopped": "early" if progress.stale >= config.patience else "max_steps",
                                       "train_seconds": round(progress.seconds, 1)}, train_set, val_set, bank_sha256)
    return TrainResult(Path(config.out), manifest, progress.best_val, progress.best_step, progress.step,
                       progress.seconds)


def _check_run_dir(config: FMTrainConfig) -> Path:
    """The run directory, after refusing an unavailable CUDA device and a run ``--no-resume`` would replace
    without ``--force`` (with ``--force``, the old run's state is removed)."""
    if config.device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"--device {config.device}: CUDA is not available on this machine")
    run_dir = Path(config.run_dir)
    last = run_dir / "last.pt"
    if not config.resume and last.exists():
        if not config.force:
            raise ValueError(f"{run_dir} already holds a training run; --no-resume would replace it: add --force "
                             "to do so, or choose another --run-dir")
        remove_run_state(last)
    return run_dir


def _restore(config: FMTrainConfig, last: Path, best: Path, model: FlowMatchingModel,
             optimiser: torch.optim.Optimizer, data_sha256: str) -> Progress:
    """Load an interrupted run's model, optimiser and progress from ``last``; a fresh run starts from step 0 and
    removes an earlier run's ``best``."""
    if not (config.resume and last.exists()):
        best.unlink(missing_ok=True)  # a fresh run must not select a model left by an earlier one
        return Progress()
    state = resumable_state(last, config, data_sha256)
    model.load_state_dict(state["model"])
    optimiser.load_state_dict(state["optimizer"])
    progress = Progress(state["step"], state["best_val"], state["best_step"], state["stale"], state["seconds"])
    tqdm.write(f"resuming {last} at step {progress.step} (best val {progress.best_val:.4f} at step "
               f"{progress.best_step})")
    return progress


def _optimise(config: FMTrainConfig, model: FlowMatchingModel, optimiser: torch.optim.Optimizer, progress: Progress,
              train_set: CurveSet, validation: Validation, data_sha256: str) -> None:
    """Take Adam steps until ``max_steps`` or early stopping, validating (and saving ``last.pt``, and
    ``best.pt`` on a new best) every ``eval_every`` steps; on Ctrl-C or SIGTERM the last whole step is saved."""
    run_dir = Path(config.run_dir)
    hparams, device = config.hparams(), torch.device(config.device)
    writer = SummaryWriter(str(run_dir / "tb"), purge_step=progress.step or None)
    bar = tqdm(total=config.max_steps, initial=progress.step, desc="FM stage I", unit="step",
               disable=not config.progress)
    started, running = time.perf_counter() - progress.seconds, 0.0

    def save_state() -> None:
        save_run_state(run_dir / "last.pt", {
            "config": dataclasses.asdict(config), "model": model.state_dict(), "optimizer": optimiser.state_dict(),
            "step": progress.step, "best_val": progress.best_val, "best_step": progress.best_step,
            "stale": progress.stale, "seconds": time.perf_counter() - started, "data_sha256": data_sha256})

    model.train()
    saved, finished = progress.step, True  # the step last.pt holds; whether model and step agree (no half update)
    try:
        while progress.step < config.max_steps and progress.stale < config.patience:
            rng = np.random.default_rng([config.seed, 3, progress.step])
            batch = example_tensors(train_set, draw_examples(train_set, rng, config.batch_size, config.min_prefix),
                                    hparams, device)
            loss = flow_matching_objective(model, batch, *path_noise(rng, config.batch_size, hparams.bins, device))
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
            finished = False
            optimiser.step()
            progress.step += 1
            finished = progress.step % config.eval_every != 0  # a step whose validation is due is not whole yet
            running += loss.item()
            bar.update(1)
            if progress.step % config.eval_every == 0:
                val = _validate(model, validation, progress, writer, running / config.eval_every, run_dir / "best.pt")
                bar.set_postfix(val=f"{val:.4f}", best=f"{progress.best_val:.4f}@{progress.best_step}")
                running = 0.0
                save_state()
                saved, finished = progress.step, True
    except KeyboardInterrupt:
        if finished and progress.step > saved:  # the last whole step: resuming from it repeats and skips nothing
            save_state()
        raise
    finally:
        bar.close()
        writer.close()
    progress.seconds = time.perf_counter() - started


def _validate(model: FlowMatchingModel, validation: Validation, progress: Progress, writer: SummaryWriter,
              train_loss: float, best: Path) -> float:
    """One evaluation: log the mean training loss since the last one and the validation loss, keep a new best
    model in ``best`` and count an evaluation without improvement; returns the validation loss."""
    val = validation.loss(model)
    writer.add_scalar("train/loss", train_loss, progress.step)
    writer.add_scalar("val/loss", val, progress.step)
    if val < progress.best_val:
        progress.best_val, progress.best_step, progress.stale = val, progress.step, 0
        save_checkpoint(best, model, {"step": progress.step, "val_loss": val})
    else:
        progress.stale += 1
    return val


def parse_config(argv: Sequence[str] | None = None) -> FMTrainConfig:
    """The command line generated from :class:`FMTrainConfig` (``--batch-size``, ``--hidden``, ``--no-resume``, …)."""
    return parse_dataclass(FMTrainConfig, argv, "python train.py fm", __doc__.split("\n\n")[0])


def describe(result: TrainResult) -> str:
    """Where the checkpoint went and how the run went, in one line."""
    return (f"FM checkpoint {result.checkpoint} (val loss {result.best_val:.4f} at step {result.best_step}, "
            f"{result.steps} steps, {result.seconds:.0f} s); manifest {result.manifest}")


def main(argv: Sequence[str] | None = None) -> TrainResult:
    """Command-line entry point: parse, train, print where the checkpoint went."""
    result = train(parse_config(argv))
    print(describe(result))
    return result


if __name__ == "__main__":
    main()
