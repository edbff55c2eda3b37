"""MAT policy files: the small exported policy (+ JSON manifest), written by training and read by
:mod:`mara_agents.allocators.mat`.  Writes are atomic and reads verified (:mod:`mara_agents.checkpoint_io`).
Both training recipes describe what they export with one :func:`training_manifest`."""

from __future__ import annotations

import datetime
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from mara_agents.checkpoint_io import (CheckpointError, atomic_torch_save, bank_checksum, file_sha256, git_commit,
                                       portable_path, read_checkpoint, write_checksum_manifest)
from mara_agents.mat.model import MATHyperParameters, MATModel
from mara_agents.predictors.fm.predictor import DEFAULT_CHECKPOINT as DEFAULT_FM

if TYPE_CHECKING:
    from mara_agents.mat.config import RunSettings

FORMAT = "mara-mat-policy"
VERSION = 1


def export_policy(path: str | os.PathLike[str], model: MATModel, predictor: str,
                  manifest: dict[str, Any]) -> None:
    """Write the policy weights (no optimiser state) and ``<path>.json`` describing how it was trained, with
    the checkpoint's SHA-256 that loading verifies."""
    atomic_torch_save({"format": FORMAT, "version": VERSION, "hparams": model.hparams.to_dict(),
                       "predictor": predictor,
                       "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()}}, path)
    write_checksum_manifest(path, manifest)


def load_policy_model(path: str | os.PathLike[str], device: str | torch.device = "cpu",
                      verify: bool = True) -> tuple[MATModel, str]:
    """(model in eval mode, the predictor name it was trained with) from an exported checkpoint
    (``verify=False``: one without a manifest is accepted)."""
    path = Path(path)
    payload = read_checkpoint(path, kind="MAT", fmt=FORMAT, version=VERSION, train_hint="python train.py mat",
                              verify=verify)
    try:
        model = MATModel(MATHyperParameters(**payload["hparams"]))
        model.load_state_dict(payload["state_dict"])
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:
        raise CheckpointError(f"{path}: checkpoint does not match the MAT architecture: {exc}") from exc
    return model.to(device).eval(), str(payload["predictor"])


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
