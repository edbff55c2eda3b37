"""Checkpoint files shared by the FM predictor and MAT: atomic writes, validated reads, provenance.

Every write goes to a temporary file beside the target and is renamed over it (``os.replace``), so a run
killed mid-write never leaves a torn checkpoint; every read names the file in its error.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path
from typing import Any

import torch

_PACKAGE = Path(__file__).resolve().parent


class CheckpointError(RuntimeError):
    """A checkpoint is missing, unreadable or of the wrong kind; the message names the file."""


def atomic_torch_save(obj: Any, path: str | os.PathLike[str]) -> None:
    """``torch.save`` to a temporary file beside ``path``, then rename over it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def read_checkpoint(path: str | os.PathLike[str], *, kind: str, fmt: str, version: int, train_hint: str
                    ) -> dict[str, Any]:
    """Load a ``{"format": fmt, "version": version, ...}`` payload written by :func:`atomic_torch_save`.

    ``kind`` names the checkpoint in messages ("FM", "MAT"); ``train_hint`` is the command that makes one.
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: {kind} checkpoint not found (train one with `{train_hint}`)")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types for truncated or foreign files
        raise CheckpointError(f"{path}: unreadable {kind} checkpoint: {exc}") from exc
    if not isinstance(payload, dict) or payload.get("format") != fmt:
        raise CheckpointError(f"{path}: not a {kind} checkpoint (expected format {fmt!r})")
    if payload.get("version") != version:
        raise CheckpointError(f"{path}: {kind} checkpoint version {payload.get('version')!r}, "
                              f"this code reads version {version}")
    return payload


def bank_checksum(root: str | os.PathLike[str]) -> str:
    """SHA-256 over a bank's manifest and array files (names and bytes, in sorted order)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in Path(root).iterdir() if p.name == "manifest.json" or p.suffix == ".npz"):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


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
