"""MAT checkpoint files: the small exported policy (+ JSON manifest) and the resumable run state.

Every write goes to a temporary file beside the target and is renamed over it (``os.replace``), so a run
killed mid-write never leaves a truncated checkpoint.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from curves.bank import atomic_write_json
from mara_agents.checkpoint_io import CheckpointError, atomic_torch_save, read_checkpoint
from mara_agents.mat.model import MATHyperParameters, MATModel
from mara_agents.mat.ppo import ValueNorm

FORMAT = "mara-mat-policy"
VERSION = 1


def export_policy(path: str | os.PathLike[str], model: MATModel, predictor: str,
                  manifest: dict[str, Any]) -> None:
    """Write the policy weights (no optimiser state) and ``<path>.json`` describing how it was trained."""
    atomic_torch_save({"format": FORMAT, "version": VERSION, "hparams": model.hparams.to_dict(), "predictor": predictor,
                 "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()}}, path)
    atomic_write_json(Path(path).with_suffix(".json"), manifest)


def load_policy_model(path: str | os.PathLike[str], device: str | torch.device = "cpu") -> tuple[MATModel, str]:
    """(model in eval mode, the predictor name it was trained with) from an exported checkpoint."""
    path = Path(path)
    payload = read_checkpoint(path, kind="MAT", fmt=FORMAT, version=VERSION, train_hint="python train.py mat")
    try:
        model = MATModel(MATHyperParameters(**payload["hparams"]))
        model.load_state_dict(payload["state_dict"])
    except (KeyError, TypeError, RuntimeError) as exc:
        raise CheckpointError(f"{path}: checkpoint does not match the MAT architecture: {exc}") from exc
    return model.to(device).eval(), str(payload["predictor"])


def save_run_state(path: str | os.PathLike[str], *, model: MATModel, optimizer: torch.optim.Optimizer,
                   value_norm: ValueNorm, generators: dict[str, torch.Tensor], global_step: int, update: int,
                   seconds: float, config: dict[str, Any], validation: list[tuple[int, float]]) -> None:
    """Everything needed to resume training at an update boundary."""
    atomic_torch_save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                       "value_norm": value_norm.state_dict(), "generators": generators,
                       "global_step": global_step, "update": update, "seconds": seconds, "config": config,
                       "validation": validation}, path)


def load_run_state(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The dict written by :func:`save_run_state`."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise CheckpointError(f"{path}: unreadable run state: {exc}") from exc
