"""Checkpoint files shared by the FM predictor and MAT: atomic writes, verified reads, provenance.

Every write goes to a temporary file beside the target and is renamed over it (``os.replace``), so a run
killed mid-write never leaves a torn checkpoint.  Every read is verified and names the file in its error:

* an exported checkpoint must have a manifest (``<name>.json`` beside it) recording ``checkpoint_sha256``, and
  those bytes — a flipped bit is refused, not played; a checkpoint without one is read only when the caller
  asks for it (``verify=False``, ``--unverified`` on the command lines);
* weights must be finite (an all-NaN checkpoint loads without complaint from ``torch.load``);
* a training run's resumable state (``last.pt``) is written with a SHA-256 sidecar and the previous state is
  kept as ``last.prev.pt``; :func:`load_run_state` falls back to the previous state when the last one fails
  its check, and stops with a clear error when both do.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from mara_common.atomic import atomic_write_json

_PACKAGE = Path(__file__).resolve().parent


class CheckpointError(RuntimeError):
    """A checkpoint is missing, unreadable, corrupt or of the wrong kind; the message names the file."""


def file_sha256(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def atomic_torch_save(obj: Any, path: str | os.PathLike[str]) -> None:
    """``torch.save`` to a temporary file beside ``path``, then rename over it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def manifest_path(path: str | os.PathLike[str]) -> Path:
    """The JSON manifest beside a checkpoint."""
    return Path(path).with_suffix(".json")


def verify_manifest_checksum(path: Path, kind: str, verify: bool = True) -> None:
    """Refuse a checkpoint whose bytes differ from the SHA-256 its manifest records, or (with ``verify``) one
    without a manifest that records it; ``verify=False`` reads a checkpoint without a manifest unchecked."""
    manifest = manifest_path(path)
    if not manifest.is_file():
        if verify:
            raise CheckpointError(f"{path}: {kind} checkpoint has no manifest {manifest.name} to verify it against; "
                                  "pass --unverified (verify=False) to load it unchecked")
        return
    try:
        recorded = json.loads(manifest.read_text()).get("checkpoint_sha256")
    except (OSError, ValueError, AttributeError) as exc:
        raise CheckpointError(f"{manifest}: unreadable manifest of {kind} checkpoint {path.name}: {exc}") from exc
    if recorded is None and verify:
        raise CheckpointError(f"{manifest}: the manifest records no checkpoint_sha256 for {path.name}; pass "
                              "--unverified (verify=False) to load it unchecked")
    if recorded is not None and recorded != file_sha256(path):
        raise CheckpointError(f"{path}: {kind} checkpoint is corrupt: its SHA-256 differs from the one recorded in "
                              f"{manifest.name} (re-download or retrain it)")


def check_finite(state_dict: Mapping[str, torch.Tensor], path: Path, kind: str) -> None:
    """Refuse weights holding NaN or infinity, naming the file and the first such tensor."""
    for name, tensor in state_dict.items():
        if torch.is_tensor(tensor) and tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise CheckpointError(f"{path}: {kind} checkpoint holds non-finite weights (in {name!r})")


