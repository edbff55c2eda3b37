"""MAT policy files: the small exported policy (+ JSON manifest), written by training and read by
:mod:`mara_agents.mat.policy`.  Writes are atomic and reads verified (:mod:`mara_agents.play.checkpoints`).

A file records the setting its policy was trained for (:class:`~mara_agents.mat.setting.Setting`).  Files
written before it did read as follows: a model without node tokens was trained with identical nodes and no
switching cost, on the node count its weights hold; a model with node tokens reads its setting from its
manifest's env config, and is of unknown setting (None) without one.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any, NamedTuple

import torch

from mara_agents.play.checkpoints import (CheckpointError, atomic_torch_save, file_sha256, manifest_path,
                                          read_checkpoint, write_checksum_manifest)
from mara_agents.mat.model import MATHyperParameters, MATModel
from mara_agents.mat.setting import Setting
from mara_agents.predictors.fm.predictor import DEFAULT_CHECKPOINT as DEFAULT_FM

FORMAT = "mara-mat-policy"
VERSION = 1


class LoadedPolicy(NamedTuple):
    """An exported policy: the model in eval mode, the predictor it was trained with, its setting (None when
    the file cannot tell)."""

    model: MATModel
    predictor: str
    setting: Setting | None


def export_policy(path: str | os.PathLike[str], model: MATModel, predictor: str,
                  manifest: dict[str, Any], setting: Setting | None = None) -> None:
    """Write the policy weights (no optimiser state) and its ``setting`` and ``<path>.json`` describing how it
    was trained, with the checkpoint's SHA-256 that loading verifies.  ``setting`` may be left out only for a
    model without node tokens, whose setting is its node count with the default options."""
    if setting is None:
        if model.hparams.node_features:
            raise ValueError("setting: a MAT with node tokens is exported with the setting it was trained for")
        setting = Setting(model.hparams.num_nodes)
    if setting.num_nodes != model.hparams.num_nodes:
        raise ValueError(f"setting: {setting.describe()} does not match the model's {model.hparams.num_nodes} nodes")
    atomic_torch_save({"format": FORMAT, "version": VERSION, "hparams": model.hparams.to_dict(),
                       "predictor": predictor, "setting": setting.record(),
                       "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()}}, path)
    write_checksum_manifest(path, manifest)


def load_policy(path: str | os.PathLike[str], device: str | torch.device = "cpu", verify: bool = True) -> LoadedPolicy:
    """The exported policy at ``path`` (``verify=False``: one without a manifest is accepted)."""
    path = Path(path)
    payload = read_checkpoint(path, kind="MAT", fmt=FORMAT, version=VERSION, train_hint="python train.py mat",
                              verify=verify)
    try:
        model = MATModel(MATHyperParameters(**payload["hparams"]))
        model.load_state_dict(payload["state_dict"])
        setting = _recorded_setting(path, payload, model.hparams)
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:
        raise CheckpointError(f"{path}: checkpoint does not match the MAT architecture: {exc}") from exc
    return LoadedPolicy(model.to(device).eval(), str(payload["predictor"]), setting)


def load_policy_model(path: str | os.PathLike[str], device: str | torch.device = "cpu",
                      verify: bool = True) -> tuple[MATModel, str]:
    """(model in eval mode, the predictor name it was trained with) from an exported checkpoint
    (``verify=False``: one without a manifest is accepted)."""
    loaded = load_policy(path, device, verify)
    return loaded.model, loaded.predictor


def _recorded_setting(path: Path, payload: dict[str, Any], hparams: MATHyperParameters) -> Setting | None:
    """The setting a file records, or what an older file implies (the module docstring)."""
    if "setting" in payload:
        return Setting.from_record(payload["setting"])
    if not hparams.node_features:
        return Setting(hparams.num_nodes)
    try:
        return Setting.from_record(json.loads(manifest_path(path).read_text())["config"]["env"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def check_trained_fm(path: str | os.PathLike[str], predictor: str, fm_checkpoint: str | os.PathLike[str] = "",
                     verify: bool = True) -> None:
    """Refuse to play the policy at ``path`` with an FM file other than the one it was trained with.

    A policy learned to act on its FM's estimates, so another FM silently changes what it does.  The manifest
    records the SHA-256 of the FM the run used (``predictor.checkpoint_sha256``); ``fm_checkpoint`` (empty:
    the shipped FM) must have the same bytes.  ``verify=False`` plays it anyway, with a warning naming both
    files.  Nothing is compared for a WLS policy, a missing FM file (its loader names it) or a manifest
    that records no FM hash.
    """
    if predictor != "fm":
        return
    fm = Path(fm_checkpoint or DEFAULT_FM)
    recorded = _recorded_fm(Path(path))
    if recorded is None or not fm.is_file():
        return
    trained_with, digest = recorded
    used = file_sha256(fm)
    if used == digest:
        return
    message = (f"{path}: policy trained with the FM {trained_with} (SHA-256 {digest[:12]}), not with {fm} (SHA-256 "
               f"{used[:12]}); pass the FM it was trained with as fm_checkpoint, or verify=False (--unverified) "
               "to play it with this one")
    if verify:
        raise CheckpointError(message)
    warnings.warn(message, stacklevel=2)


def _recorded_fm(path: Path) -> tuple[str, str] | None:
    """(path, SHA-256) of the FM the manifest beside ``path`` records, or None when it records none."""
    try:
        predictor = json.loads(manifest_path(path).read_text()).get("predictor")
    except (OSError, ValueError, AttributeError):  # no or foreign manifest: read_checkpoint has ruled on it
        return None
    if not isinstance(predictor, dict) or not isinstance(predictor.get("checkpoint_sha256"), str):
        return None
    return str(predictor.get("checkpoint")), predictor["checkpoint_sha256"]
