"""MAT policy files: the small exported policy (+ JSON manifest), written by training and read by
:mod:`mara_agents.allocators.mat`.  Writes are atomic and reads verified (:mod:`mara_agents.checkpoint_io`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from mara_agents.checkpoint_io import CheckpointError, atomic_torch_save, read_checkpoint, write_checksum_manifest
from mara_agents.mat.model import MATHyperParameters, MATModel

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