def read_checkpoint(path: str | os.PathLike[str], *, kind: str, fmt: str, version: int, train_hint: str,
                    verify: bool = True) -> dict[str, Any]:
    """Load and verify a ``{"format": fmt, "version": version, "state_dict": ...}`` payload.

    ``kind`` names the checkpoint in messages ("FM", "MAT"); ``train_hint`` is the command that makes one;
    ``verify=False`` accepts a checkpoint without a manifest (see :func:`verify_manifest_checksum`).
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: {kind} checkpoint not found (train one with `{train_hint}`)")
    verify_manifest_checksum(path, kind, verify)
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types, with many-line advice, for truncated or foreign files
        raise CheckpointError(f"{path}: unreadable {kind} checkpoint: not a file torch.save wrote, or cut short "
                              f"({type(exc).__name__})") from exc
    if not isinstance(payload, dict) or payload.get("format") != fmt:
        raise CheckpointError(f"{path}: not a {kind} checkpoint (expected format {fmt!r})")
    if payload.get("version") != version:
        raise CheckpointError(f"{path}: {kind} checkpoint version {payload.get('version')!r}, "
                              f"this code reads version {version}")
    if not isinstance(payload.get("state_dict"), Mapping):
        raise CheckpointError(f"{path}: {kind} checkpoint has no weights")
    check_finite(payload["state_dict"], path, kind)
    return payload


def write_checksum_manifest(path: str | os.PathLike[str], fields: Mapping[str, Any] | None = None) -> None:
    """Write ``<path>.json`` beside a checkpoint: ``fields`` plus its file name and SHA-256, which reading
    it verifies."""
    atomic_write_json(manifest_path(path), {**(fields or {}), "checkpoint": Path(path).name,
                                            "checkpoint_sha256": file_sha256(path)})


def previous_state(path: Path) -> Path:
    """Where the state before ``path`` is kept (``last.pt`` → ``last.prev.pt``)."""
    return path.with_name(f"{path.stem}.prev{path.suffix}")


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _replace_with_copy(source: Path, target: Path) -> None:
    """Make ``target`` a copy of ``source`` atomically (a hard link where the file system allows one)."""
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        os.link(source, tmp)
    except OSError:
        shutil.copyfile(source, tmp)
    os.replace(tmp, target)


def save_run_state(path: str | os.PathLike[str], state: dict[str, Any]) -> None:
    """Write a resumable training state with its SHA-256 sidecar, keeping the previous state beside it.

    A process killed at any moment leaves a ``path`` that loads without a fallback:
    - the previous state is *copied* aside, so ``path`` is never absent once written;
    - the new state goes to a temporary file first;
    - the sidecar is rewritten to list the new state's SHA-256 and the current one's, and only then is the new
      state renamed over ``path``, so the sidecar always names whichever state is there.
    """
    path = Path(path)
    current: list[str] = []
    if path.is_file() and _sidecar(path).is_file():
        _replace_with_copy(path, previous_state(path))
        _replace_with_copy(_sidecar(path), _sidecar(previous_state(path)))
        current = [file_sha256(path)]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    torch.save(state, tmp)
    sidecar_tmp = _sidecar(path).with_name(f".{_sidecar(path).name}.tmp")
    sidecar_tmp.write_text("\n".join([file_sha256(tmp), *current]) + "\n")
    os.replace(sidecar_tmp, _sidecar(path))
    os.replace(tmp, path)


def remove_run_state(path: str | os.PathLike[str]) -> None:
    """Delete a run state, the one before it and their checksums (a forced fresh start)."""
    path = Path(path)
    for state in (path, previous_state(path)):
        state.unlink(missing_ok=True)
        _sidecar(state).unlink(missing_ok=True)


def _read_state(path: Path) -> dict[str, Any]:
    sidecar = _sidecar(path)
    if not sidecar.is_file():
        raise CheckpointError(f"{path}: no checksum file {sidecar.name} beside the run state")
    if file_sha256(path) not in sidecar.read_text().split():  # the state's, or the one it is replacing
        raise CheckpointError(f"{path}: run state is corrupt (its SHA-256 differs from {sidecar.name})")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 — torch raises many types for truncated files
        raise CheckpointError(f"{path}: unreadable run state: {exc}") from exc
    if not isinstance(state, dict) or not isinstance(state.get("model"), Mapping):
        raise CheckpointError(f"{path}: not a run state")
    check_finite(state["model"], path, "run state")
    return state


def load_run_state(path: str | os.PathLike[str], warn: Any = print) -> dict[str, Any]:
    """The state written by :func:`save_run_state`, or — when it fails its check — the one before it
    (``warn`` is told which); a :class:`CheckpointError` naming both files when neither is usable."""
    path = Path(path)
    try:
        return _read_state(path)
    except CheckpointError as last_error:
        previous = previous_state(path)
        if not previous.is_file():
            raise CheckpointError(f"{last_error}; no previous state {previous.name} to fall back on — delete "
                                  f"{path.parent} or pass another run directory to start afresh") from None
        try:
            state = _read_state(previous)
        except CheckpointError as previous_error:
            raise CheckpointError(f"{last_error}; the previous state is not usable either: {previous_error}") from None
        warn(f"warning: {last_error}; resuming from {previous.name} instead")
        return state


def bank_checksum(root: str | os.PathLike[str]) -> str:
    """SHA-256 over a bank's manifest and array files (names and bytes, in sorted order)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in Path(root).iterdir() if p.name == "manifest.json" or p.suffix == ".npz"):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


REPOSITORY = _PACKAGE.parents[1]  # the checkout this code runs from


def portable_path(path: str | os.PathLike[str], root: Path = REPOSITORY) -> str:
    """``path`` relative to the repository (``root``) when it lies inside it, so records carry no machine's
    home."""
    resolved = Path(path).resolve()
    try:
        return resolved.relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def git_commit() -> str:
    """The repository commit this code runs from (with ``+dirty`` for uncommitted changes), or "unknown"."""
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=_PACKAGE, capture_output=True, text=True,
                                check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=_PACKAGE, capture_output=True, text=True,
                               check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("+dirty" if dirty else "")
